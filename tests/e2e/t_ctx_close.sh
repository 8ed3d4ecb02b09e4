#!/usr/bin/env bash
# rexec_ctx_close with calls in flight (include/rexec.h: "Cancels every call"), through the public
# API only (tests/tools/ctx_close.c): with max_channels 1, one call runs on the host and one waits
# in the queue; the context is closed once the running one has printed. Both must report, the
# running one cancelled on the VM (130, nothing of it left there), the queued one "cancelled
# before it started" with nothing run; on_closed comes after them; the audit log verifies with an
# outcome for every intent.
# Checks are part of the context's lifetime too: closed at once after starting three checks (and
# one of an unknown host), every check reports before on_closed, and ASan sees no use of the
# freed context.
tid="api: rexec_ctx_close with calls in flight and queued, and with checks"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

TOOL=$(dirname "$REXEC_BIN")/ctx_close
[[ -x $TOOL ]] || fail "no $TOOL (built with -DREXEC_TEST_BUILD=ON)"
lab_start 1
ws_edit 'c["hosts"]["lab1"]["max_channels"] = 1'
ws_add_action t.hold '{"risk": "L0", "command": "echo started; exec sleep 120"}'

assert_exit 0 timeout 60 "$TOOL" "$WS" lab1 t.hold 2
mapfile -t lines <"$OUT"
assert_eq 3 "${#lines[@]}" "lines printed (two results, then closed)"
assert_eq closed "${lines[2]}" "on_closed comes after every call has reported"
ran=0 queued=0
for l in "${lines[@]:0:2}"; do
    [[ $l == *'"exit_status":130'* || $l == *'"exit_status": 130'* ]] ||
        fail "a call not cancelled (130): $l"
    if [[ $l == *'cancelled before it started'* ]]; then
        queued=$((queued + 1))
        [[ $l == *'"lab1: cancelled before it started"'* ]] || fail "the queued call's error does not name the host: $l"
    else
        ran=$((ran + 1))
    fi
done
assert_eq "1 1" "$ran $queued" "calls cancelled while running / while queued"

# nothing of the running call is left on the VM
# shellcheck disable=SC2317 # called by wait_until
no_sleep() { ! remote_pgrep '^sleep 120$' >/dev/null; }
wait_until 20 no_sleep
# every intent has its outcome, and the chain verifies
assert_exit 0 rx audit verify
# (the queued call's intent was written before it queued for the host's channel)
assert_eq 2 "$(grep -c '"phase":"intent"' "$WS/audit/audit.log")" "intent records"
assert_eq 2 "$(grep -c '"phase":"outcome"' "$WS/audit/audit.log")" "outcome records"

# ---- checks in flight when the context closes -------------------------------------------------
assert_exit 0 timeout 60 "$TOOL" "$WS" lab1 --check 3
mapfile -t lines <"$OUT"
assert_eq 5 "${#lines[@]}" "lines printed (four checks, then closed)"
assert_eq closed "${lines[4]}" "on_closed comes after every check has reported"
assert_eq 4 "$(grep -c '^check ' "$OUT")" "checks reported"
assert_contains "$OUT" "check no-such-host failed"
assert_not_contains "$ERR" "AddressSanitizer"
pass
