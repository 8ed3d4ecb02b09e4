#!/usr/bin/env bash
# serve's socket appears only once serve listens on it, with its mode set (docs/serve-protocol.md,
# "The socket"): a client that waits for the path and connects at once is never refused. The
# test build holds serve between its bind and its listen (REXEC_TEST_SERVE_LISTEN_DELAY_MS): with
# the path bound in place first, the connect below is refused (ECONNREFUSED) for that long.
tid="serve: the socket appears listening"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
SOCK=$RX_TMP/s.sock
REXEC_TEST_SERVE_LISTEN_DELAY_MS=1500 "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK" --log off \
    2>"$RX_TMP/serve.err" &
SERVE=$!
trap '_t_rc=$?; stop_gently "$SERVE"; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT
"$RX_PYTHON" - "$SOCK" <<'PY' || fail "a client that connected as soon as the socket appeared"
import json, os, socket, sys, time
path = sys.argv[1]
deadline = time.time() + 60
while not os.path.exists(path):
    if time.time() > deadline:
        sys.exit("the socket never appeared")
    time.sleep(0.001)
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(path)  # ECONNREFUSED here: bound, not listening yet
mode = os.stat(path).st_mode & 0o777
if mode != 0o600:
    sys.exit("mode %o when it appeared" % mode)
s.sendall(b'{"op": "ping", "id": 1}\n')
o = json.loads(s.makefile("rb").readline())
if o.get("type") != "pong":
    sys.exit("no pong: %r" % o)
PY
[[ -z $(ls "$RX_TMP" | grep '\.tmp$') ]] || fail "a temporary socket name was left: $(ls "$RX_TMP")"
pass
