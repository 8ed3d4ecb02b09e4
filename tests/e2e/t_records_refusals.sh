#!/usr/bin/env bash
# The records' refusals a user can meet (docs/exit-codes.md): the audit key file with a CRLF end
# (the same key as without), a FIFO or longer than 4096 bytes (78); audit/.lock and audit.log a
# FIFO (74, no hang); `rexec evidence` usage (64), evidence/ a symlink and a stray file in it
# (74), a run directory with a name that is no time (pruned by its mtime); `rexec approve` and
# `rexec approvals` usage, --prune, and approvals/ a symlink or holding a FIFO, a directory, an
# oversized file or challenges that break the schema (74); `rexec run` with --socket after
# ACTION, a directory as --stdin, a --request over 64 KiB (exactly 64 KiB runs), too many --param,
# and Ctrl-C with a host not started yet (130, "cancelled before it started"); a grant whose use
# is looked up in rotated audit files. Each refusal names what is wrong; nothing runs.
# shellcheck disable=SC2016,SC2154,SC2317 # code in single quotes; _t_rc set by the trap; helpers via assert_exit
tid="records: audit key, lock and log files, evidence, approvals and run refusals"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

unset REXEC_AUDIT_KEY REXEC_AUDIT_ROTATE_BYTES
lab_start 2
HOLD=$RX_TMP/hold.started
ws_add_action t.touch '{"risk": "L0", "command": "touch {file}", "params": {"file": {"type": "path"}}}'
ws_add_action t.cat '{"risk": "L0", "command": "cat"}'
ws_add_action t.hold "{\"risk\": \"L0\", \"command\": \"touch $HOLD; exec sleep 2718\"}"
# ran N: a t.touch call that must run (0), marking $RX_TMP/ran.N
ran() {
    assert_exit 0 rx run lab1 t.touch --param "file=$RX_TMP/ran.$1"
    [[ -e $RX_TMP/ran.$1 ]] || fail "call $1 did not run"
}
# refused CODE NEEDLE ARGS...: rexec ARGS (within 20 s: a FIFO must not hang it) exits CODE
# naming NEEDLE on stderr
refused() {
    local code=$1 needle=$2
    shift 2
    assert_exit "$code" timeout -k 5 20 "$REXEC_BIN" --workspace "$WS" "$@"
    assert_contains "$ERR" "$needle"
}
never() { # never NEEDLE: a call is refused (74) naming NEEDLE, and runs nothing
    refused 74 "$1" run lab1 t.touch --param "file=$RX_TMP/never"
    [[ ! -e $RX_TMP/never ]] || fail "a call ran although it was refused: $1"
}

# ---- the audit key (src/record/audit.c, rx_audit_key_load) -------------------------------------
# The log is keyed from the first record by a key file written with a CRLF end: the CR and LF
# are not part of the key, so the same key without them verifies it, and another key does not.
KEY=$RX_TMP/keys
mkdir -m 700 "$KEY"
(umask 077
 printf 'rexec-test-audit-key-0123456789\r\n' >"$KEY/crlf"
 printf 'rexec-test-audit-key-0123456789' >"$KEY/plain"
 printf 'rexec-test-audit-key-9876543210' >"$KEY/other"
 head -c 4097 /dev/zero | tr '\0' k >"$KEY/long")
mkfifo -m 600 "$KEY/fifo"
ws_edit 'c["audit"] = {"key_file": args[0]}' "$KEY/crlf"
ran 1
assert_exit 0 rx audit verify --key "$KEY/plain"
assert_contains "$OUT" "chain intact"
assert_exit 1 rx audit verify --key "$KEY/other"
refused 78 "audit key: $KEY/fifo: not a regular file" audit verify --key "$KEY/fifo"
refused 78 "$KEY/long: audit key is longer than 4096 bytes" audit verify --key "$KEY/long"
assert_exit 0 rx audit verify

# ---- audit/.lock and audit.log a FIFO: refused at once (not opened blocking), nothing runs -------
LOG=$WS/audit/audit.log
n=$(wc -l <"$LOG")
rm -f "$WS/audit/.lock"
mkfifo -m 600 "$WS/audit/.lock"
never "$WS/audit/.lock: not a regular file or directory: refusing to use it"
# the readers lock it too (shared): they must not wait in open() either
assert_exit 0 timeout -k 5 20 "$REXEC_BIN" --workspace "$WS" audit verify
assert_contains "$OUT" "chain intact"
assert_exit 0 timeout -k 5 20 "$REXEC_BIN" --workspace "$WS" audit head
rm "$WS/audit/.lock"
mv "$LOG" "$RX_TMP/audit.log"
mkfifo -m 600 "$LOG"
never "$LOG: not a regular file"
rm "$LOG"
mv "$RX_TMP/audit.log" "$LOG"
assert_eq "$n" "$(wc -l <"$LOG")" "audit records after the refusals"
ran 2
assert_exit 0 rx audit verify

# ---- rexec evidence prune (src/cli/cmd_evidence.c, src/record/evidence_prune.c) -----------------
refused 64 'evidence: expected prune (see `rexec help evidence`)' evidence
refused 64 "evidence prune: --older-than needs a value" evidence prune --older-than
refused 64 'evidence prune: unknown argument "--bogus"' evidence prune --bogus
refused 64 'evidence prune: --older-than "soon": expected an age like 30d' evidence prune --older-than soon
EV=$WS/evidence
# a run directory whose name is no time is aged by its mtime: an old one goes, the runs stay;
# one without a complete meta.json (a crash's leftover) goes too, but is no run
runs=$(find "$EV" -mindepth 1 -maxdepth 1 -type d -name '2*' | wc -l)
e0=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
mkdir -m 700 "$EV/junk" "$EV/20200101T000000Z-0000000000000000"
: >"$EV/junk/stdout"; : >"$EV/junk/stderr"
printf '{"run_id":"junk","stdout_sha256":"%s","stderr_sha256":"%s","stdout_bytes_stored":0,"stderr_bytes_stored":0}' \
    $e0 $e0 >"$EV/junk/meta.json"
: >"$EV/20200101T000000Z-0000000000000000/meta.json"
touch -d 2020-01-01T00:00:00Z "$EV/junk"
assert_exit 0 rx evidence prune --older-than 1d
assert_contains "$OUT" "evidence: removed 1 run(s)"
assert_contains "$OUT" "kept $runs"
[[ ! -e $EV/junk ]] || fail "evidence prune left the old junk directory"
[[ ! -e $EV/20200101T000000Z-0000000000000000 ]] || fail "evidence prune left an incomplete directory"
# a stray file where a run directory belongs cannot be removed as one: refused, named
: >"$EV/20200101T000000Z-stray"
refused 74 "$EV/20200101T000000Z-stray: cannot remove: Not a directory" evidence prune --older-than 1d
rm "$EV/20200101T000000Z-stray"
# evidence/ a symbolic link: not followed
mv "$EV" "$RX_TMP/evidence"
ln -s "$RX_TMP/evidence" "$EV"
refused 74 "$EV: is a symbolic link: refusing to use it" evidence prune --older-than 1d
rm "$EV"
mv "$RX_TMP/evidence" "$EV"
assert_eq "$runs" "$(find "$EV" -mindepth 1 -maxdepth 1 -type d | wc -l)" "evidence runs after the refusals"

# ---- rexec approve / approvals (src/cli/cmd_approve.c, src/policy/approvals.c) ---------------
AP=$WS/approvals
assert_exit 0 rx approve --help
assert_contains "$OUT" "usage: rexec approve"
refused 64 "usage: rexec approve CHALLENGE_ID (see \`rexec help approve\`)" approve ch-0000000000000000 extra
refused 64 'approvals: unexpected argument "--bogus" (usage: rexec approvals [--json] [--all] [--prune])' approvals --bogus
[[ ! -e $AP ]] || fail "approvals/ exists before any challenge"
assert_exit 0 rx approvals
assert_contains "$OUT" "no pending challenges or unused grants"
assert_exit 0 rx approvals --prune
assert_contains "$ERR" "removed 0 expired or used approval(s)"
# challenge UNIT: a held svc.restart (L2): 75 and its id in $CID
challenge() {
    assert_exit 75 rx run lab1 svc.restart --param "unit=$1" --json
    CID=$(json challenge_id)
    [[ $CID =~ ^ch-[0-9a-f]{16}$ ]] || fail "no challenge id in: $(cat "$OUT")"
}
challenge keep
KEEP=$CID
challenge old
OLD=$CID
# edit ID NEWID PYCODE: approvals/NEWID.json from ID's document `d` changed by PYCODE
edit() {
    "$RX_PYTHON" - "$AP/$1.json" "$AP/$2.json" "$3" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
d["id"] = os.path.basename(sys.argv[2])[:-5]
exec(sys.argv[3])
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, (json.dumps(d, indent=2) + "\n").encode())
PY
}
# --prune removes the expired challenge only
edit "$OLD" "$OLD" 'd["expires"] = "2020-01-01T00:00:00Z"'
assert_exit 0 rx approvals --prune --json
assert_contains "$ERR" "removed 1 expired or used approval(s)"
assert_contains "$OUT" "\"id\":\"$KEEP\""
assert_not_contains "$OUT" "$OLD"
[[ -e $AP/$KEEP.json && ! -e $AP/$OLD.json ]] || fail "--prune removed the wrong files: $(ls "$AP")"
# bad ID PYCODE NEEDLE: a challenge file breaking the schema is refused (74) naming the file
BAD=ch-2222222222222222
bad() {
    edit "$KEEP" "$BAD" "$1"
    refused 74 "$AP/$BAD.json: not a valid challenge: $2" approvals
    rm "$AP/$BAD.json"
}
bad 'd["version"] = 2' "version: unsupported version 2"
bad 'd["state"] = "maybe"' "state: unknown state"
bad 'd["created"] = "yesterday"' "created: not a time (YYYY-MM-DDTHH:MM:SSZ)"
bad 'd["params"] = {"unit": 7}' "params: expected strings"
bad 'd["secrets"] = [7]' "secrets: expected names"
bad 'd["stdin"] = {"bytes": 3}' "stdin.sha256"
# ... and files that are no challenge file at all
mkfifo -m 600 "$AP/$BAD.json"
refused 74 "$AP/$BAD.json: not a regular file or directory: refusing to use it" approvals
rm "$AP/$BAD.json"
mkdir -m 700 "$AP/$BAD.json"
refused 74 "$AP/$BAD.json: Is a directory" approvals
rmdir "$AP/$BAD.json"
(umask 077 && head -c $((8 * 1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$AP/$BAD.json")
refused 74 "$AP/$BAD.json: larger than 8388608 bytes" approvals
rm "$AP/$BAD.json"
mv "$AP" "$RX_TMP/approvals"
ln -s "$RX_TMP/approvals" "$AP"
refused 74 "$AP: is a symbolic link: refusing to use it" approvals
rm "$AP"
mv "$RX_TMP/approvals" "$AP"
assert_exit 0 rx approvals --json
assert_contains "$OUT" "\"id\":\"$KEEP\""

# ---- a grant restored after its use: the use is found in a rotated audit file (audit_grants.c) ----
challenge grant
GID=$CID
assert_exit 0 tty_answer "$REXEC_BIN" --workspace "$WS" approve "$GID"
cp -p "$AP/$GID.json" "$RX_TMP/grant.json"
assert_exit 0 rx run lab1 svc.restart --param unit=grant --grant "$GID"
[[ -e $AP/$GID.used && ! -e $AP/$GID.json ]] || fail "the grant was not consumed: $(ls "$AP")"
export REXEC_AUDIT_ROTATE_BYTES=1500 # a few records a file: the use moves into a rotated file
ran 3
ran 4
unset REXEC_AUDIT_ROTATE_BYTES
! grep -q "$GID" "$LOG" || fail "the grant's use is still in audit.log: nothing to look up in rotated files"
grep -lq "\"grant_id\":\"$GID\"" "$WS"/audit/audit-*.log || fail "no rotated file holds the grant's use"
cp -p "$RX_TMP/grant.json" "$AP/$GID.json" # the operator's own user renames it back
assert_exit 77 rx run lab1 svc.restart --param unit=grant --grant "$GID" --json
assert_eq GRANT_USED "$(json reason)" "reason of a restored grant"
assert_contains "$OUT" "grant $GID was already used: the audit log records a call that ran on it"
assert_exit 0 rx audit verify

# ---- rexec run's own refusals (src/cli/cmd_run.c) ------------------------------------------------
refused 255 "cannot reach rexec serve at $RX_TMP/nosock" run lab1 t.touch --param "file=$RX_TMP/never" --socket "$RX_TMP/nosock"
refused 65 "$RX_TMP: Is a directory" run lab1 t.cat --stdin "$RX_TMP"
# --request: at most 64 KiB (65536 bytes), whatever the size above it; exactly 64 KiB runs
for size in 65537 200000; do
    head -c "$size" /dev/zero | tr '\0' ' ' >"$RX_TMP/big.json"
    refused 65 "$RX_TMP/big.json: larger than 65536 bytes" run lab1 --request "$RX_TMP/big.json"
done
"$RX_PYTHON" - "$RX_TMP/64k.json" "$RX_TMP/ran.64k" <<'PY'
import json, sys
doc = json.dumps({"action": "t.touch", "params": {"file": sys.argv[2]}})
open(sys.argv[1], "w").write(doc + " " * (65536 - len(doc)))
PY
assert_eq 65536 "$(wc -c <"$RX_TMP/64k.json")" "size of the 64 KiB request"
assert_exit 0 rx run lab1 --request "$RX_TMP/64k.json"
[[ -e $RX_TMP/ran.64k ]] || fail "the 64 KiB request did not run"
params=()
for i in $(seq 257); do params+=(--param "p$i=v"); done
refused 64 "too many --param (at most 256)" run lab1 t.touch "${params[@]}"
[[ ! -e $RX_TMP/never ]] || fail "a refused call ran"
# Ctrl-C with lab2 not started yet (--parallel 1): lab1's command is stopped, lab2 never starts
interrupt() { # interrupt PID: SIGINT to the rexec run PID, then its exit status
    kill -INT "$1"
    wait "$1"
}
"$REXEC_BIN" --workspace "$WS" run @lab t.hold --parallel 1 >"$RX_TMP/int.out" 2>"$RX_TMP/int.err" &
CLIENT=$!
trap '_t_rc=$?; [[ -z $CLIENT ]] || kill -KILL "$CLIENT" 2>/dev/null || true; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT
wait_until 30 test -e "$HOLD"
assert_exit 130 interrupt "$CLIENT"
CLIENT=
assert_contains "$RX_TMP/int.err" "lab2: cancelled before it started"
wait_until 20 bash -c '! "$1" --dir "$2" ps "sleep 2718" >/dev/null' _ "$RX_LAB" "$LAB_DIR"
assert_exit 0 rx audit verify

pass
