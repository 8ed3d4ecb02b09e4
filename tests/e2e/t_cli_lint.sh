#!/usr/bin/env bash
# `rexec actions --lint [--json]` reports every action whose command template the loader refuses
# (line, column, why), not only the first, and exits 78; 0 with a clean catalog. `rexec check`
# on a workspace that does not load reports the same problems (or says why it does not load).
tid="cli: actions --lint and check report every template problem"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.good '{"risk": "L0", "command": "echo {a}", "params": {"a": {"type": "string"}}}'

# ---- a clean catalog -------------------------------------------------------------------------
n=$(ws_get 'len(c["actions"])')
assert_exit 0 rx actions --lint
assert_contains "$OUT" "$n action(s), no template problem"
[[ ! -s $ERR ]] || fail "stderr not empty: $(cat "$ERR")"
assert_exit 0 rx actions --lint --json
"$RX_PYTHON" - "$OUT" "$n" <<'PY' || fail "--lint --json of a clean catalog"
import json, sys
o = json.load(open(sys.argv[1]))
assert o == {"actions": int(sys.argv[2]), "loads": True, "error": None, "problems": []}, o
PY
assert_exit 0 rx check lab1

# ---- three refused templates beside good ones ----------------------------------------------------
ws_add_action t.quote '{"risk": "L0", "command": "echo hi\necho '"'"'{a}'"'"'", "params": {"a": {"type": "string"}}}'
ws_add_action t.eval '{"risk": "L0", "command": "eval {a}", "params": {"a": {"type": "string"}}}'
ws_add_action t.undeclared '{"risk": "L0", "command": "echo {nope}"}'
ws_add_action t.good2 '{"risk": "L0", "command": "echo \"{a}\"", "params": {"a": {"type": "int"}}}'

assert_exit 78 rx actions --lint
cp "$ERR" "$RX_TMP/lint.err"
[[ ! -s $OUT ]] || fail "stdout not empty: $(cat "$OUT")"
assert_contains "$ERR" 'rexec: actions.t.quote.command: line 2, column 7: a {placeholder} stands inside single quotes'
assert_contains "$ERR" 'rexec: actions.t.eval.command: line 1, column 6: a {placeholder} is an argument of eval'
assert_contains "$ERR" 'rexec: actions.t.undeclared.command: {nope} names no declared parameter'
assert_contains "$ERR" 'rexec: 3 action(s) with a template problem'
assert_not_contains "$ERR" "t.good"
assert_not_contains "$ERR" "does not load: "   # the loader stopped at one of the three

assert_exit 78 rx actions --lint --json
cp "$OUT" "$RX_TMP/lint.json"
"$RX_PYTHON" - "$OUT" <<'PY' || fail "--lint --json with three problems"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["loads"] is False and "t.quote" in o["error"], o
got = {p["action"]: (p["line"], p["column"], p["why"].split(",")[0]) for p in o["problems"]}
assert got == {"t.quote": (2, 7, "stands inside single quotes"),
               "t.eval": (1, 6, "is an argument of eval"),
               "t.undeclared": (None, None, "names no declared parameter")}, got
for p in o["problems"]:
    assert p["error"].startswith("actions.%s.command: " % p["action"]), p
PY

# check reports the same, as text and as JSON; other commands still name the first problem
assert_exit 78 rx check lab1
diff "$RX_TMP/lint.err" "$ERR" || fail "check and actions --lint differ"
assert_exit 78 rx check lab1 --json
diff "$RX_TMP/lint.json" "$OUT" || fail "check --json and actions --lint --json differ"
assert_exit 78 rx hosts
assert_contains "$ERR" "t.quote"
assert_not_contains "$ERR" "t.eval"

# ---- no template problem, but the workspace does not load ----------------------------------------
ws_edit 'for k in ("t.quote", "t.eval", "t.undeclared"): del c["actions"][k]
c["actions"]["t.good"]["risk"] = "L9"'
assert_exit 78 rx actions --lint
assert_contains "$ERR" "rexec: the workspace does not load: "
assert_contains "$ERR" "actions.t.good.risk"
assert_not_contains "$ERR" "template problem"
assert_exit 78 rx check lab1
assert_contains "$ERR" "rexec: the workspace does not load: "
assert_exit 78 rx actions --lint --json
"$RX_PYTHON" -c 'import json,sys; o=json.load(open(sys.argv[1])); assert not o["loads"] and o["problems"] == [] and "risk" in o["error"], o' "$OUT" ||
    fail "--lint --json of a workspace that does not load"

# ---- usage ----------------------------------------------------------------------------------------
assert_exit 64 rx actions --lint --bogus
assert_contains "$ERR" 'actions: unexpected argument "--bogus"'
assert_exit 0 rx actions --help
assert_contains "$OUT" "--lint"
pass
