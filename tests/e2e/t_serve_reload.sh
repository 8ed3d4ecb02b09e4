#!/usr/bin/env bash
# rexec serve reloads rexec.json on {"op":"reload"} and on SIGHUP: a call in flight finishes on the
# configuration it started with; an action added is known at once; a file that does not load is
# refused with its error and the old configuration stays; a host whose entry did not change keeps
# its warm connection (no new sshd login), a changed one gets a new one; SIGHUP does not kill serve;
# 30 reloads do not pile up serve's memory. A call whose intent is being written while a reload
# lands still uses the warm connection (no new login, one connection), however many reloads came
# before; the connection of a host whose entry changed closes once idle.
tid="serve: reload on request and SIGHUP"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'
HOLD=$RX_TMP/hold.started
RELEASE=$RX_TMP/hold.release
# t.hold: marks that it started, waits (on the VM) for the test to release it
ws_add_action t.hold "{\"risk\": \"L0\", \"command\": \"touch $HOLD; while [ ! -e $RELEASE ]; do sleep 0.05; done; echo held-done\"}"
ws_add_action t.one '{"risk": "L0", "command": "echo one"}'

SOCK=$RX_TMP/s.sock
start_serve
SERVE=$SERVE_PID
rxs() { timeout 120 "$REXEC_BIN" --workspace "$WS" --socket "$SOCK" "$@"; }
logins() { grep -c "Accepted publickey" "$(lab_log "$1")" || true; }

# request SOCK JSON: one request, its final reply printed (reloaded / error / list / pong)
cat >"$RX_TMP/req.py" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().readline().strip())
PY
request() { timeout 60 "$RX_PYTHON" "$RX_TMP/req.py" "$SOCK" "$1"; }
field() { "$RX_PYTHON" -c 'import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]; print(v if isinstance(v,str) else json.dumps(v))' "$1" "$2"; }

# warm both hosts
assert_exit 0 rxs run @lab t.one
L1=$(logins lab1); L2=$(logins lab2)

# a long call in flight, through its own connection to serve
timeout 120 "$REXEC_BIN" --workspace "$WS" --socket "$SOCK" run lab1 t.hold --json >"$RX_TMP/hold.out" 2>&1 &
HOLDER=$!
wait_until 60 test -e "$HOLD"

# ---- reload: new action known, unchanged lab1 stays warm, changed lab2 reconnects ------------
ws_add_action t.new '{"risk": "L0", "command": "echo new-action"}'
ws_edit 'c["hosts"]["lab2"]["max_channels"] = 3'
assert_exit 78 rxs run lab1 t.nope                    # (unknown actions stay unknown)
R=$(request '{"op": "reload", "id": "r1"}')
assert_eq reloaded "$(field "$R" type)" "reload reply: $R"
assert_eq 1 "$(field "$R" kept_warm)" "hosts kept warm"
assert_exit 0 rxs run @lab t.new
assert_contains "$OUT" "[lab1] new-action"
assert_eq "$L1" "$(logins lab1)" "logins to unchanged lab1 after reload"
(( $(logins lab2) > L2 )) || fail "lab2 changed but its old connection was reused"

# ---- a file that does not load is refused; the old configuration stays -----------------------
cp "$WS/rexec.json" "$RX_TMP/good.json"
ws_edit 'c["actions"]["t.bad"] = {"risk": "L9", "command": "true"}'
R=$(request '{"op": "reload", "id": "r2"}')
assert_eq error "$(field "$R" type)" "bad reload: $R"
assert_eq 78 "$(field "$R" exit_status)" "bad reload status"
[[ $(field "$R" error) == *t.bad* ]] || fail "the error does not name the bad field: $R"
assert_exit 0 rxs run lab1 t.new
assert_exit 78 rxs run lab1 t.bad

# ---- the call in flight finishes on its configuration -----------------------------------------
touch "$RELEASE"
wait "$HOLDER" || fail "the call in flight failed: $(cat "$RX_TMP/hold.out")"
"$RX_PYTHON" - "$RX_TMP/hold.out" <<'PY' || fail "in-flight result"
import json, sys
o = json.loads(open(sys.argv[1]).readline())
assert o["exit_code"] == 0 and o["stdout"] == "held-done\n" and o["action"] == "t.hold", o
PY

# ---- SIGHUP: reload, never a kill ----------------------------------------------------------------
cp "$RX_TMP/good.json" "$WS/rexec.json"
ws_add_action t.hup '{"risk": "L0", "command": "echo after-hup"}'
kill -HUP "$SERVE"
wait_until 30 grep -q "SIGHUP: workspace reloaded" "$RX_TMP/serve.err"
kill -0 "$SERVE" || fail "SIGHUP killed serve"
assert_exit 0 rxs run lab1 t.hup
assert_contains "$OUT" after-hup
echo '{"hosts": ' >"$WS/rexec.json"
kill -HUP "$SERVE"
wait_until 30 grep -q "SIGHUP: reload refused" "$RX_TMP/serve.err"
assert_exit 0 rxs run lab1 t.hup
assert_eq pong "$(field "$(request '{"op": "ping"}')" type)" "ping after a refused SIGHUP reload"
cp "$RX_TMP/good.json" "$WS/rexec.json"

# ---- a reload while a call waits for its intent record: the call keeps the warm connection ----
# The audit lock is held so that each call stops between its start and the pool; a reload lands
# there; then the lock goes and the call runs. Before the fix every such call after the first
# reload opened a connection of its own that was never closed.
assert_exit 0 rxs run lab1 t.one
L1=$(logins lab1)
timeout 120 "$RX_PYTHON" - "$SOCK" "$WS/audit/.lock" >"$RX_TMP/window.out" 2>&1 <<'PY' || fail "reload window: $(cat "$RX_TMP/window.out")"
import fcntl, json, socket, sys
def conn():
    s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sys.argv[1])
    return s, s.makefile("rb")
def until(f, want, rid):
    while True:
        o = json.loads(f.readline())
        if o.get("id") == rid and o.get("type") in want:
            return o
for i in range(5):
    lock = open(sys.argv[2], "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    s, f = conn()
    s.sendall((json.dumps({"op": "run", "id": "w%d" % i, "targets": "lab1", "action": "t.one"}) + "\n").encode())
    until(f, ("accepted",), "w%d" % i)
    r, rf = conn()
    r.sendall(b'{"op": "reload", "id": "rl"}\n')
    assert json.loads(rf.readline())["type"] == "reloaded"
    r.close()
    fcntl.flock(lock, fcntl.LOCK_UN)
    lock.close()
    o = until(f, ("done",), "w%d" % i)
    assert o.get("exit_status") == 0, o
    s.close()
print("5 calls across reloads")
PY
assert_eq "$L1" "$(logins lab1)" "logins to lab1 by calls whose intent was written across a reload"
assert_eq 1 "$(established_conns "$(lab_port lab1)")" "connections to lab1 after calls across reloads"
# lab2's entry changed at the first reload: its old connection has closed (idle), one remains
# shellcheck disable=SC2317 # called by wait_until
one_to_lab2() { (( $(established_conns "$(lab_port lab2)") <= 1 )); }
wait_until 30 one_to_lab2

# ---- a changed host that no call used before the reload that retires it --------------------
# A reload changes lab2 (a new host object no call has used), a call to lab2 starts and waits for
# its intent, a second reload changes lab2 again (retiring that object), then the call runs: its
# connection is the retired host's and closes once idle. (The pool used to make that host afresh,
# unretired, and the connection stayed open for good.)
timeout 120 "$RX_PYTHON" - "$SOCK" "$WS/audit/.lock" "$WS/rexec.json" >"$RX_TMP/retire.out" 2>&1 <<'PY' || fail "retired host: $(cat "$RX_TMP/retire.out")"
import fcntl, json, os, socket, sys
def conn():
    s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sys.argv[1])
    return s, s.makefile("rb")
def reload_with(channels):
    c = json.load(open(sys.argv[3]))
    c["hosts"]["lab2"]["max_channels"] = channels
    with open(sys.argv[3] + ".tmp", "w") as f:
        json.dump(c, f, indent=2)
    os.replace(sys.argv[3] + ".tmp", sys.argv[3])
    r, rf = conn()
    r.sendall(b'{"op": "reload"}\n')
    assert json.loads(rf.readline())["type"] == "reloaded"
    r.close()
reload_with(6)
lock = open(sys.argv[2], "a")
fcntl.flock(lock, fcntl.LOCK_EX)
s, f = conn()
s.sendall(b'{"op": "run", "id": "x", "targets": "lab2", "action": "t.one"}\n')
while json.loads(f.readline()).get("type") != "accepted":
    pass
reload_with(7)
fcntl.flock(lock, fcntl.LOCK_UN)
while True:
    o = json.loads(f.readline())
    if o.get("id") == "x" and o.get("type") == "done":
        assert o.get("exit_status") == 0, o
        break
print("ok")
PY
# shellcheck disable=SC2317 # called by wait_until
none_to_lab2() { (( $(established_conns "$(lab_port lab2)") == 0 )); }
wait_until 30 none_to_lab2

# ---- reloads do not pile up: a replaced workspace's catalog and secret set go with its last
# call. Each reload used to keep them until serve stopped (about 0.8 MiB each here, most of it
# the compiled parameter patterns such as sys.echo's {0,200}). A serve of its own, with ASan's
# quarantine small so that freed memory is reused (the figure means nothing otherwise).
SOCK2=$RX_TMP/s2.sock
SOCK=$SOCK2
SERVE_ERR=$RX_TMP/serve2.err start_serve "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1"
SERVE2=$SERVE_PID
assert_exit 0 rxs run lab1 t.one
assert_eq reloaded "$(field "$(request '{"op": "reload"}')" type)" "a first reload"
rss0=$(awk '/^VmRSS:/ { print $2 }' "/proc/$SERVE2/status")
for i in $(seq 30); do
    r=$(request '{"op": "reload"}')
    [[ $(field "$r" type) == reloaded ]] || fail "reload $i: $r"
    [[ $((i % 10)) != 0 ]] || assert_exit 0 rxs run lab1 t.one
done
rss1=$(awk '/^VmRSS:/ { print $2 }' "/proc/$SERVE2/status")
echo "serve RSS: $rss0 KiB after a reload, $rss1 KiB after 30 more"
(( rss1 - rss0 < 8192 )) || fail "30 reloads grew serve by $(( (rss1 - rss0) / 1024 )) MiB"
stop_gently "$SERVE2"
assert_exit 0 rx audit verify
pass
