#!/usr/bin/env bash
# rexec run: remote exit statuses pass through (255 shown as 254), errors have their own codes,
# and --json carries every field docs/cli.md lists.
tid="run: exit statuses and --json"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.exit '{"risk": "L0", "command": "echo out-{code}; echo err-{code} >&2; exit {code}",
  "params": {"code": {"type": "int", "min": 0, "max": 255}}}'

for code in 0 1 3 44; do
    assert_exit "$code" rx run lab1 t.exit --param code=$code
    assert_eq "out-$code" "$(cat "$OUT")" "stdout of exit $code"
    assert_eq "err-$code" "$(cat "$ERR")" "stderr of exit $code"
done
# A remote 255 would read as "host unavailable": it is shown as 254.
assert_exit 254 rx run lab1 t.exit --param code=255
assert_eq "out-255" "$(cat "$OUT")" "stdout of exit 255"

# --json: one object, every field of docs/cli.md, the streams inside.
assert_exit 3 rx run lab1 t.exit --param code=3 --json
assert_eq 1 "$(wc -l <"$OUT")" "--json lines"
"$RX_PYTHON" - "$OUT" <<'PY' || fail "--json fields"
import json, sys
o = json.load(open(sys.argv[1]))
want = "run_id host action decision reason executed exit_code signal timed_out truncated stdout stderr stdout_bytes stderr_bytes stdout_sha256 duration_ms containment evidence challenge_id error".split()
missing = [k for k in want if k not in o]
assert not missing, missing
assert o["host"] == "lab1" and o["action"] == "t.exit", o
assert o["decision"] == "ALLOW" and o["executed"] is True, o
assert o["exit_code"] == 3 and o["signal"] is None and o["timed_out"] is False, o
assert o["stdout"] == "out-3\n" and o["stderr"] == "err-3\n", o
assert o["stdout_bytes"] == 6 and o["stderr_bytes"] == 6, o
import hashlib
assert o["stdout_sha256"] == hashlib.sha256(b"out-3\n").hexdigest(), o
assert o["containment"] in ("pid-namespace", "process-group"), o
assert o["error"] is None and o["challenge_id"] is None, o
PY

# Configuration and request errors: 78 for unknown names, 65 for a bad parameter, 64 for usage.
assert_exit 78 rx run nosuchhost t.exit --param code=0
assert_contains "$ERR" 'unknown host "nosuchhost"'
assert_exit 78 rx run lab1 no.such.action
assert_contains "$ERR" 'unknown action "no.such.action"'
assert_exit 65 rx run lab1 t.exit --param code=256
assert_contains "$ERR" 'code'
# a value that fails its pattern (the lab's sys.echo takes printable ASCII only)
assert_exit 65 rx run lab1 sys.echo --param "text=tab	here"
assert_contains "$ERR" 'text'
assert_contains "$ERR" 'pattern'
assert_exit 65 rx run lab1 t.exit --param code=7 --param extra=1
assert_contains "$ERR" 'extra'
assert_exit 65 rx run lab1 t.exit
assert_contains "$ERR" 'code'
assert_exit 64 rx run lab1 t.exit --param
assert_exit 64 rx run

# Diagnostics come through the library's log callback, which the CLI routes to stderr only when
# REXEC_DEBUG is set: the state transitions are there with it and absent without it.
REXEC_DEBUG=1 assert_exit 0 rx run lab1 t.exit --param code=0
assert_contains "$ERR" 'rexec: debug: lab1: AUTH -> READY'
assert_contains "$ERR" 'rexec: debug: lab1: exec '
assert_exit 0 rx run lab1 t.exit --param code=0
assert_not_contains "$ERR" 'rexec: debug'
pass
