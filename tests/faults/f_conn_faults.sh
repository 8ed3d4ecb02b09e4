#!/usr/bin/env bash
# Connection faults on a warm serve connection (issue #12, items 2, 3, 9):
#  1. max_channels 1, call A running, call B queued behind it: the connection is dropped
#     (lab drop). A reports 255 (connection lost); B must not wait for ever: it gets a fresh
#     connection and runs. (It hung: the dying connection announced no free channel.)
#  2. sshd SIGSTOPped mid-command (lab freeze): the call ends 255 within the keepalive bound
#     (RX_KEEPALIVE_COUNT + 1 intervals), the VM keeps no process once sshd runs again.
#  3. sshd SIGSTOPped under an idle warm connection: the next call ends 255 within
#     connect_timeout_s (the channel open has a deadline), not at the keepalive's verdict.
# Each: the error class in the message, the time to detect, the audit verifying.
tid="faults: lost, frozen and hung connections"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
. "$REXEC_SRC/tests/faults/lib_faults.sh"

lab_start 1
KA=2 CT=3
ws_edit 'c["hosts"]["lab1"]["max_channels"] = 1
c.setdefault("limits", {}).update({"keepalive_s": int(args[0]), "connect_timeout_s": int(args[1])})' \
    "$KA" "$CT"
MARK=$RX_TMP/a.started
ws_edit 'c["actions"]["t.hold"] = {"risk": "L0", "command": "touch " + args[0] + "; exec sleep 3141"}' "$MARK"
ws_add_action t.quick '{"risk": "L0", "command": "echo quick"}'
SOCK=$RX_TMP/rexec.sock
start_serve "$SOCK"
export REXEC_SOCKET=$SOCK
rxs() { timeout 60 "$REXEC_BIN" --workspace "$WS" "$@"; }
now_ms() { echo $(( ${EPOCHREALTIME/[.,]/} / 1000 )); }

# ---- 1. a queued call when the connection dies -------------------------------------------------
rxs run lab1 t.hold >"$RX_TMP/a.out" 2>"$RX_TMP/a.err" & A=$!
wait_until 30 test -e "$MARK"
rxs run lab1 t.quick >"$RX_TMP/b.out" 2>"$RX_TMP/b.err" & B=$!
# B is queued behind A's only channel (max_channels 1) once serve has it: its audit intent is
# written before it queues.
wait_until 30 bash -c '(( $(grep -c "\"phase\":\"intent\"" "$1/audit/audit.log") >= 2 ))' _ "$WS"
lab drop lab1 >/dev/null
t0=$(now_ms)
rc=0; wait "$A" || rc=$?
assert_eq 255 "$rc" "A's exit status after the drop"
rc=0; wait "$B" || rc=$?
t=$(( $(now_ms) - t0 ))
assert_eq 0 "$rc" "B's exit status (it must run on a fresh connection; stderr: $(head -c 300 "$RX_TMP/b.err"))"
assert_contains "$RX_TMP/b.out" quick
(( t < 20000 )) || fail "B finished $t ms after the drop"
assert_vm_clean 'sleep 3141'

# ---- 2. sshd frozen mid-command ---------------------------------------------------------------
rm -f "$MARK"
rxs run lab1 t.hold >"$RX_TMP/c.out" 2>"$RX_TMP/c.err" & C=$!
wait_until 30 test -e "$MARK"
lab freeze lab1 >/dev/null
t0=$(now_ms)
rc=0; wait "$C" || rc=$?
t=$(( $(now_ms) - t0 ))
lab thaw lab1 >/dev/null
assert_eq 255 "$rc" "exit status of a call whose sshd is frozen"
assert_contains "$RX_TMP/c.err" "keepalive"
# found between 3 and 4 intervals after the last bytes (+ 2 s for a loaded machine)
(( t <= (3 + 1) * KA * 1000 + 2000 )) || fail "the frozen peer was found after $t ms"
(( t >= 2 * KA * 1000 )) || fail "the frozen peer was declared dead after only $t ms"
assert_vm_clean 'sleep 3141'

# ---- 3. a call on a hung warm connection --------------------------------------------------------
assert_exit 0 rxs run lab1 t.quick            # a warm connection
lab freeze lab1 >/dev/null
t0=$(now_ms)
rc=0; rxs run lab1 t.quick --timeout 2 >"$RX_TMP/d.out" 2>"$RX_TMP/d.err" || rc=$?
t=$(( $(now_ms) - t0 ))
lab thaw lab1 >/dev/null
assert_eq 255 "$rc" "exit status of a call on a hung connection"
# the keepalive (3-4 intervals = 6-8 s) or the set-up deadline (connect_timeout_s = 3 s) ends
# it, whichever is first; before the fix it waited for the keepalive, long after --timeout.
echo "the call on a hung connection ended after $t ms: $(head -c 300 "$RX_TMP/d.err")"
# The set-up deadline's message ("does not answer"), not the keepalive's, says which ended it; the
# time bound only has to stay below the keepalive's earliest verdict (3 intervals), with the
# loaded machine's slack taken from there.
(( t < 3 * KA * 1000 )) || fail "the call on a hung connection took $t ms (connect_timeout_s $CT)"
assert_contains "$RX_TMP/d.err" "does not answer"
assert_exit 0 rxs run lab1 t.quick            # and the next call gets a fresh connection

kill -0 "$SERVE_PID" || fail "serve died"
assert_serve_clean
assert_audit_whole
pass
