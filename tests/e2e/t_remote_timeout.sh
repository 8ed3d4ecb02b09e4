#!/usr/bin/env bash
# The remote contract: timeouts (docs/remote-contract.md).
#  - the command runs under `timeout --kill-after=K N`: a timeout ends the call with exit 124 and
#    timed_out true, keeping the output so far, long before the controller's backstop;
#  - an action that exits 124 by itself is not a timeout;
#  - a command that ignores TERM is killed after kill_after_s and still counts as timed out;
#  - --timeout shortens an action's limit, never lengthens it;
#  - the controller's backstop: when the connection is stuck (the server's sshd processes
#    stopped), rexec gives up after timeout + kill_after + slack with exit 255, "connection
#    stuck", instead of waiting forever.
tid="remote: timeouts and the backstop"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c["hosts"]["lab1"]["allow"] = "L0"; c["limits"]["kill_after_s"] = 1'

audit_outcome() {  # audit_outcome FIELD: FIELD of the outcome record of the run in $OUT
    "$RX_PYTHON" - "$WS/audit/audit.log" "$(json run_id)" "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in recs if x["run_id"] == sys.argv[2] and x["phase"] == "outcome"]
assert len(r) == 1, r
v = r[0][sys.argv[3]]
print(v if isinstance(v, str) else json.dumps(v))
PY
}

ws_add_action t.to '{"risk": "L0", "timeout_s": 1,
  "command": "echo partial; echo err-partial >&2; sleep 309; echo never"}'
ws_add_action t.exit124 '{"risk": "L0", "command": "echo out; exit 124"}'
ws_add_action t.exit124late '{"risk": "L0", "timeout_s": 5, "command": "sleep 0.3; exit 124"}'
ws_add_action t.ignore '{"risk": "L0", "timeout_s": 1,
  "command": "trap \"\" TERM; echo partial; sleep 310; sleep 310"}'
ws_add_action t.slow '{"risk": "L0", "command": "echo slow; sleep 311"}'

for level in "" process-group; do
    cap "$level"
    what=${level:-pid-namespace}
    # A real timeout: 124, timed_out, the partial output of both streams, on time.
    assert_exit 124 timeout 30 "$REXEC_BIN" --workspace "$WS" run lab1 t.to --json
    assert_eq true "$(json timed_out)" "t.to timed_out ($what)"
    assert_eq 124 "$(json exit_code)" "t.to exit_code"
    assert_eq null "$(json signal)" "t.to signal"
    assert_eq true "$(json executed)" "t.to executed"
    assert_eq 'partial' "$(json stdout)" "t.to stdout"
    assert_eq 'err-partial' "$(json stderr)" "t.to stderr"
    assert_eq "$what" "$(json containment)" "t.to containment"
    # well before timeout + kill_after + the backstop's slack (1 + 1 + 10 s)
    (( $(json duration_ms) < 11000 )) || fail "t.to took $(json duration_ms) ms"
    assert_eq true "$(audit_outcome timed_out)" "audit timed_out"
    assert_eq 124 "$(audit_outcome exit_code)" "audit exit_code"
    wait_until 10 no_remote '^sleep 309$'

    # Exiting 124 is not timing out, at once or later.
    assert_exit 124 rx run lab1 t.exit124 --json
    assert_eq false "$(json timed_out)" "t.exit124 timed_out ($what)"
    assert_eq 124 "$(json exit_code)" "t.exit124 exit_code"
    assert_eq out "$(json stdout)" "t.exit124 stdout"
    assert_eq false "$(audit_outcome timed_out)" "audit timed_out of t.exit124"
    assert_exit 124 rx run lab1 t.exit124late --json
    assert_eq false "$(json timed_out)" "t.exit124late timed_out ($what)"

    # TERM ignored: KILL after kill_after_s; still a timeout, nothing left behind.
    assert_exit 124 timeout 30 "$REXEC_BIN" --workspace "$WS" run lab1 t.ignore --json
    assert_eq true "$(json timed_out)" "t.ignore timed_out ($what)"
    assert_eq partial "$(json stdout)" "t.ignore stdout"
    wait_until 10 no_remote '^sleep 310$'
done
cap ""

# Without --json: the partial output on stdout, exit 124.
assert_exit 124 timeout 30 "$REXEC_BIN" --workspace "$WS" run lab1 t.to
assert_eq partial "$(cat "$OUT")" "t.to stdout without --json"
wait_until 10 no_remote '^sleep 309$'

# --timeout shortens (the action allows the workspace's 60 s), never lengthens.
assert_exit 124 timeout 30 "$REXEC_BIN" --workspace "$WS" run lab1 t.slow --timeout 1 --json
assert_eq true "$(json timed_out)" "--timeout 1"
assert_eq slow "$(json stdout)" "--timeout 1 stdout"
wait_until 10 no_remote '^sleep 311$'
assert_exit 65 rx run lab1 t.to --timeout 2
assert_contains "$ERR" "above"

# ---- the backstop: a stuck connection ----------------------------------------------------------
# Stop (SIGSTOP) every sshd process of the connection: bytes no longer flow either way, the TCP
# connection stays up. The remote command still times out by itself after 4 s, but its end line
# cannot reach rexec, which must give up on its own after 4 + 1 + 10 s (+ the drain period).
# the sshd processes of the connection: the ancestors of the remote command, up to the listener
conn_sshds() {
    local p=$1 ppid comm
    while [[ $p -gt 1 && $p != "$listener" ]]; do
        read -r ppid comm < <(ps -o ppid=,comm= -p "$p") || return 0
        [[ $comm == sshd ]] && echo "$p"
        p=$ppid
    done
}
listener=$(cat "$LAB_DIR/hosts/lab1/sshd.pid")
stopped=()
resume() { [[ ${#stopped[@]} -eq 0 ]] || kill -CONT "${stopped[@]}" 2>/dev/null || true; }

# timeout_s 10: the connection's sshd must be found and stopped before the remote timeout ends
# the sleep, which takes a few seconds on a machine under load.
ws_add_action t.stuck '{"risk": "L0", "timeout_s": 10, "command": "echo partial; sleep 312"}'
"$REXEC_BIN" --workspace "$WS" run lab1 t.stuck --json >"$OUT" 2>"$ERR" &
pid=$!
wait_until 15 has_remote '^sleep 312$'
find_conn() {
    mapfile -t stopped < <(conn_sshds "$(remote_pgrep '^sleep 312$' | head -n1)")
    [[ ${#stopped[@]} -gt 0 ]]
}
wait_until 10 find_conn
kill -STOP "${stopped[@]}"
rc=0
timeout 90 tail --pid="$pid" -f /dev/null || rc=$?
if [[ $rc -ne 0 ]]; then
    resume
    fail "rexec did not give up on a stuck connection within 90 s"
fi
rc=0; wait "$pid" || rc=$?
resume
assert_eq 255 "$rc" "exit status on a stuck connection"
[[ $(json error) == *"connection stuck"* ]] || fail "stuck: error is: $(json error)"
assert_eq null "$(json exit_code)" "stuck: exit_code"
assert_eq false "$(json timed_out)" "stuck: timed_out (unknown, not claimed)"
assert_eq true "$(json executed)" "stuck: executed (the script was sent: it may have run)"
# (backstop 10 + 1 + 10 = 21 s, then drain; generous upper bound, the lower one proves it waited)
ms=$(json duration_ms)
(( ms >= 20000 && ms < 80000 )) || fail "stuck: gave up after $ms ms"
wait_until 10 no_remote '^sleep 312$'
pass
