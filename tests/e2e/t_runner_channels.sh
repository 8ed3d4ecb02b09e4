#!/usr/bin/env bash
# A runner and the host's channel budget, through serve (docs/remote-contract.md, "The runner";
# docs/workspace.md, max_channels). With "max_channels": 1 an idle runner holds the host's only
# channel, so:
#  - a call that cannot go through a runner (stdin past the runner's 1 MiB, which streams on a
#    channel of its own) makes serve retire the idle runner instead of waiting forever, and it
#    runs, byte-exact; the next small call gets a new runner;
#  - a call handed to a runner that is still starting (its connection frozen: the runner never
#    says "ready") and then cancelled ends 130 "cancelled before it started", with nothing run;
#    the connection, thawed, takes the next call;
#  - the same with "runner": false (the call's own channel), and a call on the frozen connection
#    that nobody cancels ends at its set-up deadline (connect_timeout_s), nothing run.
tid="runner: the channel budget, retiring and cancelling"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
RAN=$RX_TMP/ran
: >"$RAN"
ws_edit 'c["hosts"]["lab1"]["max_channels"] = 1'
# An idle runner would leave after runner_idle_s anyway: far beyond the calls' timeouts here, so
# a call that waited for that instead of a retired runner fails.
ws_edit 'c.setdefault("limits", {})["runner_idle_s"] = 3600'
ws_add_action t.ok '{"risk": "L0", "command": "echo ok"}'
ws_add_action t.mark "{\"risk\": \"L0\", \"command\": \"echo ran >>$RAN; echo marked\"}"
ws_add_action t.sha "{\"risk\": \"L0\", \"command\": \"sha256sum | cut -d' ' -f1\"}"

SOCK=$RX_TMP/serve.sock
start_serve
SX=("$REXEC_BIN" --workspace "$WS" --socket "$SOCK")
runners() { remote_pgrep '^bash /.*/\.rexec-[0-9]+/r\.[^/]*/slot ' >/dev/null; }

# ---- an idle runner gives its channel up to a call that needs one of its own -----------------
# The first call to a host takes a channel of its own; the second starts the runner, which then
# holds the only channel while idle.
assert_exit 0 timeout 60 "${SX[@]}" run lab1 t.ok
assert_exit 0 timeout 60 "${SX[@]}" run lab1 t.ok
wait_until 20 runners
head -c $((2 * 1024 * 1024)) /dev/urandom >"$RX_TMP/big"
want=$(sha256sum <"$RX_TMP/big" | cut -d' ' -f1)
assert_exit 0 timeout 60 "${SX[@]}" run lab1 t.sha --stdin "$RX_TMP/big"
assert_eq "$want" "$(cat "$OUT")" "sha256 of 2 MiB sent beside a retired runner"
wait_until 20 bash -c '! "$1" --dir "$2" ps "^bash /.*/\.rexec-[0-9]+/r\.[^/]*/slot " >/dev/null' \
    _ "$RX_LAB" "$LAB_DIR"
assert_exit 0 timeout 60 "${SX[@]}" run lab1 t.ok
assert_eq ok "$(cat "$OUT")" "the call after the retired runner"
wait_until 20 runners

# ---- a call cancelled while its runner starts -------------------------------------------------
# A new serve (so no runner yet): the first call opens the connection, and serve starts the
# host's runner as soon as that call ends. That runner is held on the VM until the cancel is
# over: lab1's sessions get a BASH_ENV that lets the first session's shell through (and any other
# bash) and makes every later session's wait on a FIFO (until the file "released" exists), so
# the runner never says "ready"
# before the freeze, however loaded the machine is. The connection is then frozen and the second
# call, waiting for that runner, is cancelled; the client releases the hold after the thaw.
stop_gently "$SERVE_PID"
HOLD=$RX_TMP/hold
mkfifo "$HOLD"
touch "$RX_TMP/released"
cat >"$RX_TMP/bash_env" <<EOF
case \$BASH_EXECUTION_STRING in
"LC_ALL=C IFS= read -r -N "*) # a session's shell (a call's own channel, or a runner)
    [ -e $RX_TMP/released ] || mkdir $RX_TMP/first 2>/dev/null || { read -r _ <$HOLD; } 2>/dev/null ;;
esac
EOF
lab_set_env lab1 "BASH_ENV=$RX_TMP/bash_env"
rm "$RX_TMP/released"
start_serve
wait_until 20 bash -c '! "$1" --dir "$2" ps "." >/dev/null' _ "$RX_LAB" "$LAB_DIR"
cat >"$RX_TMP/cancel.py" <<'PY'
import json, os, socket, subprocess, sys
sock, lab, labdir = sys.argv[1:4]
def release():  # the held runner (see above); its open of the FIFO returns once one opens it
    open(os.environ["RX_RELEASED"], "w").close()
    os.close(os.open(os.environ["RX_HOLD"], os.O_RDWR))
s = socket.socket(socket.AF_UNIX); s.connect(sock); f = s.makefile("rwb")
def send(o):
    f.write((json.dumps(o) + "\n").encode()); f.flush()
def until_done(i):
    res = None
    while True:
        o = json.loads(f.readline())
        if o.get("id") == i and o.get("type") == "result":
            res = o
        if o.get("id") == i and o.get("type") in ("done", "error"):
            return res or o
send({"op": "run", "id": 1, "targets": "lab1", "action": "t.ok"})
first = until_done(1)
subprocess.run([lab, "--dir", labdir, "freeze", "lab1"], check=True, stdout=subprocess.DEVNULL)
send({"op": "run", "id": 2, "targets": "lab1", "action": "t.mark"})
send({"op": "ping", "id": "p"})  # serve has taken request 2 once it answers the ping after it
while json.loads(f.readline()).get("id") != "p":
    pass
send({"op": "cancel", "id": 3, "target": 2})
second = until_done(2)
subprocess.run([lab, "--dir", labdir, "thaw", "lab1"], check=True, stdout=subprocess.DEVNULL)
release()
send({"op": "run", "id": 4, "targets": "lab1", "action": "t.ok"})
third = until_done(4)
out = [first, second, third]
if len(sys.argv) > 4:  # and a call on the frozen connection that nobody cancels: its set-up deadline
    subprocess.run([lab, "--dir", labdir, "freeze", "lab1"], check=True, stdout=subprocess.DEVNULL)
    send({"op": "run", "id": 5, "targets": "lab1", "action": "t.mark"})
    out.append(until_done(5))
    subprocess.run([lab, "--dir", labdir, "thaw", "lab1"], check=True, stdout=subprocess.DEVNULL)
    send({"op": "run", "id": 6, "targets": "lab1", "action": "t.ok"})
    out.append(until_done(6))
for r in out:
    print(json.dumps({k: r.get(k) for k in ("exit_status", "exit_code", "error", "stdout", "executed")}))
PY
export RX_HOLD=$HOLD RX_RELEASED=$RX_TMP/released
mapfile -t res < <(timeout 120 "$RX_PYTHON" "$RX_TMP/cancel.py" "$SOCK" "$RX_LAB" "$LAB_DIR")
[[ ${#res[@]} -eq 3 ]] || fail "cancel client: ${#res[@]} results"
[[ ${res[0]} == *'"exit_status": 0'*'"stdout": "ok\n"'* ]] || fail "the first call: ${res[0]}"
[[ ${res[1]} == *'"exit_status": 130'* ]] || fail "the cancelled call's exit code: ${res[1]}"
[[ ${res[1]} == *'cancelled before it started'* ]] || fail "the cancelled call's error: ${res[1]}"
[[ ${res[1]} == *'lab1'* ]] || fail "the cancelled call's error names no host: ${res[1]}"
[[ ${res[2]} == *'"exit_status": 0'*'"stdout": "ok\n"'* ]] || fail "the call after the thaw: ${res[2]}"
assert_eq 0 "$(wc -l <"$RAN")" "runs of the cancelled call on the VM"
[[ -d $RX_TMP/first ]] || fail "the hold on the runner never saw a session's shell (the test proves nothing)"

# ---- the same without a runner: the call's own channel ---------------------------------------
# Cancelled while its channel opens on the frozen connection: 130, nothing ran. Then, not
# cancelled: the set-up deadline (connect_timeout_s) ends it, naming the host and the phase.
stop_gently "$SERVE_PID"
ws_edit 'c["hosts"]["lab1"]["runner"] = False
c["limits"]["connect_timeout_s"] = 2'
start_serve
wait_until 20 bash -c '! "$1" --dir "$2" ps "." >/dev/null' _ "$RX_LAB" "$LAB_DIR"
mapfile -t res < <(timeout 120 "$RX_PYTHON" "$RX_TMP/cancel.py" "$SOCK" "$RX_LAB" "$LAB_DIR" deadline)
[[ ${#res[@]} -eq 5 ]] || fail "runner false: ${#res[@]} results"
[[ ${res[1]} == *'"exit_status": 130'*'lab1: cancelled before it started'* ]] ||
    fail "runner false: the cancelled call: ${res[1]}"
[[ ${res[2]} == *'"exit_status": 0'*'"stdout": "ok\n"'* ]] || fail "runner false: after the thaw: ${res[2]}"
[[ ${res[3]} == *'"exit_status": 255'* ]] || fail "runner false: the call past its set-up deadline: ${res[3]}"
[[ ${res[3]} == *'lab1: the connection does not answer'*'nothing ran'* ]] ||
    fail "runner false: the set-up deadline's error: ${res[3]}"
[[ ${res[4]} == *'"exit_status": 0'*'"stdout": "ok\n"'* ]] || fail "runner false: the last call: ${res[4]}"
assert_eq 0 "$(wc -l <"$RAN")" "runs of the cancelled and the timed-out calls on the VM"

stop_gently "$SERVE_PID"
wait_until 20 bash -c '! "$1" --dir "$2" ps "." >/dev/null' _ "$RX_LAB" "$LAB_DIR"
assert_exit 0 rx audit verify
pass
