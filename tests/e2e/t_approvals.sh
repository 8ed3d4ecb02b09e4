#!/usr/bin/env bash
# Approvals end to end: a headless run of an L2 action is held (75, a challenge id), an operator
# approves it at a pseudo-terminal by typing the code the prompt shows, the grant runs the
# command once, and is refused after that (77): reused, drifted (GRANT_MISMATCH, not burned),
# raced by two callers (one runs), or approved without a terminal (refused); a --stdin file is
# bound by its sha256; what the operator is shown escapes control characters and names secrets only.
# shellcheck disable=SC2016,SC2317 # code in single quotes; helpers run via assert_exit
tid="approvals: challenge, approve at a tty, single-use grant"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
RAN=$RX_TMP/ran
: >"$RAN"
# svc.restart (L2, state_changing) also records each run, so "ran once" can be counted.
ws_edit 'c["actions"]["svc.restart"]["command"] = "echo would restart {unit}; echo {unit} >> " + args[0]' \
    "'$RAN'"

# at_tty ARGS...: rexec ARGS on a new pseudo-terminal (tty_answer, tests/e2e/lib.sh).
at_tty() {
    tty_answer "$REXEC_BIN" --workspace "$WS" "$@"
}

# approve_at_tty ID [ANSWER]: `rexec approve ID` at a terminal, answering ANSWER or the code
approve_at_tty() {
    if [[ $# -gt 1 ]]; then
        ANSWER=$2 at_tty approve "$1"
    else
        at_tty approve "$1"
    fi
}

# json_field FILE KEY: a top-level value of the one JSON object in FILE
json_field() {
    "$RX_PYTHON" -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print("" if v is None else v)' "$1" "$2"
}

# challenge UNIT: a headless run of svc.restart is held: 75, a challenge id in $CID
challenge() {
    assert_exit 75 rx run lab1 svc.restart --param unit="$1" --json
    CID=$(json_field "$OUT" challenge_id)
    [[ $CID =~ ^ch-[0-9a-f]{16}$ ]] || fail "no challenge id in: $(cat "$OUT")"
    assert_eq REQUIRES_APPROVAL "$(json_field "$OUT" decision)" "decision"
    assert_eq REQUIRES_APPROVAL "$(json_field "$OUT" reason)" "reason"
}

# --- held: 75, a challenge, nothing ran; the plain output names the id too
assert_exit 75 rx run lab1 svc.restart --param unit=nginx
assert_contains "$ERR" "rexec approve ch-"
challenge nginx
assert_eq 0 "$(wc -l <"$RAN")" "runs while pending"
assert_eq 700 "$(stat -c %a "$WS/approvals")" "mode of approvals/"
assert_eq 600 "$(stat -c %a "$WS/approvals/$CID.json")" "mode of the challenge"
assert_exit 0 rx approvals --json
assert_contains "$OUT" "\"id\":\"$CID\""
assert_contains "$OUT" '"state":"pending"'
# not approved yet: the grant is refused
assert_exit 77 rx run lab1 svc.restart --param unit=nginx --grant "$CID" --json
assert_eq GRANT_NOT_APPROVED "$(json_field "$OUT" reason)" "reason before approval"
# eval decides without writing a challenge
n_files=$(find "$WS/approvals" -type f | wc -l)
RC=0; rx eval lab1 svc.restart --param unit=nginx >"$OUT" 2>"$ERR" || RC=$?
assert_contains "$OUT" REQUIRES_APPROVAL
assert_eq "$n_files" "$(find "$WS/approvals" -type f | wc -l)" "files after eval"

# --- a wrong code refuses; no terminal refuses; the challenge stays pending
assert_exit 77 approve_at_tty "$CID" "NOT-IT"
assert_contains "$OUT" "not approved"
assert_exit 77 setsid -w "$REXEC_BIN" --workspace "$WS" approve "$CID" </dev/null
assert_contains "$ERR" "terminal"
assert_exit 77 rx run lab1 svc.restart --param unit=nginx --grant "$CID" --json
assert_eq GRANT_NOT_APPROVED "$(json_field "$OUT" reason)" "reason after refusals"

# --- approved at the terminal: the prompt showed what will run
assert_exit 0 approve_at_tty "$CID"
assert_contains "$OUT" "host:      lab1"
assert_contains "$OUT" "svc.restart"
assert_contains "$OUT" "L2 (state_changing)"
assert_contains "$OUT" "unit=nginx"
assert_contains "$OUT" "approved $CID"
assert_exit 0 rx approvals
assert_contains "$OUT" "$CID approved"
# approving again asks nothing (no terminal needed) and says until when the grant holds
assert_exit 0 setsid -w "$REXEC_BIN" --workspace "$WS" approve "$CID" </dev/null
assert_contains "$ERR" "$CID is already approved (by "
assert_contains "$ERR" "--grant $CID until 20"

# --- the grant runs it once; reuse is refused
assert_exit 0 rx run lab1 svc.restart --param unit=nginx --grant "$CID"
assert_eq "would restart nginx" "$(cat "$OUT")" "stdout of the granted run"
assert_eq 1 "$(wc -l <"$RAN")" "runs after the grant"
assert_exit 77 rx run lab1 svc.restart --param unit=nginx --grant "$CID" --json
assert_eq GRANT_USED "$(json_field "$OUT" reason)" "reason on reuse"
assert_eq 1 "$(wc -l <"$RAN")" "runs after reuse"
# the used grant: listed with --all only, with when it was used
assert_exit 0 rx approvals --json
[[ $(grep -c "\"id\":\"$CID\"" "$OUT") == 0 ]] || fail "a used grant listed without --all"
assert_exit 0 rx approvals --all --json
assert_contains "$OUT" "\"id\":\"$CID\",\"state\":\"used\""
assert_contains "$OUT" '"used_at":"20'

# --- a drifted request is refused and does not burn the grant
challenge nginx
assert_exit 0 approve_at_tty "$CID"
assert_exit 77 rx run lab1 svc.restart --param unit=sshd --grant "$CID" --json
assert_eq GRANT_MISMATCH "$(json_field "$OUT" reason)" "reason for a drifted request"
assert_eq 1 "$(wc -l <"$RAN")" "runs after the drifted request"
assert_exit 0 rx run lab1 svc.restart --param unit=nginx --grant "$CID"
assert_eq 2 "$(wc -l <"$RAN")" "runs after the approved request"

# --- two callers race with one grant: exactly one runs
challenge nginx
assert_exit 0 approve_at_tty "$CID"
rc1=0 rc2=0
rx run lab1 svc.restart --param unit=nginx --grant "$CID" >"$RX_TMP/r1" 2>&1 & p1=$!
rx run lab1 svc.restart --param unit=nginx --grant "$CID" >"$RX_TMP/r2" 2>&1 & p2=$!
wait "$p1" || rc1=$?
wait "$p2" || rc2=$?
assert_eq "0 77" "$(printf '%s\n' "$rc1" "$rc2" | sort -n | tr '\n' ' ' | sed 's/ $//')" \
    "exit statuses of two racing callers"
assert_eq 3 "$(wc -l <"$RAN")" "runs after the race"

# --- run --approve: the operator confirms at this terminal, the call runs once
assert_exit 0 at_tty run lab1 svc.restart --param unit=inline --approve
assert_contains "$OUT" "unit=inline"
assert_contains "$OUT" "would restart inline"
assert_eq 4 "$(wc -l <"$RAN")" "runs after run --approve"
# a wrong code: nothing runs; the challenge stays pending (75) or the call is denied (77)
RC=0
ANSWER=nope at_tty run lab1 svc.restart --param unit=refused --approve >"$OUT" 2>"$ERR" || RC=$?
[[ $RC == 75 || $RC == 77 ]] || fail "run --approve with a wrong code: exit $RC, expected 75 or 77"
assert_contains "$OUT" "not approved"
assert_eq 4 "$(wc -l <"$RAN")" "runs after a refused run --approve"

# --- what the operator is shown cannot drive the terminal: control characters, newlines and
# bytes that are not UTF-8 in a parameter are escaped; secrets are listed by name only; an action
# without parameters says so
ws_add_action t.note '{"risk": "L2", "command": "printf %s {text}", "secrets": ["DEMO_TOKEN"],
  "params": {"text": {"type": "string"}}}'
ws_add_action t.plain '{"risk": "L2", "command": "true"}'
printf '%s' '{"action": "t.note", "params": {"text": "a\u001b[2Jb\nc\td\u0007"}}' >"$RX_TMP/note.json"
assert_exit 75 rx run lab1 --request "$RX_TMP/note.json" --json
CID=$(json_field "$OUT" challenge_id)
ANSWER=nope at_tty approve "$CID" >"$OUT" 2>&1 || true
assert_contains "$OUT" 'text=a\x1b[2Jb\nc\td\x07'
assert_contains "$OUT" "DEMO_TOKEN"
assert_contains "$OUT" "(handed over by name; values are never shown)"
assert_not_contains "$OUT" "$(cat "$WS/secrets/demo_token")"
[[ $(grep -c $'\x1b\[2J' "$OUT") == 0 ]] || fail "a raw escape sequence reached the terminal"
assert_exit 75 rx run lab1 t.plain --json
CID=$(json_field "$OUT" challenge_id)
ANSWER=nope at_tty approve "$CID" >"$OUT" 2>&1 || true
grep -Eq "params: +none" "$OUT" || fail "no 'params: none' in: $(cat "$OUT")"
grep -Eq "secrets: +none" "$OUT" || fail "no 'secrets: none' in: $(cat "$OUT")"

# --- a --stdin FILE is bound by its sha256 (a file is hashed only when an approval needs it): a
# grant approved for one content refuses another of the same size, and runs the approved one
printf 'payload one\n' >"$RX_TMP/in"
assert_exit 75 rx run lab1 svc.restart --param unit=filed --stdin "$RX_TMP/in" --json
CID=$(json_field "$OUT" challenge_id)
assert_eq "$(sha256sum <"$RX_TMP/in" | cut -d' ' -f1)" "$("$RX_PYTHON" -c 'import json,sys
print(json.load(open(sys.argv[1]))["stdin"]["sha256"])' "$WS/approvals/$CID.json")" "challenge's stdin"
assert_exit 0 approve_at_tty "$CID"
printf 'payload two\n' >"$RX_TMP/in"
assert_exit 77 rx run lab1 svc.restart --param unit=filed --stdin "$RX_TMP/in" --grant "$CID" --json
assert_eq GRANT_MISMATCH "$(json_field "$OUT" reason)" "reason for another stdin"
assert_contains "$OUT" "the stdin differs"
printf 'payload one\n' >"$RX_TMP/in"
assert_exit 0 rx run lab1 svc.restart --param unit=filed --stdin "$RX_TMP/in" --grant "$CID"
assert_eq 5 "$(wc -l <"$RAN")" "runs after the approved stdin"
# An action with a piped stdin ("stdin": "piped") still gets an approved file staged: its bytes
# are checked against the approval only once all are read, so the command must not see them
# before. (A piped stdin would be a FIFO.)
ws_add_action t.piped '{"risk": "L2", "command": "stat -L -c %F /dev/stdin", "stdin": "piped"}'
assert_exit 75 rx run lab1 t.piped --stdin "$RX_TMP/in" --json
CID=$(json_field "$OUT" challenge_id)
assert_exit 0 approve_at_tty "$CID"
assert_exit 0 rx run lab1 t.piped --stdin "$RX_TMP/in" --grant "$CID"
assert_eq "regular file" "$(cat "$OUT")" "stdin of a piped action under an approval"

pass
