#!/usr/bin/env bash
# rexec serve under systemd socket activation (contrib/systemd/rexec-serve.socket), emulated the
# way systemd does it: a listening socket as fd 3, LISTEN_PID = serve's pid, LISTEN_FDS=1.
# serve answers on that socket without binding its own, refuses a --socket that names another
# path, and leaves the socket file in place when it stops (it is systemd's).
# Refused at start (64): two sockets (LISTEN_FDS=2), and an fd 3 that is not a listening Unix
# stream socket (not listening, a datagram socket, a regular file).
tid="serve: systemd socket activation"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.one '{"risk": "L0", "command": "echo one"}'
SOCK=$RX_TMP/activated.sock

# activate SOCK ARGS...: like systemd, listen on SOCK, then exec rexec with it as fd 3
# (ACT_KIND=unlistened / datagram / file passes something else as fd 3; ACT_FDS sets LISTEN_FDS.)
cat >"$RX_TMP/activate.py" <<'PY'
import os, socket, sys
kind = os.environ.pop("ACT_KIND", "listen")
if kind == "file":
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
else:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM if kind == "datagram" else socket.SOCK_STREAM)
    s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o600)
    if kind == "listen":
        s.listen(16)
    fd = s.fileno()
os.dup2(fd, 3); os.set_inheritable(3, True)
os.environ["LISTEN_PID"] = str(os.getpid())
os.environ["LISTEN_FDS"] = os.environ.pop("ACT_FDS", "1")
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

# systemd passing two sockets, or an fd 3 that is not a listening Unix stream socket: refused
# at start (64), naming what is wrong, and nothing listens
assert_exit 64 env ACT_FDS=2 "$RX_PYTHON" "$RX_TMP/activate.py" "$SOCK" "$REXEC_BIN" --workspace "$WS" serve
assert_contains "$ERR" "systemd passed more than one socket (LISTEN_FDS)"
rm -f "$SOCK"
for kind in unlistened datagram file; do
    assert_exit 64 env ACT_KIND=$kind "$RX_PYTHON" "$RX_TMP/activate.py" "$SOCK" "$REXEC_BIN" \
        --workspace "$WS" serve
    assert_contains "$ERR" "the socket systemd passed (fd 3) is not a listening Unix stream socket with a path"
    rm -f "$SOCK"
done

# without activation and without --socket: a clear usage error
assert_exit 64 rx serve
assert_contains "$ERR" "--socket PATH is required (or start it from a systemd socket unit)"
SERVE=
pass
