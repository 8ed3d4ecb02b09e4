#!/usr/bin/env bash
# rexec serve under systemd socket activation (contrib/systemd/rexec-serve.socket), emulated the
# way systemd does it: a listening socket as fd 3, LISTEN_PID = serve's pid, LISTEN_FDS=1.
# serve answers on that socket without binding its own, refuses a --socket that names another
# path, and leaves the socket file in place when it stops (it is systemd's).
tid="serve: systemd socket activation"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.one '{"risk": "L0", "command": "echo one"}'
SOCK=$RX_TMP/activated.sock

# activate SOCK ARGS...: like systemd, listen on SOCK, then exec rexec with it as fd 3
cat >"$RX_TMP/activate.py" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o600); s.listen(16)
os.dup2(s.fileno(), 3); os.set_inheritable(3, True)
os.environ["LISTEN_PID"] = str(os.getpid()); os.environ["LISTEN_FDS"] = "1"
os.execv(sys.argv[2], sys.argv[2:])
PY
"$RX_PYTHON" "$RX_TMP/activate.py" "$SOCK" "$REXEC_BIN" --workspace "$WS" serve 2>"$RX_TMP/serve.err" &
SERVE=$!
trap '_t_rc=$?; stop_gently $SERVE; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT
wait_until 20 grep -q "listening on the socket systemd passed" "$RX_TMP/serve.err"
assert_exit 0 timeout 60 "$REXEC_BIN" --workspace "$WS" --socket "$SOCK" run lab1 t.one
assert_contains "$OUT" "one"
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve did not stop cleanly"
test -S "$SOCK" || fail "serve removed the socket systemd holds"
rm -f "$SOCK"

# --socket naming another path than the one passed is refused
assert_exit 64 "$RX_PYTHON" "$RX_TMP/activate.py" "$SOCK" "$REXEC_BIN" --workspace "$WS" serve \
    --socket "$RX_TMP/other.sock"
assert_contains "$ERR" "--socket $RX_TMP/other.sock, but systemd passed $SOCK"
rm -f "$SOCK"

# without activation and without --socket: a clear usage error
assert_exit 64 rx serve
assert_contains "$ERR" "--socket PATH is required (or start it from a systemd socket unit)"
SERVE=
pass
