#!/usr/bin/env bash
# serve's socket path and per-connection limits (docs/serve-protocol.md, "Limits"; docs/cli.md):
# a stale socket file is replaced, a live serve's socket, a file that is not a socket, a path
# too long and a directory that does not exist are refused (64) naming why; a request line past
# 68 KiB gets one error and the connection goes on; at most 1024 requests in flight per
# connection; requests without targets or a cancel without target are refused (65).
tid="serve: socket path, line and request limits"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.echo '{"risk": "L0", "command": "echo {text}", "params": {"text": {"type": "string"}}}'
SERVE_PIDS=()
trap '_t_rc=$?; stop_gently ${SERVE_PIDS[@]+"${SERVE_PIDS[@]}"}; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT
serve_bg() { # SOCK: a serve in the background on SOCK, up once the socket accepts
    "$REXEC_BIN" --workspace "$WS" serve --socket "$1" --log off 2>>"$RX_TMP/serve.err" &
    SERVE_PIDS+=($!)
    wait_until 20 "$RX_PYTHON" -c 'import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$1"
}

# A socket file nobody listens on (a serve that died) is replaced.
SOCK=$RX_TMP/s.sock
"$RX_PYTHON" -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$SOCK"
test -S "$SOCK" || fail "no stale socket made"
serve_bg "$SOCK"
# A live serve's socket is not taken over.
assert_exit 64 timeout 20 "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK"
assert_contains "$ERR" "$SOCK: another rexec serve is listening there"
# Anything that is not a socket is not replaced.
: >"$RX_TMP/plain"
assert_exit 64 timeout 20 "$REXEC_BIN" --workspace "$WS" serve --socket "$RX_TMP/plain"
assert_contains "$ERR" "$RX_TMP/plain exists and is not a socket: refusing to replace it"
test -f "$RX_TMP/plain" || fail "the plain file was removed"
assert_exit 64 timeout 20 "$REXEC_BIN" --workspace "$WS" serve --socket "/tmp/$(printf 'y%.0s' $(seq 120))"
assert_contains "$ERR" "is longer than 107 bytes"
assert_exit 64 timeout 20 "$REXEC_BIN" --workspace "$WS" serve --socket "$RX_TMP/no/such/dir/s.sock"
assert_contains "$ERR" "cannot listen on $RX_TMP/no/such/dir/s.sock"

timeout 120 "$RX_PYTHON" - "$SOCK" >"$OUT" 2>"$ERR" <<'PY' || fail "protocol: $(cat "$ERR")"
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sys.argv[1])
f = s.makefile("rb")
send = lambda o: s.sendall((json.dumps(o) + "\n").encode())
def reply(want_id):
    while True:
        o = json.loads(f.readline())
        if o.get("id") == want_id:
            return o

# a line past 68 KiB: one error (id null), the rest of it skipped, the connection usable
s.sendall(b'{"op":"ping","id":"big","pad":"' + b"x" * (70 * 1024) + b'"}\n')
o = json.loads(f.readline())
assert o == {"id": None, "type": "error", "error": "request line longer than 68 KiB",
             "exit_status": 65}, o
send({"op": "ping", "id": "after"})
assert reply("after")["type"] == "pong"

# refusals of a request as a whole
send({"op": "run", "id": "nt", "action": "t.echo", "params": {"text": "x"}})
o = reply("nt")
assert o["type"] == "error" and o["exit_status"] == 65 and o["error"].startswith("targets: missing"), o
send({"op": "cancel", "id": "nc"})
o = reply("nc")
assert o["type"] == "error" and "target: missing" in o["error"], o

# at most 1024 requests in flight on one connection: evals waiting for their streamed stdin
for i in range(1024):
    send({"op": "eval", "id": i, "targets": "lab1", "action": "t.echo", "params": {"text": "x"},
          "stdin_stream": True})
for i in range(1024):
    assert reply(i)["type"] == "accepted"
send({"op": "eval", "id": "over", "targets": "lab1", "action": "t.echo", "params": {"text": "x"}})
o = reply("over")
assert o["type"] == "error" and "too many requests in flight on this connection (at most 1024)" in o["error"], o
send({"op": "ping", "id": "still"})     # other ops still answer
assert reply("still")["type"] == "pong"
for i in range(1024):                   # their stdin ends: each is decided and done
    send({"op": "stdin", "target": i, "eof": True})
done = 0
while done < 1024:
    o = json.loads(f.readline())
    if o.get("type") == "done":
        assert o["exit_status"] == 0, o
        done += 1
send({"op": "eval", "id": "again", "targets": "lab1", "action": "t.echo", "params": {"text": "x"}})
assert reply("again")["type"] == "accepted"
print("limits ok")
PY
assert_contains "$OUT" "limits ok"
assert_exit 0 rx audit verify
pass
