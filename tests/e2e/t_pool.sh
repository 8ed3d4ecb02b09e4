#!/usr/bin/env bash
# The connection pool, seen through `rexec serve`: concurrent calls share one authenticated
# connection per host (two only where max_connections says so); a host's channel budget
# (max_channels) queues the calls beyond it; a connection the server dropped while idle is
# replaced transparently for the next call; a call in flight when its connection dies is 255 and
# never re-run; connections that sshd's MaxStartups drops are retried with a bounded back-off.
tid="pool: warm connections, channel budget, drops, back-off"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
P1=$(lab_port lab1)
P2=$(lab_port lab2)
# A generous connect timeout: this test is not about it, and on a loaded machine the audit
# records' fsyncs, done on the loop, can eat a 10 s budget before a burst's first connection is up.
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'

# rxt ARGS...: rexec under a timeout, so a hang fails the test instead of the CI job.
rxt() { timeout 120 "$REXEC_BIN" --workspace "$WS" "$@"; }

# ---- helper processes: stopped when the test ends (the serves of start_serve by lib.sh) ------
BG_PIDS=()
_t_stop_bg() {
    local p
    for p in ${BG_PIDS[@]+"${BG_PIDS[@]}"}; do kill -KILL "$p" 2>/dev/null || true; done
}
at_exit _t_stop_bg

SOCK=$RX_TMP/rexec.sock
# stop_serve_clean: stop_serve, and serve must have exited 0 without a sanitizer's report.
stop_serve_clean() {
    stop_serve
    assert_eq 0 "$SERVE_RC" "serve's exit status"
    assert_not_contains "$RX_TMP/serve.err" "Sanitizer"
}

# logins HOST: how many connections HOST's sshd has authenticated so far.
logins() { grep -c "Accepted publickey" "$(lab_log "$1")" || true; }

# t.gate: registers itself in DIR/run (and DIR/started), records how many calls of DIR run at
# that moment, then waits (bounded) for DIR/release; the wait keeps calls overlapping, and is
# released by the test, never timed.
ws_add_action t.gate '{"risk": "L0", "params": {"dir": {"type": "path"}},
  "command": "D={dir}; f=$(mktemp \"$D/run/r.XXXXXX\"); mktemp \"$D/started/s.XXXXXX\" >/dev/null; ls \"$D/run\" | wc -l >>\"$D/seen\"; i=0; while [ ! -e \"$D/release\" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; rm -f \"$f\"; [ -e \"$D/release\" ]"}'
# t.once: appends a line to a file for every execution, then waits for a release file.
ws_add_action t.once '{"risk": "L0", "params": {"dir": {"type": "path"}},
  "command": "echo ran >>{dir}/executions; i=0; while [ ! -e {dir}/release ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo released"}'
ws_add_action t.port '{"risk": "L0", "command": "echo ${SSH_CONNECTION##* }"}'

gate_dir() {  # gate_dir NAME: a fresh directory for t.gate (stdout)
    local d=$RX_TMP/$1
    mkdir -p "$d/run" "$d/started"
    echo "$d"
}
count() { ls "$1" | wc -l; }                 # count DIR: entries in DIR
max_seen() { sort -n "$1/seen" | tail -n 1; } # the most calls of a gate dir seen at once

# launch N HOST DIR: N `rexec --socket run HOST t.gate` clients in the background; their pids in
# CLIENTS, their statuses later with reap.
CLIENTS=()
launch() {
    local i
    for ((i = 0; i < $1; i++)); do
        timeout 120 "$REXEC_BIN" --workspace "$WS" --socket "$SOCK" run "$2" t.gate \
            --param "dir=$3" >/dev/null 2>>"$RX_TMP/clients.err" &
        CLIENTS+=($!)
    done
}
reap() {  # every launched client exited 0
    local p rc bad=0
    for p in "${CLIENTS[@]}"; do
        rc=0
        wait "$p" || rc=$?
        [[ $rc == 0 ]] || bad=$((bad + 1))
    done
    CLIENTS=()
    [[ $bad == 0 ]] || { _rx_show "client stderr" "$RX_TMP/clients.err"; fail "$bad client(s) failed"; }
}

# ---- 20 concurrent calls share one connection per host ---------------------------------------
ws_edit 'c.setdefault("limits", {})["max_channels"] = 8'   # the default, said out loud
start_serve
l1=$(logins lab1)
l2=$(logins lab2)
g1=$(gate_dir share1)
g2=$(gate_dir share2)
launch 10 lab1 "$g1"
launch 10 lab2 "$g2"
# a budget of 8 channels a connection: 8 run on each host, 2 wait
wait_until 60 bash -c "[[ \$(ls '$g1/run' | wc -l) == 8 && \$(ls '$g2/run' | wc -l) == 8 ]]"
assert_eq 1 "$(established_conns "$P1")" "connections to lab1 with 8 calls running"
assert_eq 1 "$(established_conns "$P2")" "connections to lab2 with 8 calls running"
touch "$g1/release" "$g2/release"
reap
assert_eq 10 "$(count "$g1/started")" "calls run on lab1"
assert_eq 10 "$(count "$g2/started")" "calls run on lab2"
(( $(max_seen "$g1") <= 8 && $(max_seen "$g2") <= 8 )) || fail "more than 8 channels at once"
# one login per host for all twenty calls, and the connections stay open, warm
assert_eq 1 "$(( $(logins lab1) - l1 ))" "logins to lab1 for 10 calls"
assert_eq 1 "$(( $(logins lab2) - l2 ))" "logins to lab2 for 10 calls"
assert_eq 1 "$(established_conns "$P1")" "warm connection to lab1 after the calls"
assert_exit 0 rxt --socket "$SOCK" run lab1 t.port
assert_eq "$P1" "$(cat "$OUT")" "a warm call"
assert_eq 1 "$(( $(logins lab1) - l1 ))" "logins to lab1 after one more call"

# ---- a connection dropped while idle is replaced for the next call ----------------------------
# Right after the drop, serve may or may not have seen the connection close: either way the next
# call runs (a fresh connection, a new login), several times over.
for round in 1 2 3; do
    before=$(logins lab1)
    lab drop lab1 >/dev/null
    assert_exit 0 rxt --socket "$SOCK" run lab1 t.port
    assert_eq "$P1" "$(cat "$OUT")" "call $round after an idle drop"
    assert_eq 1 "$(( $(logins lab1) - before ))" "new logins after drop $round"
done

# The same when serve has not seen the drop yet: serve is stopped (SIGSTOP) while a request is
# queued on a client connection and the drop happens, so on SIGCONT the request is handled before
# the connection's close and the call finds the connection dead when it opens its channel. The
# call was not sent: it goes to a fresh connection, and so does every call after it.
cat >"$RX_TMP/stopped.py" <<'PY'
import json, os, signal, socket, subprocess, sys
sock, serve_pid, lab, labdir, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
s = socket.socket(socket.AF_UNIX)
s.settimeout(120)
s.connect(sock)
f = s.makefile("rb")
def call(i):
    s.sendall((json.dumps({"op": "run", "id": i, "targets": "lab1", "action": "t.port"}) + "\n").encode())
def result(i):
    res = None
    while True:
        o = json.loads(f.readline())
        if o.get("type") == "result" and o["id"] == i:
            res = o
        if o.get("type") == "done" and o["id"] == i:
            return o["exit_status"], res and res.get("error")
call(0)
print("warm", *result(0))
for i in range(1, rounds + 1):
    os.kill(serve_pid, signal.SIGSTOP)
    try:
        call(i)     # in serve's socket buffer once sendall returns
        subprocess.run([lab, "--dir", labdir, "drop", "lab1"], check=True, capture_output=True)
    finally:
        os.kill(serve_pid, signal.SIGCONT)
    print("round%d" % i, *result(i))
PY
before=$(logins lab1)
assert_exit 0 timeout 120 "$RX_PYTHON" "$RX_TMP/stopped.py" "$SOCK" "$SERVE_PID" "$RX_LAB" "$LAB_DIR" 4
assert_eq 5 "$(grep -c '^[a-z0-9]* 0 None$' "$OUT")" "calls that succeeded across drops serve had not seen"
assert_eq 4 "$(( $(logins lab1) - before ))" "new logins for those calls (the first was warm)"

# ---- a call in flight when its connection dies: 255, and never run twice ----------------------
o=$(gate_dir inflight)
"$REXEC_BIN" --workspace "$WS" --socket "$SOCK" run lab1 t.once --param "dir=$o" --json \
    >"$RX_TMP/inflight.json" 2>"$RX_TMP/inflight.err" &
c=$!
BG_PIDS+=("$c")
wait_until 30 test -s "$o/executions"
lab drop lab1 >/dev/null
rc=0
timeout 60 tail --pid="$c" -f /dev/null || fail "the call did not end after its connection died"
wait "$c" || rc=$?
assert_eq 255 "$rc" "exit status of a call whose connection died"
"$RX_PYTHON" - "$RX_TMP/inflight.json" <<'PY' || fail "the lost call's result"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["exit_status"] == 255 and o["exit_code"] is None, o
assert o["executed"] is True, o            # it was sent: it may have run, and is not re-run
assert o["error"] and "lab1" in o["error"], o
PY
touch "$o/release"   # a re-run would have finished by now: let it, if one is stuck waiting
assert_eq 1 "$(wc -l <"$o/executions")" "executions of the call whose connection died"
# and the next call gets a new connection
assert_exit 0 rxt --socket "$SOCK" run lab1 t.port
assert_eq 1 "$(wc -l <"$o/executions")" "executions after the next call"

# The same without serve: one rexec process, its only connection killed under the call.
o=$(gate_dir inflight-direct)
"$REXEC_BIN" --workspace "$WS" run lab1 t.once --param "dir=$o" >/dev/null 2>"$RX_TMP/direct.err" &
c=$!
BG_PIDS+=("$c")
wait_until 30 test -s "$o/executions"
lab drop lab1 >/dev/null
rc=0
timeout 60 tail --pid="$c" -f /dev/null || fail "the direct call did not end after its connection died"
wait "$c" || rc=$?
assert_eq 255 "$rc" "exit status of a direct call whose connection died"
touch "$o/release"
assert_eq 1 "$(wc -l <"$o/executions")" "executions of the direct call"
stop_serve_clean

# ---- channel budget: max_channels 2 runs 2 of 6 at once; max_connections 2 opens a second -----
ws_edit 'c["hosts"]["lab2"]["max_channels"] = 2
c["hosts"]["lab1"]["max_channels"] = 3
c["hosts"]["lab1"]["max_connections"] = 2'
start_serve
l1=$(logins lab1)
gb=$(gate_dir budget)
launch 6 lab2 "$gb"
wait_until 60 bash -c "[[ \$(ls '$gb/run' | wc -l) -ge 2 ]]"
# A whole call on lab1 through the same serve, after the two started: had the other four not
# been held back, their channels (asked for at the same time as the first two) would be open.
assert_exit 0 rxt --socket "$SOCK" run lab1 t.port
assert_eq 2 "$(count "$gb/started")" "calls started on lab2 with max_channels 2"
assert_eq 1 "$(established_conns "$P2")" "connections to lab2 (max_connections unset)"
touch "$gb/release"
reap
assert_eq 6 "$(count "$gb/started")" "calls completed on lab2 with max_channels 2"
assert_eq 2 "$(max_seen "$gb")" "most calls at once on lab2 with max_channels 2"

gc=$(gate_dir conns)
launch 8 lab1 "$gc"
# 3 channels on each of 2 connections: 6 run, 2 wait
wait_until 60 bash -c "[[ \$(ls '$gc/run' | wc -l) == 6 ]]"
assert_eq 2 "$(established_conns "$P1")" "connections to lab1 with max_connections 2"
assert_eq 6 "$(count "$gc/started")" "calls started on lab1 (2 connections x 3 channels)"
touch "$gc/release"
reap
assert_eq 8 "$(count "$gc/started")" "calls completed on lab1"
(( $(max_seen "$gc") <= 6 )) || fail "more than 6 calls at once on lab1"
(( $(established_conns "$P1") <= 2 )) || fail "more than 2 connections to lab1"
assert_eq 2 "$(( $(logins lab1) - l1 ))" "logins to lab1 with max_connections 2"
stop_serve_clean

# ---- relays: a host behind a TCP relay that misbehaves on demand ------------------------------
# The relay in front of lab1 closes the first DROP connections at once (what sshd does to
# connections beyond MaxStartups), then relays to lab1. It counts the connections it saw. While
# the file NAME.freeze exists it relays nothing, in either direction, and keeps every socket
# open: a server whose kernel still acknowledges but whose sshd never answers.
RELAY=$RX_TMP/relay.py
cat >"$RELAY" <<'PY'
import os, socket, sys, threading, time
target, drop, countfile, portfile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
freeze = sys.argv[5]
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(64)
open(portfile + ".tmp", "w").write(str(ls.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)
ppid, seen = os.getppid(), 0
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            while os.path.exists(freeze):
                time.sleep(0.05)
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
ls.settimeout(0.5)
while os.getppid() == ppid:  # leave with the test, however it ends
    try:
        c, _ = ls.accept()
    except socket.timeout:
        continue
    seen += 1
    open(countfile, "w").write(str(seen))
    if seen <= drop:
        c.close()
        continue
    u = socket.create_connection(("127.0.0.1", target))
    for a, b in ((c, u), (u, c)):
        threading.Thread(target=pump, args=(a, b), daemon=True).start()
PY
# relay DROP NAME: start a relay, add host NAME behind it (lab1's key); sets RELAY_COUNT and
# RELAY_PORT.
relay() {
    local port
    RELAY_COUNT=$RX_TMP/$2.count
    "$RX_PYTHON" "$RELAY" "$P1" "$1" "$RELAY_COUNT" "$RX_TMP/$2.port" "$RX_TMP/$2.freeze" &
    BG_PIDS+=($!)
    disown $!   # it ends with the test; no job notice
    wait_until 10 test -s "$RX_TMP/$2.port"
    port=$(cat "$RX_TMP/$2.port")
    RELAY_PORT=$port
    ws_edit 'c["hosts"][args[0]] = dict(c["hosts"]["lab1"], port=int(args[1]))
c["hosts"][args[0]].pop("max_connections", None)' "$2" "$port"
    echo "[127.0.0.1]:$port $(grep "^\[127.0.0.1\]:$P1 " "$WS/known_hosts" | cut -d' ' -f2-)" \
        >>"$WS/known_hosts"
}
# MaxStartups: dropped handshakes are retried with a bounded back-off
relay 3 flaky
assert_exit 0 rxt run flaky t.port
assert_eq "$P1" "$(cat "$OUT")" "the call through a relay that dropped 3 handshakes"
assert_eq 4 "$(cat "$RELAY_COUNT")" "connections: 3 dropped, then the one that worked"

relay 1000000 full
t0=$EPOCHREALTIME
assert_exit 255 rxt run full t.port
elapsed=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a }')
assert_contains "$ERR" "handshake"
n=$(cat "$RELAY_COUNT")
# bounded: a first try and a few retries (at most 8, jittered 100 ms .. 3.2 s, within
# connect_timeout_s), then 255 -- not a storm,
# and not for ever
(( n >= 2 && n <= 10 )) || fail "$n connection attempts to a host that drops them all"
(( elapsed < 30 )) || fail "gave up on a host that drops every handshake only after ${elapsed}s"
echo "# a host dropping every handshake: $n attempts, ${elapsed}s, then 255" >&2

# ---- keepalive: a connection whose server stops answering is found dead ------------------------
# keepalive_s 1: an idle connection to a frozen server is closed (no answer for 3 s), and a call
# in flight on one ends 255 (it was sent: not re-run), instead of both hanging for ever.
relay 0 frozen
ws_edit 'c.setdefault("limits", {})["keepalive_s"] = 1'
start_serve
assert_exit 0 rxt --socket "$SOCK" run frozen t.port
assert_eq 1 "$(established_conns "$RELAY_PORT")" "the warm connection through the relay"
touch "$RX_TMP/frozen.freeze"
wait_until 30 bash -c "[[ \$(ss -Htn state established '( dport = :$RELAY_PORT and dst 127.0.0.1 )' | wc -l) == 0 ]]"
rm -f "$RX_TMP/frozen.freeze"
assert_exit 0 rxt --socket "$SOCK" run frozen t.port     # and a new connection works
o=$(gate_dir frozen-inflight)
"$REXEC_BIN" --workspace "$WS" --socket "$SOCK" run frozen t.once --param "dir=$o" \
    >/dev/null 2>"$RX_TMP/frozen.err" &
c=$!
BG_PIDS+=("$c")
wait_until 30 test -s "$o/executions"
touch "$RX_TMP/frozen.freeze"
rc=0
timeout 60 tail --pid="$c" -f /dev/null || fail "a call on a frozen connection did not end"
wait "$c" || rc=$?
assert_eq 255 "$rc" "exit status of a call whose server froze"
assert_contains "$RX_TMP/frozen.err" "keepalive"
touch "$o/release"
assert_eq 1 "$(wc -l <"$o/executions")" "executions of the call whose server froze"
rm -f "$RX_TMP/frozen.freeze"
stop_serve_clean
pass
