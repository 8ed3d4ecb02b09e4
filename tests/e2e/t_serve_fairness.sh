#!/usr/bin/env bash
# Fairness on the loop (docs/architecture.md, "libssh2 and libuv facts"): a drive of a connection
# reads a bounded amount (RX_READ_BUDGET) and gives the loop back. What libssh2 has already taken
# from the socket must still be read when the socket then goes quiet: here a command writes
# 4 MiB and then waits (it neither writes nor exits). The client must get all 4 MiB while the
# command still runs; a session that waited for the socket to turn readable again would leave
# the tail in libssh2's queue until the command ended. With runners and without.
tid="serve: a bounded drive comes back for what libssh2 holds"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
ws_edit 'c["hosts"]["lab2"]["runner"] = False; c["limits"]["max_output_bytes"] = 64 << 20'
ws_add_action t.burst '{"risk": "L0", "command": "head -c 4194304 /dev/zero; exec sleep 600", "timeout_s": 900}'

SOCK=$RX_TMP/serve.sock
start_serve --log off

for host in lab1 lab2; do
    timeout 120 "$RX_PYTHON" - "$SOCK" "$host" >"$OUT" 2>"$ERR" <<'PY' || fail "$host: $(cat "$ERR")"
import base64, json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
# the command never ends by itself: a tail left in libssh2's queue would never come
s.settimeout(30)
s.connect(sys.argv[1])
f = s.makefile("rb")
send = lambda o: s.sendall((json.dumps(o) + "\n").encode())
send({"op": "run", "id": "b", "targets": sys.argv[2], "action": "t.burst", "stream": True})
got = 0
while got < 4 << 20:
    o = json.loads(f.readline())
    assert o["type"] in ("accepted", "output"), o
    if o["type"] == "output":
        got += len(base64.b64decode(o["data_base64"])) if "data_base64" in o else len(o["data"])
assert got == 4 << 20, got
send({"op": "cancel", "id": "c", "target": "b"})
while True:
    o = json.loads(f.readline())
    if o["type"] == "result":
        assert o["exit_status"] == 130 and o["stdout_bytes"] == 4 << 20, o
    if o["type"] == "done":
        break
print("burst ok")
PY
    assert_contains "$OUT" "burst ok"
done
pass
