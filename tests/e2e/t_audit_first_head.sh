#!/usr/bin/env bash
# A head that cannot be written never locks the audit log (issue 30). The fault is made by a
# directory where the head's temporary file goes (what EMFILE or a full disk do to the head):
#  1. a new workspace: the head of nothing cannot be created before the first record, so the
#     call is refused (74) and nothing runs or is written; the fault gone, the next call works;
#  2. later, head.json cannot be rewritten (a second link keeps the in-place update off it, the
#     directory blocks the rewrite): calls still work, verify says intact (the head is behind);
#     the fault gone, the next call brings the head up to the log's end.
tid="audit: a head that cannot be written never locks the log"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.mark "{\"risk\": \"L0\", \"command\": \"touch $RX_TMP/ran-{n}; echo marked\",
    \"params\": {\"n\": {\"type\": \"string\", \"pattern\": \"^[0-9]$\"}}}"
rm -rf "$WS/audit"
mkdir -m 700 "$WS/audit" "$WS/audit/.head.json.tmp"

# 1. the first record's head cannot be made: nothing runs, nothing is written
assert_exit 74 rx run lab1 t.mark --param n=1
assert_contains "$ERR" "$WS/audit/audit.log: cannot create the audit head before the first record (nothing was written; the next call tries again)"
[[ ! -e $RX_TMP/ran-1 ]] || fail "ran although its intent could not be written"
[[ ! -s $WS/audit/audit.log ]] || fail "a record was written: $(cat "$WS/audit/audit.log")"
assert_exit 0 rx audit verify
rmdir "$WS/audit/.head.json.tmp"
assert_exit 0 rx run lab1 t.mark --param n=2
assert_exit 0 rx audit verify
assert_exit 0 rx audit head
assert_contains "$OUT" '"seq":2,'

# 2. the head cannot follow: the log is not locked, and verify does not call it tampered
ln "$WS/audit/head.json" "$RX_TMP/head.link"
mkdir -m 700 "$WS/audit/.head.json.tmp"
assert_exit 0 rx run lab1 t.mark --param n=3
assert_exit 0 rx run lab1 t.mark --param n=4
assert_exit 0 rx audit verify
assert_contains "$OUT" "audit: ok: 1 file(s), 6 record(s), chain intact"
assert_not_contains "$OUT" "head.json"
rmdir "$WS/audit/.head.json.tmp"
rm "$RX_TMP/head.link"
assert_exit 0 rx run lab1 t.mark --param n=5
assert_exit 0 rx audit head
assert_contains "$OUT" '"seq":8,'
assert_exit 0 rx audit verify
pass
