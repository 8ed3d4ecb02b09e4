#!/usr/bin/env bash
# Retention: `rexec evidence prune --older-than D --keep N`; `rexec audit prune --before D` removes
# whole rotated audit files and the chain still verifies through audit/anchor.json (confirmed by a
# chained prune record; a removed or forged anchor is tampering); `audit show --host --action`.
tid="retention: evidence prune, audit prune with anchor, show filters"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
export REXEC_AUDIT_ROTATE_BYTES=1500   # a few records a file: several rotated files
ws_add_action t.a '{"risk": "L0", "command": "echo a"}'
ws_add_action t.b '{"risk": "L0", "command": "echo b"}'
for i in 1 2 3; do
    assert_exit 0 rx run @lab t.a
    assert_exit 0 rx run lab1 t.b
done
rotated() { find "$WS/audit" -name 'audit-*.log' | wc -l; }
(( $(rotated) >= 2 )) || fail "expected rotated audit files, got $(rotated)"
assert_exit 0 rx audit verify

# ---- audit show --host --action -----------------------------------------------------------------
assert_exit 0 rx audit show --host lab2 --action t.a --json
[[ $(wc -l <"$OUT") -ge 2 ]] || fail "show --host lab2 --action t.a found too little"
"$RX_PYTHON" - "$OUT" <<'PY' || fail "show filters"
import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    assert o["host"] == "lab2" and o["action"] == "t.a", o
PY

# ---- evidence prune ------------------------------------------------------------------------------
assert_eq 9 "$(find "$WS/evidence" -mindepth 1 -maxdepth 1 -type d | wc -l)" "evidence runs"
assert_exit 0 rx evidence prune --older-than 1d --json
assert_contains "$OUT" '"removed":0'
assert_exit 0 rx evidence prune --older-than 2099-01-01 --keep 2
assert_contains "$OUT" "removed 7 run(s)"
assert_eq 2 "$(find "$WS/evidence" -mindepth 1 -maxdepth 1 -type d | wc -l)" "evidence runs kept"
assert_exit 64 rx evidence prune --keep x

# ---- audit prune: the chain verifies through the anchor ------------------------------------------
before=$(rotated)
assert_exit 0 rx audit prune --before 2099-01-01 --json
"$RX_PYTHON" -c 'import json,sys; o=json.load(open(sys.argv[1])); assert o["files"] >= 1 and o["records"] >= 2, o' "$OUT" ||
    fail "audit prune removed nothing: $(cat "$OUT")"
(( $(rotated) < before )) || fail "no rotated file removed"
test -f "$WS/audit/anchor.json" || fail "no anchor written"
assert_exit 0 rx audit verify
assert_exit 0 rx run lab1 t.b                     # the chain goes on after a prune
assert_exit 0 rx audit verify
assert_exit 0 rx audit show --json
assert_contains "$OUT" '"phase":"prune"'
assert_exit 64 rx audit prune

# an anchor removed, or one that no prune record confirms, is tampering
mv "$WS/audit/anchor.json" "$RX_TMP/anchor.json"
assert_exit 1 rx audit verify
"$RX_PYTHON" - "$RX_TMP/anchor.json" "$WS/audit/anchor.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
a["anchor"] = "0" * 64
json.dump(a, open(sys.argv[2], "w"))
PY
assert_exit 1 rx audit verify
cp "$RX_TMP/anchor.json" "$WS/audit/anchor.json"
assert_exit 0 rx audit verify
pass
