#!/usr/bin/env bash
# A call waiting in the pool's queue holds no evidence files (issue #30: serve held 3 evidence fds
# and 512 KiB of buffers per queued call; a thousand queued calls ran it out of descriptors). With
# max_channels 1 and no runner, one call holds the only channel and 20 more wait behind it on one
# serve connection. Once all 21 intents are in the audit log (the old code opened the evidence
# before the intent), serve's open fds are counted: at most the running call's evidence more than
# before. Then the holder is released and the 20 run, each with its evidence file; the 20 are
# cancelled-free, so every one is executed, and the audit verifies.
tid="pool: a queued call holds no evidence files"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c["hosts"]["lab1"].update({"max_channels": 1, "max_connections": 1, "runner": False})'
HOLD=$RX_TMP/hold.started
RELEASE=$RX_TMP/hold.release
ws_add_action t.hold "{\"risk\": \"L0\", \"command\": \"touch $HOLD; while [ ! -e $RELEASE ]; do sleep 0.05; done; echo held\"}"
ws_add_action t.one '{"risk": "L0", "command": "echo one"}'

SOCK=$RX_TMP/s.sock
at_exit 'touch "$RELEASE"'
start_serve --log off
assert_exit 0 timeout 60 "$REXEC_BIN" --workspace "$WS" --socket "$SOCK" run lab1 t.one  # warm
fds() { find "/proc/$SERVE_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
intents() { grep -c '"phase":"intent"' "$WS/audit/audit.log" || true; }
base_intents=$(intents)

timeout 120 "$RX_PYTHON" - "$SOCK" "$HOLD" "$RELEASE" "$WS/audit/audit.log" "$base_intents" \
    "/proc/$SERVE_PID/fd" >"$OUT" 2>"$ERR" <<'PY' || fail "queue: $(cat "$ERR")"
import json, os, socket, sys, time
sock, hold, release, log, base, fddir = sys.argv[1:]
def fds():
    return len(os.listdir(fddir))
s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sock)
f = s.makefile("rb")
before = fds()
send = lambda o: s.sendall((json.dumps(o) + "\n").encode())
send({"op": "run", "id": "hold", "targets": "lab1", "action": "t.hold"})
deadline = time.monotonic() + 60
while not os.path.exists(hold):
    assert time.monotonic() < deadline, "the holder never started"
    time.sleep(0.02)
for i in range(20):
    send({"op": "run", "id": "q%d" % i, "targets": "lab1", "action": "t.one"})
def intents():
    return sum(1 for l in open(log) if '"phase":"intent"' in l)
while intents() < int(base) + 21:
    assert time.monotonic() < deadline, "not every intent was written"
    time.sleep(0.02)
queued = fds()
print("serve fds: %d before, %d with one call running and 20 queued" % (before, queued))
# the running call's evidence (3) and its channel; nothing per queued call
assert queued - before <= 6, (before, queued)
open(release, "w").close()
done = 0
while done < 21:
    o = json.loads(f.readline())
    if o.get("type") == "done":
        assert o.get("exit_status") == 0, o
        done += 1
print("21 calls done")
PY
cat "$OUT"
assert_contains "$OUT" "21 calls done"
assert_eq 22 "$(find "$WS/evidence" -mindepth 1 -maxdepth 1 -type d -name '[!.]*' | wc -l)" "evidence directories (warm-up, holder, 20 queued; not the spare)"
assert_exit 0 rx audit verify
pass
