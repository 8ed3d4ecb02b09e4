#!/usr/bin/env bash
# Bulk benchmark (not a test; `scripts/bench --bulk`): one lab host on 127.0.0.1, the release
# build, and in one run, interleaved:
#   - 256 MiB of stdout, redaction on with 100 secrets: rexec vs `ssh host 'head -c ...'`,
#     and the libssh2 ceiling (tests/bench/ssh_ceiling.c, blocking, one buffer), timed end to
#     end as the other two (process start, connect, authentication, exec, read) and its reading
#     alone;
#   - controller peak RSS (/usr/bin/time -v) for 1 MiB .. 1 GiB of output with a 1 GiB cap;
#   - 1 GiB of stdin from a file, staged and piped ("stdin": "piped"): rexec vs
#     `ssh host 'cat >/dev/null'` (byte-exact by sha256),
#     and the same through serve (streamed stdin: serve's peak RSS);
#   - 1 GiB of stdin from a pipe (`cat FILE | rexec run ... --stdin -`: sent in frames as it is
#     read) into sha256sum, staged and piped: rexec vs `cat FILE | ssh host sha256sum` vs the
#     libssh2 writer (ssh_ceiling --stdin /dev/stdin), with the controller's peak RSS.
#   - files: rexec put / get of the same file vs the libssh2 writer / reader and ssh (bulk_files.sh).
# Usage: scripts/bench.d/bulk.sh [--mib N] [--stdin-mib N] [--only-pipe] [--only-files]
#        [--pipe-rounds N] [--base REXEC]   (defaults 256, 1024, 3)
#   --only-pipe: the piped stdin rounds only; --only-files: put and get only; --base REXEC:
#   another rexec binary (say a release build of main) measured in the same rounds as this
#   tree's, interleaved (piped stdin, put and get), for an A/B on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
mib=256 stdin_mib=1024 only_pipe=0 only_files=0 pipe_rounds=3 base=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --mib) mib=$2; shift 2 ;;
        --stdin-mib) stdin_mib=$2; shift 2 ;;
        --only-pipe) only_pipe=1; shift ;;
        --only-files) only_files=1; shift ;;
        --base) base=$(realpath "$2"); shift 2 ;;
        --pipe-rounds) pipe_rounds=$2; shift 2 ;;
        *) echo "bench-bulk: unknown argument $1" >&2; exit 2 ;;
    esac
done
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release --target rexec -j2 >/dev/null
cc -O2 -std=c11 -D_GNU_SOURCE tests/bench/ssh_ceiling.c -lssh2 -o build-release/ssh_ceiling
R=$PWD/build-release/rexec
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rexec-bench-bulk.XXXXXX")
trap 'scripts/lab down --purge --dir "$tmp/lab" >/dev/null 2>&1 || true; rm -rf -- "$tmp"' EXIT
port=$((24000 + RANDOM % 4000))
scripts/lab up --dir "$tmp/lab" --hosts 1 --base-port "$port" >/dev/null
W=$tmp/lab/workspace
python3 - "$W" <<'PY'
import json, os, sys
ws = sys.argv[1]; p = os.path.join(ws, "rexec.json"); c = json.load(open(p))
names = []
for i in range(100):
    f = "secrets/bulk_%03d" % i
    fd = os.open(os.path.join(ws, f), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, os.urandom(12).hex().encode()); os.close(fd)
    c["secrets"]["BULK_%03d" % i] = {"file": f}; names.append("BULK_%03d" % i)
n = {"n": {"type": "string", "pattern": "^[0-9]{1,12}$"}}
c["actions"]["bulk.out"] = {"risk": "L0", "command": "head -c {n} /dev/zero", "params": n,
                            "secrets": names, "max_output_bytes": 1 << 30}
c["actions"]["bulk.in"] = {"risk": "L0", "command": "sha256sum"}
c["actions"]["bulk.sink"] = {"risk": "L0", "command": "cat >/dev/null"}
c["actions"]["bulk.psink"] = {"risk": "L0", "command": "cat >/dev/null", "stdin": "piped"}
c["actions"]["bulk.pin"] = {"risk": "L0", "command": "sha256sum", "stdin": "piped"}
c["limits"]["max_stdin_bytes"] = 1 << 34
c["limits"]["timeout_s"] = 600  # a GiB on a loaded machine: measured slow, not stopped
json.dump(c, open(p, "w"), indent=1)
PY
ssh_=(ssh -F /dev/null -i "$W/keys/id_ed25519" -o UserKnownHostsFile="$W/known_hosts" -o BatchMode=yes -p "$port" root@127.0.0.1)
t() { /usr/bin/time -f "%e %M" "$@" 2>"$tmp/time" >"$tmp/out"; tail -1 "$tmp/time"; }
bytes=$((mib * 1024 * 1024))
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
head -c $((stdin_mib * 1048576)) /dev/urandom >"$tmp/in"
want=$(sha256sum <"$tmp/in" | cut -d' ' -f1)
echo "== $stdin_mib MiB stdin from a pipe into sha256sum (cat FILE | ...; seconds, peak RSS KiB, the controller's CPU seconds)"
# p CMD...: `cat in | CMD`, timed (the pipe cannot end before cat has written everything)
# (a failure is printed, with what the command said, and the round goes on)
p() {
    cat "$tmp/in" | /usr/bin/time -f "%e %M %U %S" "$@" 2>"$tmp/time" >"$tmp/out" ||
        echo "FAILED: $*: $(head -n 3 "$tmp/time" | tr '\n' ' ')" >&2
    tail -1 "$tmp/time" | awk '{printf "%s %s %.2f\n", $1, $2, $3 + $4}'
}
exact() { grep -q "$want" "$tmp/out" && echo ok || echo DIFFERENT; }
if [[ $only_files == 1 ]]; then
    pipe_rounds=0
fi
for r in $(seq "$pipe_rounds"); do
    if [[ -n $base ]]; then
        read -r bs bm bc < <(p "$base" --workspace "$W" run lab1 bulk.pin --stdin -); bo=$(exact)
    fi
    read -r rs rm rc < <(p "$R" --workspace "$W" run lab1 bulk.in --stdin -); ro=$(exact)
    read -r ps pm pc < <(p "$R" --workspace "$W" run lab1 bulk.pin --stdin -); po=$(exact)
    read -r ss sm sc < <(p "${ssh_[@]}" sha256sum); so=$(exact)
    read -r cs cm cc < <(p build-release/ssh_ceiling 127.0.0.1 "$port" root "$W/keys/id_ed25519" sha256sum --stdin /dev/stdin)
    echo "round $r: rexec staged ${rs}s (${rm} KiB, cpu ${rc}s, $ro)  piped ${ps}s (${pm} KiB, cpu ${pc}s, $po)  ssh ${ss}s (${sm} KiB, cpu ${sc}s, $so)  libssh2 writer ${cs}s (${cm} KiB, cpu ${cc}s)  speed vs ssh: staged $(awk -v a="$rs" -v b="$ss" 'BEGIN{printf "%.2f", b/a}')x, piped $(awk -v a="$ps" -v b="$ss" 'BEGIN{printf "%.2f", b/a}')x; vs the writer: staged $(awk -v a="$rs" -v b="$cs" 'BEGIN{printf "%.2f", b/a}')x, piped $(awk -v a="$ps" -v b="$cs" 'BEGIN{printf "%.2f", b/a}')x"
    if [[ -n $base ]]; then
        echo "round $r, base $base: piped ${bs}s (${bm} KiB, cpu ${bc}s, $bo)  vs ssh $(awk -v a="$bs" -v b="$ss" 'BEGIN{printf "%.2f", b/a}')x, vs the writer $(awk -v a="$bs" -v b="$cs" 'BEGIN{printf "%.2f", b/a}')x"
    fi
done
if [[ $only_files == 1 ]]; then
    . scripts/bench.d/bulk_files.sh
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi
if [[ $only_pipe == 1 ]]; then
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi
echo "== $mib MiB stdout, 100 secrets (3 rounds, interleaved; seconds and peak RSS KiB)"
for r in 1 2 3; do
    read -r rs rm < <(t "$R" --workspace "$W" run lab1 bulk.out --param n=$bytes)
    read -r ss sm < <(t "${ssh_[@]}" "head -c $bytes /dev/zero")
    read -r cs cm < <(t build-release/ssh_ceiling 127.0.0.1 "$port" root "$W/keys/id_ed25519" "head -c $bytes /dev/zero")
    ceil=$(awk '{print $3}' "$tmp/out")
    echo "round $r: rexec ${rs}s (${rm} KiB)  ssh ${ss}s  libssh2 ceiling ${cs}s end to end (${ceil}s reading)  speed vs ssh: rexec $(awk -v a="$rs" -v b="$ss" 'BEGIN{printf "%.2f", b/a}')x, ceiling $(awk -v a="$cs" -v b="$ss" 'BEGIN{printf "%.2f", b/a}')x"
done
echo "== controller peak RSS, 1 GiB cap"
for m in 1 16 256 1024; do
    read -r s k < <(t "$R" --workspace "$W" run lab1 bulk.out --param n=$((m * 1048576)))
    echo "$m MiB: ${s}s peak RSS ${k} KiB"
done
echo "== $stdin_mib MiB stdin from a file (timed: 'cat >/dev/null' on both sides; then once through sha256sum)"
# staged: the default ("stdin": "staged"); piped: an action with "stdin": "piped"
for r in 1 2 3; do
    read -r rs rm < <(t "$R" --workspace "$W" run lab1 bulk.sink --stdin "$tmp/in")
    read -r ps pm < <(t "$R" --workspace "$W" run lab1 bulk.psink --stdin "$tmp/in")
    read -r ss sm < <(t "${ssh_[@]}" 'cat >/dev/null' <"$tmp/in")
    read -r cs cm < <(t build-release/ssh_ceiling 127.0.0.1 "$port" root "$W/keys/id_ed25519" 'cat >/dev/null' --stdin "$tmp/in")
    ceil=$(awk '{print $3}' "$tmp/out")
    echo "round $r: rexec staged ${rs}s (${rm} KiB)  piped ${ps}s (${pm} KiB)  ssh cat ${ss}s  libssh2 ceiling ${cs}s end to end (${ceil}s sending)  speed vs ssh: staged $(awk -v a="$rs" -v b="$ss" 'BEGIN{printf "%.2f", b/a}')x, piped $(awk -v a="$ps" -v b="$ss" 'BEGIN{printf "%.2f", b/a}')x, ceiling $(awk -v a="$cs" -v b="$ss" 'BEGIN{printf "%.2f", b/a}')x"
done
read -r rs rm < <(t "$R" --workspace "$W" run lab1 bulk.in --stdin "$tmp/in")
grep -q "$want" "$tmp/out" && ok=byte-exact || ok=DIFFERENT
echo "through sha256sum on the VM: rexec staged ${rs}s (${rm} KiB): $ok"
read -r rs rm < <(t "$R" --workspace "$W" run lab1 bulk.pin --stdin "$tmp/in")
grep -q "$want" "$tmp/out" && ok=byte-exact || ok=DIFFERENT
echo "through sha256sum on the VM: rexec piped ${rs}s (${rm} KiB): $ok"
echo "== $stdin_mib MiB stdin through serve (streamed in raw \"stdin\" pieces, spooled, then sent)"
"$R" --workspace "$W" serve --socket "$tmp/s.sock" --log off 2>/dev/null &
sp=$!
for _ in $(seq 100); do [[ -S $tmp/s.sock ]] && break; sleep 0.1; done
for r in 1 2; do
    read -r cs cm < <(t "$R" --workspace "$W" --socket "$tmp/s.sock" run lab1 bulk.in --stdin "$tmp/in")
    grep -q "$want" "$tmp/out" && ok=byte-exact || ok=DIFFERENT
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$sp/status")
    echo "round $r: through serve ${cs}s (client ${cm} KiB, serve peak so far ${hwm} KiB, $ok)"
done
kill "$sp"; wait "$sp" 2>/dev/null || true
. scripts/bench.d/bulk_files.sh
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
