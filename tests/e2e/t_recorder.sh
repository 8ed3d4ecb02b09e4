#!/usr/bin/env bash
# The audit is written off the loop (src/api/recorder.c): while another process holds the audit
# lock, a `run` through serve waits for its intent record, and meanwhile serve still answers a
# ping on the same connection (before the recorder, the loop itself waited in flock and the ping
# hung). A cancel that arrives while the intent is being written ends the call as cancelled:
# nothing runs on the VM, and once the lock is free the audit holds its intent and an outcome
# with executed false, and verifies. The gate's own writes (a call that needs approval writes its
# refusal record and a challenge file) are off the loop too: while the lock is held, such a call
# waits on the thread pool and a ping on another connection is answered.
tid="recorder: audit writes off the loop, a cancel while the intent is written, the gate off the loop"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
RAN=$RX_TMP/ran
: >"$RAN"
ws_add_action t.mark "{\"risk\": \"L0\", \"command\": \"echo ran >> $RAN\"}"

SOCK=$RX_TMP/serve.sock
HOLDER=
# The lock holder runs in a session of its own, so that the whole of it (flock and the shell
# waiting on the FIFO) can be killed if the test fails while it holds the lock.
at_exit '[[ -z $HOLDER ]] || kill -KILL -- "-$HOLDER" 2>/dev/null'
start_serve --log off

# A first call creates the audit log (and its lock file) and warms the connection.
assert_exit 0 timeout 60 "$REXEC_BIN" --workspace "$WS" --socket "$SOCK" run lab1 t.mark
assert_eq 1 "$(wc -l <"$RAN")" "runs after the first call"

# Another process takes the audit lock and keeps it until told (a line on a FIFO).
mkfifo "$RX_TMP/release"
setsid flock "$WS/audit/.lock" bash -c 'echo held >"$1/held"; read -r _ <"$1/release"' _ "$RX_TMP" \
    </dev/null >/dev/null 2>&1 &
HOLDER=$!
wait_until 20 test -s "$RX_TMP/held"

timeout 60 "$RX_PYTHON" - "$SOCK" "$RX_TMP/release" >"$OUT" 2>"$ERR" <<'PY' || fail "protocol: $(cat "$ERR")"
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
s.connect(sys.argv[1])
f = s.makefile("rb")
send = lambda o: s.sendall((json.dumps(o) + "\n").encode())
send({"op": "run", "id": "r1", "targets": "lab1", "action": "t.mark"})
send({"op": "ping", "id": "p1"})
seen = []
while True:                       # the ping is answered while the intent waits for the lock
    o = json.loads(f.readline())
    seen.append(o)
    if o.get("type") == "pong":
        break
assert not any(o.get("id") == "r1" and o.get("type") in ("result", "done") for o in seen), seen
send({"op": "cancel", "id": "c1", "target": "r1"})
o = json.loads(f.readline())
assert o.get("type") == "cancelled" and o.get("found") is True, o
with open(sys.argv[2], "w") as rel:   # free the lock: the intent, then the outcome, go out
    rel.write("go\n")
while True:
    o = json.loads(f.readline())
    print(json.dumps(o, separators=(",", ":")))
    if o.get("id") == "r1" and o.get("type") == "done":
        break
PY
assert_contains "$OUT" '"executed":false'
assert_contains "$OUT" '"error":"lab1: cancelled before it started"'
assert_contains "$OUT" '"exit_status":130'
assert_eq 1 "$(wc -l <"$RAN")" "runs after the cancelled call (it never ran)"
wait "$HOLDER" 2>/dev/null || true
HOLDER=

# ---- the gate off the loop: a call that needs approval while another process holds the lock ---
rm -f "$RX_TMP/held" "$RX_TMP/release"
mkfifo "$RX_TMP/release"
setsid flock "$WS/audit/.lock" bash -c 'echo held >"$1/held"; read -r _ <"$1/release"' _ "$RX_TMP" \
    </dev/null >/dev/null 2>&1 &
HOLDER=$!
wait_until 20 test -s "$RX_TMP/held"
timeout 60 "$RX_PYTHON" - "$SOCK" "$RX_TMP/release" >"$RX_TMP/gate.out" 2>&1 <<'PY' || fail "gate off the loop: $(cat "$RX_TMP/gate.out")"
import json, socket, sys
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(20); s.connect(sys.argv[1])
    return s, s.makefile("rb")
a, af = conn()
a.sendall(b'{"op": "run", "id": "g1", "targets": "lab1", "action": "svc.restart", "params": {"unit": "x"}}\n')
b, bf = conn()
b.sendall(b'{"op": "ping", "id": "p2"}\n')
o = json.loads(bf.readline())           # answered while the gate waits for the audit lock
assert o.get("type") == "pong", o
with open(sys.argv[2], "w") as rel:
    rel.write("go\n")
while True:
    o = json.loads(af.readline())
    if o.get("id") == "g1" and o.get("type") == "done":
        break
assert o.get("exit_status") == 75, o      # held for approval, once the refusal was written
print("ok")
PY
wait "$HOLDER" 2>/dev/null || true
HOLDER=

# The trail: the cancelled call's intent and its outcome, and the chain whole.
RUN=$("$RX_PYTHON" -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o.get("type") == "result": print(o["run_id"])' "$OUT")
[[ -n $RUN ]] || fail "no run_id in the result"
assert_eq 1 "$(grep -c "\"run_id\":\"$RUN\",.*\"phase\":\"intent\"" "$WS/audit/audit.log")" "intent records"
assert_eq 1 "$(grep "\"run_id\":\"$RUN\"" "$WS/audit/audit.log" | grep -c '"phase":"outcome".*"executed":false')" "outcome records"
assert_exit 0 rx audit verify
pass
