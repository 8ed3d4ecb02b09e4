#!/usr/bin/env bash
# The operator's live console (`rexec approvals watch`, docs/gate.md "Approvers on serve"), typed
# at as a person would: it runs in tmux as the approver user against serve's approval ops; a held
# call appears in the list as it comes, Enter shows it whole (script, parameters, risk, reason), a
# wrong code approves nothing, `a` + the code shown + a comment approves it and the held call runs,
# `d` + a reason denies another (its caller gets 77 and the reason), a value made to clear the
# screen and reverse the line is shown escaped, `q` quits, and the terminal is as it was before
# (the shell's screen back, the same stty settings); Ctrl-C too.
# shellcheck disable=SC2317 # helpers run via poll_until and the cleanup hook
tid="approvals watch: a live console in a terminal"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
command -v tmux >/dev/null 2>&1 || skip "needs tmux (scripts/setup installs it)"
# shellcheck source=tests/e2e/approver_lib.sh
. "$REXEC_SRC/tests/e2e/approver_lib.sh"

approver_setup
ws_add_action t.note '{"risk": "L2", "state_changing": true, "params": {"unit": {"type": "string"}},
  "command": "echo {unit}"}'
serve_reload
TM=(tmux -S "$RX_TMP/tmux.sock")
_stop_tmux() { "${TM[@]}" kill-server 2>/dev/null || true; }
APPROVER_CLEANUP_HOOK=_stop_tmux
TTYDIR=$RX_TMP/tty
mkdir -m 0700 "$TTYDIR"
chown "$APPROVER" "$TTYDIR"

# ---- refused before any screen: no terminal (77), a user serve does not admit (77), no socket (64)
assert_exit 77 setsid -w setpriv --reuid="$APPROVER" --regid="$APPROVER" --init-groups \
    "$REXEC_BIN" approvals watch --socket "$SOCK" </dev/null
assert_contains "$ERR" "needs an operator at a terminal"
assert_exit 77 setpriv --reuid=nobody --regid=nogroup --clear-groups \
    "$REXEC_BIN" approvals watch --socket "$SOCK"
assert_contains "$ERR" "not admitted"
assert_exit 64 env -u REXEC_SOCKET "$REXEC_BIN" approvals watch
assert_contains "$ERR" "no serve socket"

# A shell of the approver's in a 140x40 terminal.
"${TM[@]}" new-session -d -s op -x 140 -y 40 \
    setpriv --reuid="$APPROVER" --regid="$APPROVER" --init-groups \
    env -i HOME=/ TERM=screen PATH=/usr/bin:/bin PYTHONPATH="$PYTHONPATH" PS1='op$ ' \
    bash --norc --noprofile -i
screen() { "${TM[@]}" capture-pane -p -t op; }
screen_has() { screen | grep -qF -- "$1"; }
wait_screen() {
    poll_until 60 screen_has "$1" || { screen >&2; fail "the screen never showed: $1"; }
}
type_text() { "${TM[@]}" send-keys -t op -l -- "$1"; }
key() { "${TM[@]}" send-keys -t op "$@"; }

wait_screen 'op$'
type_text "stty -g > $TTYDIR/before; echo shell-before-console"
key Enter
wait_screen "shell-before-console"
poll_until 30 test -s "$TTYDIR/before" || fail "no stty -g"
type_text "$REXEC_BIN approvals watch --socket $SOCK; echo console-exit=\$?"
key Enter
wait_screen "no pending approvals"
screen_has "shell-before-console" && fail "the console is not on its own screen"

# ---- a held call appears; Enter shows all of it --------------------------------------------------
held_call alpha "$RX_TMP/call_a"
CID_A=$(challenge_of "$RX_TMP/call_a")
wait_screen "$CID_A"
wait_screen "svc.restart"
key Enter
wait_screen "state_changing"
wait_screen "restarting 'alpha'"
wait_screen "unit=alpha"
wait_screen "root (uid 0)"

# ---- a wrong code approves nothing ---------------------------------------------------------------
key a
wait_screen "type the code"
type_text "NOT-IT"
key Enter
wait_screen "wrong code: $CID_A not approved"
assert_eq "" "$(done_status "$RX_TMP/call_a" || true)" "alpha still held"

# ---- a + the code shown + a comment: approved, the held call runs -------------------------------
key a
wait_screen "type the code"
CODE=$(screen | sed -n 's/.*type the code \([0-9A-Z]\{3\}-[0-9A-Z]\{3\}\).*/\1/p' | tail -n 1)
[[ $CODE =~ ^[0-9A-Z]{3}-[0-9A-Z]{3}$ ]] || { screen >&2; fail "no code on the screen"; }
type_text "$CODE"
key Enter
wait_screen "comment (optional"
type_text "change 4411"
key Enter
wait_screen "approved $CID_A"
poll_until 60 done_status "$RX_TMP/call_a" >/dev/null || { _rx_show caller "$RX_TMP/call_a"; fail "alpha did not end"; }
assert_eq 0 "$(done_status "$RX_TMP/call_a")" "alpha's exit status"
assert_eq ALLOW_GRANT "$(result_field "$RX_TMP/call_a" reason)" "alpha's reason"
assert_eq alpha "$(cat "$RAN")" "what ran"
wait_screen "no pending approvals"

# ---- d + a reason denies another -----------------------------------------------------------------
held_call beta "$RX_TMP/call_b"
CID_B=$(challenge_of "$RX_TMP/call_b")
wait_screen "$CID_B"
key d
wait_screen "denying $CID_B"
type_text "not during the freeze"
key Enter
wait_screen "denied $CID_B"
poll_until 60 done_status "$RX_TMP/call_b" >/dev/null || { _rx_show caller "$RX_TMP/call_b"; fail "beta did not end"; }
assert_eq 77 "$(done_status "$RX_TMP/call_b")" "beta's exit status"
result_field "$RX_TMP/call_b" error >"$OUT"
assert_contains "$OUT" "not during the freeze"
assert_eq alpha "$(cat "$RAN")" "what ran"
assert_contains "$WS/audit/audit.log" "change 4411"

# ---- a value that would clear the screen and reverse the line is shown escaped --------------------
held_call $'gam\u202ema\x1b[2J' "$RX_TMP/call_c" t.note
CID_C=$(challenge_of "$RX_TMP/call_c")
wait_screen "$CID_C"
key Enter
wait_screen 'unit=gam\u202ema\x1b[2J'
wait_screen "echo 'gam\u202ema\x1b[2J'"
key Escape
wait_screen "Enter: details"

# ---- q quits; the terminal is as it was ----------------------------------------------------------
key q
wait_screen "console-exit=0"
screen_has "shell-before-console" || { screen >&2; fail "the shell's screen did not come back"; }
type_text "stty -g > $TTYDIR/after"
key Enter
poll_until 30 test -s "$TTYDIR/after" || fail "no stty -g after"
assert_eq "$(cat "$TTYDIR/before")" "$(cat "$TTYDIR/after")" "stty settings after the console"

# ---- a signal restores it too ------------------------------------------------------------------
type_text "$REXEC_BIN approvals watch --socket $SOCK; echo console-exit=\$?"
key Enter
wait_screen "$CID_C"
key C-c
wait_screen "console-exit=130"
type_text "stty -g > $TTYDIR/after2"
key Enter
poll_until 30 test -s "$TTYDIR/after2" || fail "no stty -g after Ctrl-C"
assert_eq "$(cat "$TTYDIR/before")" "$(cat "$TTYDIR/after2")" "stty settings after Ctrl-C"
pass
