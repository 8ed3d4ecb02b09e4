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
#   - files: rexec put / get of the same file vs the libssh2 writer / reader and ssh (bulk_files.sh).
# Usage: scripts/bench.d/bulk.sh [--mib N] [--stdin-mib N]   (defaults 256, 1024)
set -euo pipefail
cd "$(dirname "$0")/../.."
mib=256 stdin_mib=1024
while [[ $# -gt 0 ]]; do
    case $1 in
        --mib) mib=$2; shift 2 ;;
        --stdin-mib) stdin_mib=$2; shift 2 ;;
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
json.dump(c, open(p, "w"), indent=1)
PY
ssh_=(ssh -F /dev/null -i "$W/keys/id_ed25519" -o UserKnownHostsFile="$W/known_hosts" -o BatchMode=yes -p "$port" root@127.0.0.1)
t() { /usr/bin/time -f "%e %M" "$@" 2>"$tmp/time" >"$tmp/out"; tail -1 "$tmp/time"; }
bytes=$((mib * 1024 * 1024))
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
head -c $((stdin_mib * 1048576)) /dev/urandom >"$tmp/in"
want=$(sha256sum <"$tmp/in" | cut -d' ' -f1)
. scripts/bench.d/bulk_files.sh
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
