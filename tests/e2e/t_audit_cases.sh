#!/usr/bin/env bash
# The audit tooling's refusals, through the CLI (docs/audit.md, "The head"; docs/exit-codes.md):
# audit/head.json against a log that was emptied, whose last line has no seq, or that was replaced
# (the head at the last record, and a head one record behind whose successor does not chain onto
# it; a head one behind that it does chain onto is accepted); `audit head --reset` after head.json
# was removed, garbage, a symlink (replaced, never written through) or a FIFO, on an emptied log,
# and where it cannot (an unnumbered last line, head.json a directory); rexec.json's
# "audit" refused by `audit verify` (not JSON, not an object, key_file not absolute, rexec.json a
# symlink or a FIFO: 78); audit/anchor.json a symlink, a directory or a FIFO (74, no hang). Each
# refusal names what is wrong and leaves the log and its head byte for byte as they were.
tid="audit: head disagreements, head --reset, audit config, non-regular files"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

unset REXEC_AUDIT_KEY # the key must come from rexec.json here (none: an unkeyed log)
lab_start 1
ws_add_action t.touch '{"risk": "L0", "command": "touch {file}", "params": {"file": {"type": "path"}}}'
for n in 1 2; do assert_exit 0 rx run lab1 t.touch --param "file=$RX_TMP/ran.$n"; done
LOG=$WS/audit/audit.log
HEAD=$WS/audit/head.json
assert_eq 4 "$(wc -l <"$LOG")" "records after two calls"
assert_exit 0 rx audit verify
assert_exit 0 rx audit head
cp -a "$WS/audit" "$RX_TMP/audit.orig"
cp -p "$WS/rexec.json" "$RX_TMP/rexec.json.orig"

restore() { # the audit directory as it was after the two calls
    rm -rf "$WS/audit"
    cp -a "$RX_TMP/audit.orig" "$WS/audit"
}
# state FILE: lines, bytes and SHA-256 of a regular FILE, else what it is ("absent", "fifo", ...;
# a FIFO is never opened: that would block)
state() {
    if [[ -L $1 ]]; then
        echo "symlink to $(readlink "$1")"
    elif [[ ! -e $1 ]]; then
        echo absent
    elif [[ ! -f $1 ]]; then
        stat -c %F "$1"
    else
        printf '%s %s %s\n' "$(wc -l <"$1")" "$(wc -c <"$1")" "$(sha256sum <"$1" | cut -d' ' -f1)"
    fi
}
# refused CODE NEEDLE CMD...: CMD exits CODE naming NEEDLE on stderr, and leaves audit.log and
# head.json as they were
refused() {
    local code=$1 needle=$2 log0 head0
    shift 2
    log0=$(state "$LOG")
    head0=$(state "$HEAD")
    assert_exit "$code" "$@"
    assert_contains "$ERR" "$needle"
    assert_eq "$log0" "$(state "$LOG")" "audit.log after: $*"
    assert_eq "$head0" "$(state "$HEAD")" "head.json after: $*"
}
# run_refused NEEDLE: a call is refused (74) naming NEEDLE, runs nothing, writes nothing (within
# 20 s: a FIFO in place of a file must not hang it)
run_refused() {
    refused 74 "$1" timeout 20 "$REXEC_BIN" --workspace "$WS" run lab1 t.touch \
        --param "file=$RX_TMP/never"
    [[ ! -e $RX_TMP/never ]] || fail "a call ran although the audit head was refused"
}
# forge WHAT [ARGS]: rewrites the log or head.json as whoever can write the workspace can (the log
# is unkeyed: a line's hash is SHA-256 of its body, head.json's mac SHA-256 of
# "rexec-audit-head-v1 SEQ HASH")
#   noseq           the last line without its "seq", its hash recomputed
#   rewrite_last    the last line's body changed, its hash recomputed (the log replaced)
#   head SEQ HASH   head.json naming record SEQ with HASH and a right mac
#   hash N          print the hash of line N
forge() {
    "$RX_PYTHON" - "$LOG" "$HEAD" "$@" <<'PY'
import hashlib, json, re, sys
log, head, what, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
lines = open(log, encoding="utf-8").read().splitlines()
def body(line):
    m = re.fullmatch(r'(.*),"hash":"[0-9a-f]{64}"\}', line)
    assert m, line
    return m.group(1) + "}"
def seal(b):
    return b[:-1] + ',"hash":"%s"}' % hashlib.sha256(b.encode()).hexdigest()
def mac(seq, h):
    return hashlib.sha256(("rexec-audit-head-v1 %d %s" % (seq, h)).encode()).hexdigest()
if what == "hash":
    print(json.loads(lines[int(args[0]) - 1])["hash"])
    sys.exit(0)
if what == "checkmac":  # our mac is rexec's: the real head.json checks out
    h = json.load(open(head))
    assert h["mac"] == mac(h["seq"], h["hash"]) and not h["keyed"], h
    assert all(seal(body(l)) == l for l in lines), "a line's hash is not SHA-256 of its body"
    sys.exit(0)
if what == "noseq":
    b, n = re.subn(r',"seq":\d+(?=,"prev":")', "", body(lines[-1]))
    assert n == 1, lines[-1]
    lines[-1] = seal(b)
elif what == "rewrite_last":
    b = body(lines[-1])
    lines[-1] = seal('{"forged":true,' + b[1:])
elif what == "head":
    seq, h = int(args[0]), args[1]
    doc = {"seq": seq, "hash": h, "ts": "2026-01-01T00:00:00.000Z", "keyed": False,
           "mac": mac(seq, h)}
    open(head, "w").write(json.dumps(doc, separators=(",", ":")) + "\n")
    sys.exit(0)
open(log, "w", encoding="utf-8").write("\n".join(lines) + "\n")
PY
}
forge checkmac || fail "the forging helper does not compute rexec's hashes"
H3=$(forge hash 3)
H4=$(forge hash 4)

# =============================================================================================
# 1. head.json against the chain's end (src/record/audit_head.c, head_disagrees)

# --- the log emptied, head.json still at record 4: "the audit files were removed"
: >"$LOG"
refused 74 "the log is empty, but audit/head.json says it ends at record 4: the audit files were removed" \
    rx audit head
assert_contains "$ERR" "rexec audit head --reset"
assert_not_contains "$OUT" '"seq"'
run_refused "the log is empty, but audit/head.json says it ends at record 4"
assert_exit 1 rx audit verify
assert_contains "$OUT" "audit/head.json:1: the head names record 4, but the log holds no record"
# ... also with audit.log gone altogether (no rotated file: the chain's end is "empty")
rm "$LOG"
refused 74 "the log is empty, but audit/head.json says it ends at record 4" rx audit head
restore

# --- the last line has no sequence number (its hash recomputed, so only the seq is wrong)
forge noseq
grep -q '"seq":4,' "$LOG" && fail "forge noseq left the seq"
refused 74 "the log's last line has no sequence number, but audit/head.json says the log ends at record 4" \
    rx audit head
run_refused "the log's last line has no sequence number"
# --reset cannot number the line: refused, log and head untouched
refused 74 "audit head --reset: the log's last line has no sequence number" rx audit head --reset
assert_contains "$ERR" "nothing to reset"
assert_exit 1 rx audit verify --json
"$RX_PYTHON" - "$OUT" <<'PY' || fail "verify did not report the unnumbered last line: $(cat "$OUT")"
import json, sys
rep = json.load(open(sys.argv[1]))
probs = {(e["problem"], e["line"]) for e in rep["errors"]}
assert rep["status"] == "tampered" and ("seq_missing", 4) in probs, probs
assert any(e["problem"] == "head_ahead" and e["file"] == "audit/head.json" for e in rep["errors"]), probs
PY
restore

# --- the log replaced: record 4 (where head.json points) has another hash
forge rewrite_last
H4X=$(forge hash 4)
[[ $H4X != "$H4" ]] || fail "forge rewrite_last did not change record 4's hash"
refused 74 "record 4 does not have the hash audit/head.json names: the log was replaced" rx audit head
run_refused "record 4 does not have the hash audit/head.json names"
assert_exit 1 rx audit verify
assert_contains "$OUT" "audit/head.json:1: record 4 has hash ${H4X:0:16}..., the head names ${H4:0:16}"
assert_contains "$OUT" "the log was replaced"
restore

# --- head.json one record behind (record 3), and record 4 does not chain onto the hash it names
forge head 3 "$H4"
refused 74 "record 3 does not have the hash audit/head.json names: the log was replaced" rx audit head
assert_not_contains "$ERR" "record 4 does not"
run_refused "record 3 does not have the hash audit/head.json names"
assert_exit 1 rx audit verify
assert_contains "$OUT" "audit/head.json:1: record 3 has hash ${H3:0:16}..., the head names ${H4:0:16}"
# ... while one behind that record 4 does chain onto is a true point (a lost rename): accepted
forge head 3 "$H3"
assert_exit 0 rx audit head
assert_eq "3 $H3" "$("$RX_PYTHON" -c 'import json,sys; h=json.load(open(sys.argv[1])); print(h["seq"], h["hash"])' "$OUT")" \
    "audit head with head.json one behind"
assert_exit 0 rx audit verify
restore

# =============================================================================================
# 2. audit head --reset (rx_audit_head_current, head_reset_locked, head_reset_record)

# reset_ok SEQ PREV: `audit head --reset` exits 0, keeps the log's lines, appends one head_reset
# record (seq SEQ+1, reset_at_seq SEQ, previous_head PREV: "null" or a seq), rewrites head.json to
# it as a regular file, prints it; verify is then clean and calls run again.
reset_ok() {
    local keep
    keep=$(wc -c <"$LOG")
    head -c "$keep" "$LOG" >"$RX_TMP/before.log"
    assert_exit 0 rx audit head --reset
    cmp -s "$RX_TMP/before.log" <(head -c "$keep" "$LOG") || fail "--reset changed the log's records"
    "$RX_PYTHON" - "$LOG" "$HEAD" "$OUT" "$1" "$2" <<'PY' || fail "--reset: wrong record or head"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
head, printed = json.load(open(sys.argv[2])), json.loads(open(sys.argv[3]).read())
seq, prev = int(sys.argv[4]), sys.argv[5]
last = json.loads(lines[-1])
assert len(lines) == seq + 1, (len(lines), seq)
assert last["phase"] == "head_reset" and last["seq"] == seq + 1 and last["reset_at_seq"] == seq, last
ph = last["previous_head"]
assert (ph is None) if prev == "null" else (ph["seq"] == int(prev)), ph
assert head["seq"] == seq + 1 and head["hash"] == last["hash"], head
assert printed == head, (printed, head)
PY
    [[ -f $HEAD && ! -L $HEAD ]] || fail "--reset did not leave head.json a regular file"
    assert_exit 0 rx audit verify
    assert_exit 0 rx run lab1 t.touch --param "file=$RX_TMP/after.reset"
    [[ -e $RX_TMP/after.reset ]] || fail "no call ran after --reset"
    rm "$RX_TMP/after.reset"
}

# --- head.json removed
rm "$HEAD"
refused 74 "head.json: missing, but the log's last record is number 4" rx audit head
run_refused "missing, but the log's last record is number 4"
assert_exit 1 rx audit verify
assert_contains "$OUT" "audit/head.json:1: missing, but the log holds numbered records up to 4"
reset_ok 4 null
restore

# --- head.json garbage: unreadable as a head, so the reset replaces it (previous_head null)
printf 'garbage, not a head\n' >"$HEAD"
refused 74 "head.json: not a JSON object" rx audit head
run_refused "head.json: not a JSON object"
assert_exit 1 rx audit verify --json
"$RX_PYTHON" - "$OUT" <<'PY' || fail "verify did not report head_bad: $(cat "$OUT")"
import json, sys
rep = json.load(open(sys.argv[1]))
assert any(e["problem"] == "head_bad" and "not a JSON object" in e["message"] for e in rep["errors"]), rep
PY
reset_ok 4 null
restore
# ... and heads that are JSON but not heads: each named (the reset was shown above)
for bad in '{"seq":"four","hash":"'"$H4"'","mac":"'"$H4"'"}|"seq" must be a whole number' \
           '{"seq":4,"hash":"'"${H4^^}"'","mac":"'"$H4"'"}|"hash" and "mac" must be 64 lowercase hex'; do
    printf '%s\n' "${bad%%|*}" >"$HEAD"
    refused 74 "head.json: ${bad#*|}" rx audit head
done
# ... a right shape with a wrong mac
"$RX_PYTHON" - "$HEAD" "$H4" <<'PY'
import sys
open(sys.argv[1], "w").write('{"seq":4,"hash":"%s","keyed":false,"mac":"%s"}\n' % (sys.argv[2], "0" * 64))
PY
refused 74 "head.json: its mac does not match" rx audit head
reset_ok 4 4 # readable: previous_head keeps what the reset replaced
restore

# --- head.json a symbolic link (to a copy of the true head): refused, and the reset replaces
# the link itself, never writing through it
cp "$HEAD" "$RX_TMP/elsewhere.json"
target0=$(state "$RX_TMP/elsewhere.json")
rm "$HEAD"
ln -s "$RX_TMP/elsewhere.json" "$HEAD"
refused 74 "head.json: is a symbolic link" rx audit head
run_refused "head.json: is a symbolic link"
reset_ok 4 null
assert_eq "$target0" "$(state "$RX_TMP/elsewhere.json")" "the symlink's target after --reset"
restore

# --- head.json a FIFO (rx_fs_read_file: not a regular file, and no hang in open): the reset
# replaces it with a regular file
rm "$HEAD"
mkfifo -m 600 "$HEAD"
refused 74 "head.json: not a regular file" timeout 20 "$REXEC_BIN" --workspace "$WS" audit head
run_refused "head.json: not a regular file"
reset_ok 4 null
restore

# --- head.json a directory: refused the same way; the reset cannot rename over it and says so
# (74), leaving the log as it was
rm "$HEAD"
mkdir -m 700 "$HEAD"
log0=$(state "$LOG")
assert_exit 74 rx audit head
assert_contains "$ERR" "head.json: not a regular file"
assert_exit 1 rx audit verify
assert_contains "$OUT" "audit/head.json:1: $HEAD: not a regular file"
assert_exit 74 rx audit head --reset
assert_contains "$ERR" "head.json: cannot update the audit head"
assert_eq "$log0" "$(state "$LOG")" "audit.log after a failed --reset"
[[ -d $HEAD ]] || fail "the failed --reset removed the head.json directory"
[[ ! -e $WS/audit/.head.json.tmp ]] || fail "the failed --reset left .head.json.tmp behind"
restore

# --- the log emptied, head.json at record 4: the reset removes head.json, and its record starts
# the log again (seq 1, reset_at_seq 0, previous_head the old head)
: >"$LOG"
refused 74 "the log is empty" rx audit head
reset_ok 0 4
restore

# =============================================================================================
# 3. rexec.json's "audit", read by audit verify (src/api/records.c, rexec_audit_key_file)

# cfg_refused JSON NEEDLE: with rexec.json holding JSON (raw text), verify exits 78 naming NEEDLE
cfg_refused() {
    printf '%s\n' "$1" >"$WS/rexec.json"
    refused 78 "$WS/rexec.json: $2" rx audit verify
    assert_not_contains "$OUT" "audit: ok"
}
cfg_refused '{"hosts": {}, "audit": ' "not valid JSON"
cfg_refused '{"audit": ["key_file", "/etc/rexec/audit.key"]}' "audit: must be an object"
cfg_refused '{"audit": "/etc/rexec/audit.key"}' "audit: must be an object"
cfg_refused '{"audit": {"key_file": "keys/audit.key"}}' "audit.key_file: must be an absolute path"
cfg_refused '{"audit": {"key_file": 42}}' "audit.key_file: must be an absolute path"
# the same reading for `audit head`
printf '{"audit": {"key_file": "audit.key"}}\n' >"$WS/rexec.json"
refused 78 "audit.key_file: must be an absolute path" rx audit head
# an "audit" object without key_file is fine: an unkeyed verify
printf '{"audit": {"syslog": "/dev/null"}}\n' >"$WS/rexec.json"
assert_exit 0 rx audit verify
assert_contains "$OUT" "audit: ok: 1 file(s), 4 record(s), chain intact"

# rexec.json not a regular file (src/base/fsutil.c, rx_fs_read_file)
rm "$WS/rexec.json"
ln -s "$RX_TMP/rexec.json.orig" "$WS/rexec.json"
refused 78 "$WS/rexec.json: is a symbolic link" rx audit verify
# a dangling link too: not taken for "no rexec.json" (which would verify unkeyed and say ok)
rm "$WS/rexec.json"
ln -s "$RX_TMP/nonexistent.json" "$WS/rexec.json"
refused 78 "$WS/rexec.json: is a symbolic link" rx audit verify
refused 78 "$WS/rexec.json: is a symbolic link" rx audit head
rm "$WS/rexec.json"
mkfifo -m 600 "$WS/rexec.json"
refused 78 "$WS/rexec.json: not a regular file" timeout 20 "$REXEC_BIN" --workspace "$WS" audit verify
rm "$WS/rexec.json"
cp -p "$RX_TMP/rexec.json.orig" "$WS/rexec.json"
assert_exit 0 rx audit verify

# =============================================================================================
# 4. audit/anchor.json not a regular file (rx_audit_anchor_load -> rx_fs_read_file): verify and
# show refuse (74) naming it; a FIFO does not hang them
printf '{"anchor":"%s","files":[]}\n' "$H4" >"$RX_TMP/anchor.json"
ANCHOR=$WS/audit/anchor.json
ln -s "$RX_TMP/anchor.json" "$ANCHOR"
refused 74 "$ANCHOR: is a symbolic link" rx audit verify
refused 74 "$ANCHOR: is a symbolic link" rx audit show
# a dangling link too: not taken for "no anchor"
rm "$ANCHOR"
ln -s "$RX_TMP/nonexistent-anchor.json" "$ANCHOR"
refused 74 "$ANCHOR: is a symbolic link" rx audit verify
rm "$ANCHOR"
mkdir -m 700 "$ANCHOR"
refused 74 "$ANCHOR: not a regular file" rx audit verify
rmdir "$ANCHOR"
mkfifo -m 600 "$ANCHOR"
refused 74 "$ANCHOR: not a regular file" timeout 20 "$REXEC_BIN" --workspace "$WS" audit verify
refused 74 "$ANCHOR: not a regular file" timeout 20 "$REXEC_BIN" --workspace "$WS" audit show
rm "$ANCHOR"
assert_exit 0 rx audit verify
assert_exit 0 rx run lab1 t.touch --param "file=$RX_TMP/ran.3"
[[ -e $RX_TMP/ran.3 ]] || fail "the last call did not run"
pass
