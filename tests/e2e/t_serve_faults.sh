#!/usr/bin/env bash
# serve under client faults (docs/serve-protocol.md, "Connections"):
# - a client that half-closes (shutdown SHUT_WR) while serve's socket buffer to it is full, and
#   then reads slowly, gets all of its output, the result and the "done" (it used to be taken for
#   gone, because poll() reported the full socket as not writable, and its call was cancelled);
# - a connection serve has no memory for is accepted and closed at once, and serve goes on
#   accepting (it used to leave it unaccepted, and libuv then stopped watching the listener for
#   good). The test build fails the first N client allocations when REXEC_TEST_SERVE_NOMEM=N;
# - a connection whose user lookups (NSS) hang does not hold up another (they run on libuv's
#   thread pool; the test build holds them with REXEC_TEST_SERVE_ADMIT_GATE=PATH);
# - a new host key (accept-new) recorded while another process holds known_hosts locked: serve
#   answers other clients meanwhile (the append runs on libuv's thread pool), and the call goes
#   on once the lock is released.
tid="serve: slow user lookups, a half-closed slow reader, no memory for a connection, a locked known_hosts"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
MIB=8
ws_edit 'c["limits"]["max_output_bytes"] = 64 * 1024 * 1024'
ws_add_action t.big "{\"risk\": \"L0\", \"command\": \"yes | head -c $((MIB * 1024 * 1024))\"}"

SOCK=$RX_TMP/serve.sock
GATE=$RX_TMP/admit.gate
start_serve REXEC_TEST_SERVE_ADMIT_GATE="$GATE" --log off

# ---- who a client is: asked off the loop ------------------------------------------------------
# A new connection's NSS lookups (getpwuid_r, getgrouplist: LDAP or sssd may be slow) run on the
# thread pool. The test build holds the first connection's lookups until $GATE exists: another
# connection is served meanwhile, and the first once the gate opens. (On the loop, the second
# connection waited for the first's directory: its ping timed out.)
timeout 60 "$RX_PYTHON" - "$SOCK" "$GATE" >"$OUT" 2>"$ERR" <<'PY' || fail "admission: $(cat "$ERR")"
import json, socket, sys
def ping(s):
    s.sendall(b'{"op":"ping","id":1}\n')
conns = []
for i in range(2):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sys.argv[1])
    ping(s)
    conns.append(s.makefile("rb"))
# the second connection's pong comes while the first connection's lookups are held
assert json.loads(conns[1].readline())["type"] == "pong"
open(sys.argv[2], "w").close()
assert json.loads(conns[0].readline())["type"] == "pong"
print("admission ok")
PY
assert_contains "$OUT" "admission ok"
stop_gently "$SERVE_PID"

# ---- no memory for the first 3 connections: each is closed at once, the 4th is served --------
start_serve REXEC_TEST_SERVE_NOMEM=3 --log off
timeout 60 "$RX_PYTHON" - "$SOCK" >"$OUT" 2>"$ERR" <<'PY' || fail "no memory: $(cat "$ERR")"
import json, socket, sys
for i in range(4):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)  # the old serve never answered: the connection waited in the backlog
    s.connect(sys.argv[1])
    try:  # closed with our ping unread: EOF or a reset
        s.sendall(b'{"op":"ping","id":1}\n')
        line = s.makefile("rb").readline()
    except (ConnectionResetError, BrokenPipeError):
        line = b""
    if i < 3:
        assert line == b"", ("connection %d: expected EOF" % i, line)
    else:
        assert json.loads(line)["type"] == "pong", line
    s.close()
print("accepting ok")
PY
assert_contains "$OUT" "accepting ok"
assert_eq 3 "$(grep -c 'out of memory: a connection was closed at once' "$RX_TMP/serve.err")" \
    "connections closed for lack of memory"

# ---- a half-closed client whose socket is full, reading slowly ---------------------------------
timeout 200 "$RX_PYTHON" - "$SOCK" "$MIB" >"$OUT" 2>"$ERR" <<'PY' || fail "half-close: $(cat "$ERR")"
import base64, fcntl, json, socket, struct, sys, termios, time
path, mib = sys.argv[1], int(sys.argv[2])

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)
    s.connect(path)
    return s

def unread(s):  # bytes waiting in our receive queue
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]

a = connect()
a.sendall(json.dumps({"op": "run", "id": "big", "targets": "lab1", "action": "t.big",
                      "stream": True}).encode() + b"\n")
# Until serve's socket to us is full: a Unix socket stops being writable once a quarter of
# its send buffer (208 KiB by default) is unread, so 128 KiB unread is well past that.
deadline = time.monotonic() + 60
while unread(a) < 128 * 1024:
    assert time.monotonic() < deadline, "serve never filled the socket (%d bytes)" % unread(a)
    time.sleep(0.01)
a.shutdown(socket.SHUT_WR)
# Barrier: two round trips on another connection. Our EOF was readable before the first ping
# was sent, so serve has handled it by the time it answers the second one.
b = connect()
bf = b.makefile("rb")
for i in range(2):
    b.sendall(b'{"op":"ping","id":%d}\n' % i)
    assert json.loads(bf.readline())["type"] == "pong"
# Now read, slowly (small reads), everything up to the "done".
f = a.makefile("rb", buffering=4096)
got, result, done = 0, None, None
while True:
    line = f.readline()
    if not line:
        break
    o = json.loads(line)
    if o["type"] == "output" and o["stream"] == "stdout":
        got += len(o["data"]) if "data" in o else len(base64.b64decode(o["data_base64"]))
    elif o["type"] == "result":
        result = o
    elif o["type"] == "done":
        done = o
assert done is not None, "no done line: serve dropped the half-closed client (%d bytes)" % got
assert done["exit_status"] == 0, done
assert result["stdout_bytes"] == mib << 20 and result["exit_status"] == 0, \
    {k: result.get(k) for k in ("stdout_bytes", "error", "exit_status")}
assert got == mib << 20, got
print("half-close ok")
PY
assert_contains "$OUT" "half-close ok"

# ---- a new host key recorded while someone holds known_hosts locked ----------------------------
# accept-new appends under flock: on the loop, a lock held elsewhere (ssh-keygen -R, another
# rexec) stopped serve for every client until it was released. The append runs on the thread
# pool: serve answers meanwhile, and the call goes on once the lock is released.
: >"$WS/known_hosts"
ws_edit 'c["hosts"]["lab1"]["host_key"] = "accept-new"'
timeout 120 "$RX_PYTHON" - "$SOCK" "$WS/known_hosts" >"$OUT" 2>"$ERR" <<'PY' || fail "known_hosts lock: $(cat "$ERR")"
import fcntl, json, os, socket, sys, time
path, kh = sys.argv[1], sys.argv[2]

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)  # a serve blocked in flock answers nothing until the lock goes
    s.connect(path)
    return s, s.makefile("rb")

lock = os.open(kh, os.O_RDWR)
fcntl.flock(lock, fcntl.LOCK_EX)
r, rf = connect()
r.sendall(b'{"op":"reload","id":"r"}\n')
assert json.loads(rf.readline())["type"] == "reloaded"
r.sendall(json.dumps({"op": "run", "id": "k", "targets": "lab1", "action": "t.big"}).encode()
          + b"\n")
assert json.loads(rf.readline())["type"] == "accepted"
# serve reaches the append (the connection is up to HOSTKEY) while we hold the lock: wait until
# its process holds known_hosts open for appending
def serve_has_kh():
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == str(os.getpid()):
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) != kh:
                    continue
                with open("/proc/%s/fdinfo/%s" % (pid, fd)) as f:
                    flags = int(f.read().split("flags:")[1].split()[0], 8)
                if flags & os.O_APPEND:  # the append's descriptor, not the read's
                    return True
        except OSError:
            pass
    return False
deadline = time.monotonic() + 60
while not serve_has_kh():
    assert time.monotonic() < deadline, "serve never opened known_hosts to append"
    time.sleep(0.01)
p, pf = connect()
p.sendall(b'{"op":"ping","id":"p"}\n')
assert json.loads(pf.readline())["type"] == "pong"   # answered while the append waits
assert os.path.getsize(kh) == 0
fcntl.flock(lock, fcntl.LOCK_UN)
while True:
    o = json.loads(rf.readline())
    if o["type"] == "done":
        assert o["exit_status"] == 0, o
        break
assert os.path.getsize(kh) > 0
print("known_hosts ok")
PY
assert_contains "$OUT" "known_hosts ok"
assert_contains "$WS/known_hosts" "added by rexec (accept-new)"
assert_exit 0 rx audit verify
pass
