#!/usr/bin/env bash
# Fan-out: `rexec run h1,h2 ACTION` and `@group` give one result per host, all hosts, the right
# output for each; the aggregate exit status is the largest (255 when a host is unavailable);
# --parallel bounds the calls in flight; --json lines come out as each host finishes, so a dead
# or slow host delays nobody else beyond its own timeout; a progress line goes to stderr only
# when it is a terminal.
tid="run: fan-out"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 8
all=(lab1 lab2 lab3 lab4 lab5 lab6 lab7 lab8)
# A generous connect timeout: this test is not about it, and on a loaded machine the audit
# records' fsyncs, done on the loop, can eat a 10 s budget before a burst's first connection is up.
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'

# Every sshd of the lab runs on this machine: the server port in $SSH_CONNECTION tells which
# host a command really ran on.
ws_add_action t.whoami '{"risk": "L0",
  "command": "echo port=${SSH_CONNECTION##* }; echo err=${SSH_CONNECTION##* } >&2"}'

# check_json FILE HOST... : one --json line per HOST, nothing else, each with that host's port
# on stdout and stderr and exit 0.
check_json() {
    local file=$1 h
    shift
    local -a spec=()
    for h in "$@"; do spec+=("$h=$(lab_port "$h")"); done
    "$RX_PYTHON" - "$file" "${spec[@]}" <<'PY' || fail "--json results of $file"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
want = dict(a.split("=") for a in sys.argv[2:])
got = [json.loads(l) for l in lines]
hosts = [o["host"] for o in got]
assert sorted(hosts) == sorted(want), ("hosts", hosts, sorted(want))
for o in got:
    p = want[o["host"]]
    assert o["exit_code"] == 0 and o["exit_status"] == 0 and o["executed"] is True, o
    assert o["stdout"] == "port=%s\n" % p, (o["host"], o["stdout"])
    assert o["stderr"] == "err=%s\n" % p, (o["host"], o["stderr"])
    assert o["error"] is None and o["action"] == "t.whoami", o
assert len(set(o["run_id"] for o in got)) == len(got), "run_id reused"
PY
}

# rxt ARGS...: rx under a timeout, so a hang fails the test instead of the CI job.
rxt() { timeout 120 "$REXEC_BIN" --workspace "$WS" "$@"; }

# add_command NAME COMMAND: an L0 action running COMMAND (taken as is: no JSON quoting here).
add_command() {
    ws_edit 'c["actions"][args[0]] = {"risk": "L0", "command": args[1]}' "$1" "$2"
}

# ---- @group and lists: complete and correct ---------------------------------------------------
assert_exit 0 rxt run @lab t.whoami --json
assert_eq 8 "$(wc -l <"$OUT")" "--json lines for @lab"
check_json "$OUT" "${all[@]}"

assert_exit 0 rxt run lab2,lab5,lab7 t.whoami --json
assert_eq 3 "$(wc -l <"$OUT")" "--json lines for lab2,lab5,lab7"
check_json "$OUT" lab2 lab5 lab7
# One fan-out, one batch_id: in every result and in both audit records of each of its runs,
# with the controller's host name and uid; a single call has none.
"$RX_PYTHON" - "$OUT" "$WS/audit/audit.log" "$(hostname)" "$(id -u)" <<'PY' || fail "batch_id of a fan-out"
import json, sys
res = [json.loads(l) for l in open(sys.argv[1])]
batches = {r.get("batch_id") for r in res}
assert len(batches) == 1 and None not in batches and len(batches.pop()) == 32, res
runs = {r["run_id"]: r["batch_id"] for r in res}
recs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
recs = [r for r in recs if r.get("run_id") in runs]
assert len(recs) == 6, len(recs)
for rec in recs:
    assert rec["batch_id"] == runs[rec["run_id"]], rec
    assert rec["controller"] == {"host": sys.argv[3], "uid": int(sys.argv[4])}, rec["controller"]
PY
assert_exit 0 rxt run lab2 t.whoami --json
assert_not_contains "$OUT" '"batch_id"'
assert_eq null "$(audit_field intent batch_id)" "batch_id of a single call"

# A host named twice, or in a list and its group, runs once.
assert_exit 0 rxt run lab3,lab3,lab4 t.whoami --json
check_json "$OUT" lab3 lab4

# Without --json: the streams, each line prefixed with [host], stdout and stderr apart.
assert_exit 0 rxt run @lab t.whoami
assert_eq 8 "$(wc -l <"$OUT")" "stdout lines"
assert_eq 8 "$(wc -l <"$ERR")" "stderr lines"
for h in "${all[@]}"; do
    assert_eq 1 "$(grep -cxF "[$h] port=$(lab_port "$h")" "$OUT")" "[$h] stdout line"
    assert_eq 1 "$(grep -cxF "[$h] err=$(lab_port "$h")" "$ERR")" "[$h] stderr line"
done
# no progress line when stderr is not a terminal
assert_not_contains "$ERR" "hosts done"

# A single host has no prefix (like ssh).
assert_exit 0 rxt run lab1 t.whoami
assert_eq "port=$(lab_port lab1)" "$(cat "$OUT")" "single-host stdout"

assert_exit 78 rxt run @nosuchgroup t.whoami
assert_exit 78 rxt run lab1,nosuchhost t.whoami
[[ ! -s $OUT ]] || fail "an unknown host in the list still ran something"

# ---- the aggregate exit status: the largest --------------------------------------------------
add_command t.exitbyhost "P2=$(lab_port lab2) P3=$(lab_port lab3) P4=$(lab_port lab4)"'
case ${SSH_CONNECTION##* } in "$P2") exit 3 ;; "$P3") exit 44 ;; "$P4") exit 255 ;; esac
echo fine'
assert_exit 0 rxt run lab1,lab5 t.exitbyhost
assert_exit 3 rxt run lab1,lab2 t.exitbyhost
assert_exit 44 rxt run lab1,lab2,lab3 t.exitbyhost
assert_exit 44 rxt run lab1,lab2,lab3 t.exitbyhost --json
"$RX_PYTHON" - "$OUT" <<'PY' || fail "per-host exit codes"
import json, sys
r = {o["host"]: o["exit_code"] for o in map(json.loads, open(sys.argv[1]))}
assert r == {"lab1": 0, "lab2": 3, "lab3": 44}, r
PY
# a remote 255 is 254, still below "host unavailable"
assert_exit 254 rxt run lab1,lab2,lab4 t.exitbyhost

# ---- a dead host in the set ------------------------------------------------------------------
# "closed": a port nobody listens on. "stopped": lab8's sshd, killed (the listener gone, as a
# crashed VM).
closed=$("$RX_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
ws_edit 'c["hosts"]["closed"] = dict(c["hosts"]["lab1"], port=int(args[0]))
c["groups"]["withdead"] = ["lab%d" % i for i in range(1, 8)] + ["closed"]' "$closed"
assert_exit 255 rxt run @withdead t.whoami --json
assert_eq 8 "$(wc -l <"$OUT")" "--json lines with a dead host"
grep -v '"host":"closed"' "$OUT" >"$RX_TMP/alive.json"
check_json "$RX_TMP/alive.json" lab1 lab2 lab3 lab4 lab5 lab6 lab7
"$RX_PYTHON" - "$OUT" <<'PY' || fail "the dead host's line"
import json, sys
d = [o for o in map(json.loads, open(sys.argv[1])) if o["host"] == "closed"]
assert len(d) == 1, d
d = d[0]
assert d["exit_status"] == 255, d          # 255: host unavailable
assert d["executed"] is False and d["exit_code"] is None and d["stdout"] is None, d
assert "refused" in d["error"] and "closed" in d["error"], d
PY
# without --json: the others' output, and the reason on stderr
assert_exit 255 rxt run @withdead t.whoami
assert_eq 7 "$(wc -l <"$OUT")" "stdout lines with a dead host"
assert_contains "$ERR" "closed: cannot connect"

kill -KILL "$(cat "$LAB_DIR/hosts/lab8/sshd.pid")"
wait_until 10 bash -c "! ss -Htln '( sport = :$(lab_port lab8) )' | grep -q ."
assert_exit 255 rxt run @lab t.whoami --json
assert_eq 8 "$(wc -l <"$OUT")" "--json lines with lab8 stopped"
grep -v '"host":"lab8"' "$OUT" >"$RX_TMP/alive.json"
check_json "$RX_TMP/alive.json" lab1 lab2 lab3 lab4 lab5 lab6 lab7
grep '"host":"lab8"' "$OUT" | grep -q '"exit_status":255' || fail "lab8 stopped is not 255"
ws_edit 'c["groups"]["lab"] = ["lab%d" % i for i in range(1, 8)]'
all=(lab1 lab2 lab3 lab4 lab5 lab6 lab7)

# ---- a slow or dead host delays nobody else --------------------------------------------------
# "blackhole" accepts TCP connections (the kernel's backlog) and never says a word: rexec gives
# up after connect_timeout_s. "slow" is lab7 running a command that outlives --timeout. The
# other hosts' --json lines must come out while rexec still waits for those two.
bh_port_file=$RX_TMP/blackhole.port
"$RX_PYTHON" - "$bh_port_file" <<'PY' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
import os
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
ppid = os.getppid()
while os.getppid() == ppid:  # leave with the test, however it ends
    time.sleep(0.5)
PY
bh_pid=$!
wait_until 10 test -s "$bh_port_file"
ws_edit 'c["hosts"]["blackhole"] = dict(c["hosts"]["lab1"], port=int(args[0]))
c.setdefault("limits", {})["connect_timeout_s"] = 12' "$(cat "$bh_port_file")"
add_command t.slowon7 "SLOW=$(lab_port lab7)"'
if [ "${SSH_CONNECTION##* }" = "$SLOW" ]; then sleep 60; fi
echo port=${SSH_CONNECTION##* }; echo err=${SSH_CONNECTION##* } >&2'
t0=$EPOCHREALTIME
timeout 120 "$REXEC_BIN" --workspace "$WS" run lab1,lab2,lab3,blackhole,lab4,lab5,lab6,lab7,closed \
    t.slowon7 --json --timeout 12 >"$RX_TMP/slow.json" 2>"$RX_TMP/slow.err" &
rx_pid=$!
# 6 fast hosts and the closed port: 7 lines, long before the 12 s timeouts can end
wait_until 30 bash -c "[[ \$(wc -l <'$RX_TMP/slow.json') -ge 7 ]]"
kill -0 "$rx_pid" 2>/dev/null || fail "rexec ended before the slow hosts, so nothing proves the others went first"
rc=0
wait "$rx_pid" || rc=$?
assert_eq 255 "$rc" "aggregate exit with a blackhole, a closed port and a timeout"
kill "$bh_pid" 2>/dev/null || true
"$RX_PYTHON" - "$RX_TMP/slow.json" "$(lab_port lab7)" <<'PY' || fail "slow fan-out results"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
order = [o["host"] for o in lines]
assert len(lines) == 9, order
# the first seven lines are the fast hosts and the refused port, in whatever order
assert set(order[:7]) == {"lab1", "lab2", "lab3", "lab4", "lab5", "lab6", "closed"}, order
r = {o["host"]: o for o in lines}
for h in ("lab1", "lab2", "lab3", "lab4", "lab5", "lab6"):
    assert r[h]["exit_code"] == 0 and r[h]["stdout"].startswith("port="), r[h]
slow = r["lab7"]
assert slow["exit_code"] == 124 and slow["timed_out"] is True and slow["exit_status"] == 124, slow
bh = r["blackhole"]
assert bh["exit_status"] == 255 and bh["executed"] is False, bh
assert "no SSH session within" in bh["error"], bh
PY
# Bounded by the 12 s timeouts (and kill_after_s), not by the 60 s of the slow command.
elapsed=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a }')
(( elapsed < 45 )) || fail "the fan-out took ${elapsed}s"

# ---- --parallel N bounds the calls in flight -------------------------------------------------
# Each call registers itself in $cdir/run, waits (bounded) until N calls run at once or every
# host has started, writes how many run, and leaves. With the bound, no call ever sees more than
# N; without it, all hosts run at once and see more. The wait makes the calls overlap: it is
# the workload, the test itself never sleeps.
parallel_case() {  # parallel_case N [--parallel N]: runs @lab, prints the largest count seen
    local n=$1 cdir
    shift
    cdir=$(mktemp -d "$RX_TMP/conc.XXXXXX")
    mkdir "$cdir/run" "$cdir/started"
    add_command t.conc "D='$cdir'; N=$n; HOSTS=${#all[@]}"'
f=$(mktemp "$D/run/r.XXXXXX"); mktemp "$D/started/s.XXXXXX" >/dev/null; i=0
while [ "$(ls "$D/run" | wc -l)" -lt "$N" ] && [ "$(ls "$D/started" | wc -l)" -lt "$HOSTS" ] && [ "$i" -lt 300 ]; do
    sleep 0.05; i=$((i + 1))
done
ls "$D/run" | wc -l >>"$D/seen"
rm -f "$f"'
    assert_exit 0 rxt run @lab t.conc "$@"
    assert_eq "${#all[@]}" "$(ls "$cdir/started" | wc -l)" "calls started (${*:-default})"
    assert_eq "${#all[@]}" "$(wc -l <"$cdir/seen")" "calls that recorded (${*:-default})"
    sort -n "$cdir/seen" | tail -n 1
}
max=$(parallel_case 3 --parallel 3)
assert_eq 3 "$max" "most calls at once with --parallel 3"
max=$(parallel_case 1 --parallel=1)
assert_eq 1 "$max" "most calls at once with --parallel 1"
# the default (16) runs all seven at once: fan-out is concurrent, not one host after another
max=$(parallel_case "${#all[@]}")
assert_eq "${#all[@]}" "$max" "most calls at once by default"
assert_exit 64 rx run @lab t.whoami --parallel 0
# the range is 1-4096 (a 2,000-host fan-out at once: docs/PERFORMANCE.md), on the command line
# and in the workspace
assert_exit 64 rx run @lab t.whoami --parallel 4097
assert_contains "$ERR" "4096"
max=$(parallel_case "${#all[@]}" --parallel 4096)
assert_eq "${#all[@]}" "$max" "most calls at once with --parallel 4096"
ws_edit 'c.setdefault("limits", {})["parallel"] = 4096'
assert_exit 0 rx hosts
ws_edit 'c["limits"]["parallel"] = 4097'
assert_exit 78 rx hosts
assert_contains "$ERR" "limits.parallel"
ws_edit 'del c["limits"]["parallel"]'

# ---- progress line: only when stderr is a terminal -------------------------------------------
if command -v script >/dev/null 2>&1; then
    printf -v cmd '%q ' "$REXEC_BIN" --workspace "$WS" run @lab t.whoami
    assert_exit 0 timeout 120 script -qec "$cmd" /dev/null
    assert_contains "$OUT" "7/7 hosts done, 0 failed"
    assert_contains "$OUT" "[lab3] port=$(lab_port lab3)"
    printf -v cmd '%q ' "$REXEC_BIN" --workspace "$WS" run @withdead t.whoami
    assert_exit 255 timeout 120 script -qec "$cmd" /dev/null
    assert_contains "$OUT" "hosts done, 1 failed"
    # --json output is for programs: no progress line even on a terminal
    printf -v cmd '%q ' "$REXEC_BIN" --workspace "$WS" run @lab t.whoami --json
    assert_exit 0 timeout 120 script -qec "$cmd" /dev/null
    assert_not_contains "$OUT" "hosts done"
fi
pass
