# shellcheck shell=bash disable=SC2154 # sourced by bulk.sh, whose variables it uses
# Part of scripts/bench.d/bulk.sh (sourced, its variables in scope: R W tmp port ssh_ t stdin_mib):
# files in and out, `rexec put` / `rexec get` of $stdin_mib MiB against the bare libssh2 writer
# and reader (tests/bench/ssh_ceiling.c, the reader writing its file too: --out) and
# `ssh host 'cat > f'` / `ssh host cat f > f`, with the controller's peak RSS and the hash
# checked on the other side. Output to files in $tmp/vm (the lab's "VM" is this machine).
mkdir -p "$tmp/vm"
python3 - "$W" "$tmp/vm" <<'PY'
import json, os, sys
p = os.path.join(sys.argv[1], "rexec.json"); c = json.load(open(p)); vm = sys.argv[2]
name = {"name": {"type": "path"}}
c["actions"]["bulk.put"] = {"risk": "L0", "state_changing": False, "timeout_s": 3600,
                            "put": {"path": vm + "/{name}", "max_bytes": 1 << 34}, "params": name}
c["actions"]["bulk.get"] = {"risk": "L0", "timeout_s": 3600, "get": {"path": vm + "/{name}"}, "binary": True,
                            "max_output_bytes": 1 << 34, "params": name}
c["actions"]["bulk.gettext"] = {"risk": "L0", "timeout_s": 3600, "get": {"path": vm + "/{name}"},
                                "max_output_bytes": 1 << 34, "params": name}
json.dump(c, open(p, "w"), indent=1)
PY
fsha() { sha256sum <"$1" | cut -d' ' -f1; }
exact() { [[ -f $1 && $(fsha "$1") == "$want" ]] && echo byte-exact || echo "DIFFERENT (or missing: $(tail -1 "$tmp/err" 2>/dev/null))"; }
# seconds, peak RSS KiB and CPU seconds (user+sys) of the controller-side process: on a loaded
# machine the CPU time is the steadier figure
tc() { /usr/bin/time -f "%e %M %U %S" "$@" 2>"$tmp/time" >"$tmp/out" || cp "$tmp/time" "$tmp/err"; tail -1 "$tmp/time" | awk '{printf "%s %s %.2f\n", $1, $2, $3 + $4}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b/a}'; }
echo "== files: $stdin_mib MiB put and get (3 rounds, interleaved; seconds, peak RSS KiB; 'x' = speed of rexec relative to it)"
for r in 1 2 3; do
    rm -f "$tmp/vm/f" "$tmp/vm/g" "$tmp/vm/h" "$tmp/vm/b"
    if [[ -n ${base:-} ]]; then
        read -r bs bm bc < <(tc "$base" --workspace "$W" put lab1 bulk.put "$tmp/in" --param name=b)
        echo "put round $r, base $base: ${bs}s cpu ${bc}s (${bm} KiB, $(exact "$tmp/vm/b"))"
    fi
    read -r rs rm rc < <(tc "$R" --workspace "$W" put lab1 bulk.put "$tmp/in" --param name=f)
    ok=$(exact "$tmp/vm/f")
    read -r cs _ cc < <(tc build-release/ssh_ceiling 127.0.0.1 "$port" root "$W/keys/id_ed25519" "cat >$tmp/vm/g" --stdin "$tmp/in")
    read -r ss _ sc < <(tc "${ssh_[@]}" "cat >$tmp/vm/h" <"$tmp/in")
    echo "put round $r: rexec ${rs}s cpu ${rc}s (${rm} KiB, $ok)  libssh2 writer ${cs}s cpu ${cc}s  ssh 'cat > f' ${ss}s cpu ${sc}s  rexec vs libssh2 $(ratio "$rs" "$cs")x, vs ssh $(ratio "$rs" "$ss")x"
done
for r in 1 2 3; do
    rm -f "$tmp/got" "$tmp/got2" "$tmp/got3" "$tmp/gotb"
    if [[ -n ${base:-} ]]; then
        read -r bs bm bc < <(tc "$base" --workspace "$W" get lab1 bulk.get "$tmp/gotb" --param name=f)
        echo "get round $r, base $base: ${bs}s cpu ${bc}s (${bm} KiB, $(exact "$tmp/gotb"))"
    fi
    read -r rs rm rc < <(tc "$R" --workspace "$W" get lab1 bulk.get "$tmp/got" --param name=f)
    ok=$(exact "$tmp/got")
    read -r cs _ cc < <(tc build-release/ssh_ceiling 127.0.0.1 "$port" root "$W/keys/id_ed25519" "cat $tmp/vm/f" --out "$tmp/got2")
    ss=$( { /usr/bin/time -f "%e %U %S" "${ssh_[@]}" "cat $tmp/vm/f" >"$tmp/got3"; } 2>&1 | tail -1)
    read -r ss sc < <(awk '{printf "%s %.2f\n", $1, $2 + $3}' <<<"$ss")
    echo "get round $r: rexec ${rs}s cpu ${rc}s (${rm} KiB, $ok)  libssh2 reader ${cs}s cpu ${cc}s  ssh cat ${ss}s cpu ${sc}s  rexec vs libssh2 $(ratio "$rs" "$cs")x, vs ssh $(ratio "$rs" "$ss")x"
done
rm -f "$tmp/got"
read -r rs rm rc < <(tc "$R" --workspace "$W" get lab1 bulk.gettext "$tmp/got" --param name=f)
echo "get, text (redacted, 100 secrets): rexec ${rs}s cpu ${rc}s (${rm} KiB, $(exact "$tmp/got"): random bytes hold no secret)"
rm -f "$tmp/vm/f" "$tmp/vm/g" "$tmp/vm/h" "$tmp/vm/b" "$tmp/got" "$tmp/got2" "$tmp/got3" "$tmp/gotb"
