#!/usr/bin/env bash
# rexec's own processes dying or leaving (issue #12, "What to deliver" 2):
#  1. SIGKILL of `rexec run` between the intent and the outcome: `rexec audit verify` exits 2 and
#     names the run; the VM keeps no process of it (its connection closed).
#  2. SIGTERM to serve with one call in flight and one queued (max_channels 1): both clients get
#     an answer (130, cancelled; the queued one never ran), every intent has its outcome, serve
#     exits 0, the VM keeps no process.
#  3. a client that disconnects (SIGKILL) while its call is queued: the call is cancelled and
#     audited at once (an outcome while the call ahead of it still runs), it never runs; the
#     call ahead goes on and succeeds.
tid="faults: rexec killed, serve terminated, a client gone with a call queued"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
. "$REXEC_SRC/tests/faults/lib_faults.sh"

lab_start 1
ws_edit 'c["hosts"]["lab1"].update({"max_channels": 1, "max_connections": 1})'
MARK=$RX_TMP/started
ws_edit 'c["actions"]["t.hold"] = {"risk": "L0", "command": "touch " + args[0] + "; exec sleep 3144"}' "$MARK"
ws_edit 'c["actions"]["t.short"] = {"risk": "L0", "command": "touch " + args[0] + "; sleep 3; echo short"}' "$MARK"
ws_edit 'c["actions"]["t.never"] = {"risk": "L0", "command": "touch " + args[0] + "; echo never"}' "$RX_TMP/never"
rxt() { timeout 60 "$REXEC_BIN" --workspace "$WS" "$@"; }
AUDIT=$WS/audit/audit.log
# intents N: true once the audit holds at least N intent records.
intents() { (( $(grep -c '"phase":"intent"' "$AUDIT" 2>/dev/null || echo 0) >= $1 )); }
# run_of ACTION: the run_id of ACTION's last intent.
run_of() {
    "$RX_PYTHON" -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([x for x in r if x.get("phase")=="intent" and x.get("action")==sys.argv[2]][-1]["run_id"])' "$AUDIT" "$1"
}
# has_outcome RUN: the audit holds RUN's outcome.
has_outcome() { grep -F "\"$1\"" "$AUDIT" | grep -qF '"phase":"outcome"'; }

# ---- 1. SIGKILL between intent and outcome ----------------------------------------------------
"$REXEC_BIN" --workspace "$WS" run lab1 t.hold >/dev/null 2>&1 & K=$!
wait_until 30 test -e "$MARK"
kill -KILL "$K"
wait "$K" 2>/dev/null || true
run=$(run_of t.hold)
has_outcome "$run" && fail "an outcome for a run whose rexec was killed"
assert_exit 2 rx audit verify
grep -qF "$run" "$OUT" "$ERR" || fail "audit verify does not name the killed run $run: $(cat "$OUT" "$ERR")"
assert_vm_clean 'sleep 3144'
# the operator looks, then records what happened the only way there is: the chain stays open
# for that run; later calls append and verify reports the same one run.
rm -f "$MARK"

# ---- 2. SIGTERM to serve: one call in flight, one queued --------------------------------------
SOCK=$RX_TMP/rexec.sock
start_serve "$SOCK"
n0=$(grep -c '"phase":"intent"' "$AUDIT")
REXEC_SOCKET=$SOCK rxt run lab1 t.hold --json >"$RX_TMP/a.out" 2>"$RX_TMP/a.err" & A=$!
wait_until 30 test -e "$MARK"
REXEC_SOCKET=$SOCK rxt run lab1 t.never --json >"$RX_TMP/b.out" 2>"$RX_TMP/b.err" & B=$!
wait_until 30 intents $((n0 + 2))
kill -TERM "$SERVE_PID"
rc=0; wait "$A" || rc=$?
assert_eq 130 "$rc" "the in-flight call when serve got SIGTERM (stderr: $(head -c 300 "$RX_TMP/a.err"))"
assert_contains "$RX_TMP/a.out" '"executed":true'
rc=0; wait "$B" || rc=$?
assert_eq 130 "$rc" "the queued call when serve got SIGTERM (stderr: $(head -c 300 "$RX_TMP/b.err"))"
assert_contains "$RX_TMP/b.out" '"executed":false'
[[ ! -e $RX_TMP/never ]] || fail "the queued call ran after SIGTERM"
wait_until 20 bash -c '! kill -0 "$1" 2>/dev/null' _ "$SERVE_PID"
[[ ! -e $SOCK ]] || fail "serve left its socket file"
has_outcome "$(run_of t.hold)" || fail "no outcome for the in-flight call"
has_outcome "$(run_of t.never)" || fail "no outcome for the queued call"
assert_vm_clean 'sleep 3144'
assert_serve_clean

# ---- 3. a client gone with its call queued ----------------------------------------------------
rm -f "$MARK"
: >"$RX_TMP/serve.err"
start_serve "$SOCK"
n0=$(grep -c '"phase":"intent"' "$AUDIT")
REXEC_SOCKET=$SOCK rxt run lab1 t.short >"$RX_TMP/c.out" 2>"$RX_TMP/c.err" & C=$!
wait_until 30 test -e "$MARK"
REXEC_SOCKET=$SOCK "$REXEC_BIN" --workspace "$WS" run lab1 t.never >/dev/null 2>&1 & D=$!
wait_until 30 intents $((n0 + 2))
kill -KILL "$D"
wait "$D" 2>/dev/null || true
run=$(run_of t.never)
# cancelled and audited while t.short still holds the only channel
wait_until 10 has_outcome "$run"
kill -0 "$C" || fail "the call ahead ended before the queued call's outcome was written"
grep -F "\"$run\"" "$AUDIT" | grep -F '"phase":"outcome"' | grep -qF '"executed":false' \
    || fail "the cancelled queued call's outcome does not say it never ran"
rc=0; wait "$C" || rc=$?
assert_eq 0 "$rc" "the call ahead of the cancelled one"
assert_contains "$RX_TMP/c.out" short
[[ ! -e $RX_TMP/never ]] || fail "the call of a client that left ran"
kill -0 "$SERVE_PID" || fail "serve died"
assert_serve_clean
assert_vm_clean 'sleep 3144|sleep 3'

# the only open run is the one killed in case 1
assert_exit 2 rx audit verify
pass
