#!/usr/bin/env bash
# Oneshot calls in a fork of the runner's slot (docs/remote-contract.md, "Oneshot calls in a
# fork of the slot"), through `rexec serve` and sshd:
#  - a oneshot command that may run in a fork (`env`, `find /proc/self/fd ...`, `sh -c '...'`
#    with a cwd) sees the same environment (sorted, without `_` and SHLVL, which an exec'd
#    command sees one lower also in a fresh shell), the same open descriptors, the same working
#    directory, umask and limits as the same command made non-oneshot (`CMD; :`), which runs
#    in a fresh call shell; a secret of the call is there in both, redacted;
#  - once its slots ran oneshot calls, a runner keeps no call shell waiting: the next oneshot
#    call runs in a fork of the slot (in a PID namespace; under process-group containment the
#    slots start their shells in advance as before, and calls give the same results).
tid="runner: oneshot calls in a fork of the slot"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'

SERVE_PID=
# (_rx_cleanup takes the test's status from $?)
trap '_t_rc=$?; [ -z "$SERVE_PID" ] || stop_gently "$SERVE_PID"; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT
start_serve() {
    "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK" 2>>"$RX_TMP/serve.err" &
    SERVE_PID=$!
    wait_until 20 test -S "$SOCK"
}
stop_serve() {
    kill -TERM "$SERVE_PID"
    wait "$SERVE_PID" || true
    SERVE_PID=
    rm -f "$SOCK"
}

# calls ACTION[:N] ...: one after the other on one connection; one json line per call that has
# no count ({"exit_code", "stdout", "containment"}); a counted call must exit 0.
CLIENT=$RX_TMP/client.py
cat >"$CLIENT" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(120)
s.connect(sys.argv[1])
f = s.makefile("rb")
n = 0
for spec in sys.argv[2:]:
    action, _, count = spec.partition(":")
    for i in range(int(count or 1)):
        n += 1
        s.sendall((json.dumps({"op": "run", "id": n, "targets": "lab1", "action": action}) + "\n").encode())
        r = {}
        while True:
            o = json.loads(f.readline())
            if o.get("type") == "result" and o.get("id") == n:
                r = o
            if o.get("type") in ("done", "error") and o.get("id") == n:
                break
        r = r or o
        if count and r.get("exit_code") != 0:
            print(json.dumps(r)); sys.exit(1)
        if not count:
            print(json.dumps({"exit_code": r.get("exit_code"), "stdout": r.get("stdout"),
                              "containment": r.get("containment")}))
PY
calls() { timeout 600 "$RX_PYTHON" "$CLIENT" "$SOCK" "$@"; }
field() { "$RX_PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
SOCK=$RX_TMP/rexec.sock

printf 'rxs-%s-tail' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$WS/secrets/tok"
chmod 600 "$WS/secrets/tok"
ws_edit 'c["secrets"]["FORK_TOKEN"] = {"file": "secrets/tok"}'
# each probe twice: oneshot (may run in a fork) and not (": " after it: a fresh call shell)
add_probe() { # NAME COMMAND [CWD]
    ws_edit 'c["actions"][args[0]] = {"risk": "L0", "command": args[1], "secrets": ["FORK_TOKEN"]}
if args[2]: c["actions"][args[0]]["cwd"] = args[2]' "t.$1" "$2" "${3:-}"
    ws_edit 'c["actions"][args[0]] = {"risk": "L0", "command": args[1] + "; :", "secrets": ["FORK_TOKEN"]}
if args[2]: c["actions"][args[0]]["cwd"] = args[2]' "t.$1.fresh" "$2" "${3:-}"
}
add_probe env 'env'
add_probe fds "find /proc/self/fd/ -mindepth 1 -maxdepth 1 -printf '%f %l\\n'"
add_probe cwd "sh -c 'pwd; umask; ulimit -a; test -n \"\$FORK_TOKEN\" && echo token'" /usr
ws_add_action t.uname '{"risk": "L0", "command": "uname -a"}'

# norm PROBE OUTPUT: what both runs must agree on
norm() {
    case $1 in
    env) grep -Ev '^(_|SHLVL)=' <<<"$2" | sort ;;
    fds) grep -v ' /proc/' <<<"$2" | sort ;;
    *) printf '%s\n' "$2" ;;
    esac
}

# The slots of the one runner, once both wait for their next call: blocked in a read of their
# FIFO n<k> (fd 4; /proc/PID/syscall: read is 0 on x86_64, 63 on aarch64), which each reaches
# only after it started (or not) the next call's shell. Where Yama keeps /proc/PID/syscall to
# the slot's ancestors, its wchan says the same: the only pipe a slot blocks in a read of is
# n<k> (its other reads have a timeout or none to wait for).
READ_NR=$(case $(uname -m) in x86_64) echo 0 ;; aarch64) echo 63 ;; *) echo x ;; esac)
slots_idle() {
    local p n=0 sc
    for p in $(remote_pgrep '^bash /[^ ]*/\.rexec-[0-9]+/r\.[^ /]*/slot '); do
        if read -r sc <"/proc/$p/syscall" 2>/dev/null; then
            [[ $sc == "$READ_NR 0x4 "* ]] && n=$((n + 1))
        else
            read -r sc <"/proc/$p/wchan" 2>/dev/null && [[ $sc == *pipe_read ]] && n=$((n + 1))
        fi
    done
    [[ $n == 2 ]]
}
# slot_children: the processes the two slots have while idle (a call shell started in advance)
slot_children() {
    local p n=0
    wait_until 30 slots_idle
    for p in $(remote_pgrep '^bash /[^ ]*/\.rexec-[0-9]+/r\.[^ /]*/slot '); do
        n=$((n + $(wc -w <"/proc/$p/task/$p/children")))
    done
    echo "$n"
}

for cont in pid-namespace process-group; do
    [[ $cont == pid-namespace ]] || ws_edit 'c["hosts"]["lab1"]["containment"] = "process-group"'
    start_serve
    # (the first call to a host takes a channel of its own; then one runner, two slots)
    calls t.uname:6 >"$OUT" || fail "$cont: warm-up: $(cat "$OUT")"
    for probe in env fds cwd; do
        mapfile -t res < <(calls "t.$probe" "t.$probe" "t.$probe.fresh")
        [[ ${#res[@]} == 3 ]] || fail "$cont: $probe: ${#res[@]} results"
        assert_eq "$cont" "$(field "${res[0]}" containment)" "$cont: $probe: containment"
        want=$(norm "$probe" "$(field "${res[2]}" stdout)")
        [[ $want == *REDACTED:FORK_TOKEN* || $want == *token* || $probe == fds ]] ||
            fail "$cont: $probe: the secret is not in its call: $want"
        for i in 0 1; do
            assert_eq 0 "$(field "${res[$i]}" exit_code)" "$cont: $probe: exit code"
            got=$(norm "$probe" "$(field "${res[$i]}" stdout)")
            [[ $got == "$want" ]] ||
                fail "$cont: $probe: the oneshot command saw other than in a fresh shell:$(diff <(echo "$want") <(echo "$got"))"
        done
    done
    calls t.uname:4 >"$OUT" || fail "$cont: $(cat "$OUT")"
    if [[ $cont == pid-namespace ]]; then
        assert_eq 0 "$(slot_children)" "$cont: shells the slots keep waiting after oneshot calls"
        calls t.env.fresh t.env.fresh >"$OUT" || fail "$cont: $(cat "$OUT")"
        assert_eq 2 "$(slot_children)" "$cont: shells the slots keep waiting after other calls"
    fi
    stop_serve
done
pass
