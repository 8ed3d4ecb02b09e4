#!/usr/bin/env bash
# `rexec audit recover`: after a `rexec run` is killed (SIGKILL: no outcome can ever come),
# verify exits 2; recover appends an "abandoned" record for that intent only, not for the
# intent of a call a running `rexec serve` is still carrying; once that call ends, verify
# exits 0 and still reports the abandoned run, and `audit show` shows it.
tid="audit recover: a killed run's intent abandoned, a live serve's kept"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.hold1 "{\"risk\": \"L0\", \"command\": \"touch $RX_TMP/hold1; sleep 3001\"}"
ws_add_action t.hold2 "{\"risk\": \"L0\", \"command\": \"touch $RX_TMP/hold2; sleep 3002\"}"

SOCK=$RX_TMP/s.sock
CLIENT=
at_exit '[[ -z $CLIENT ]] || kill -KILL "$CLIENT" 2>/dev/null'
start_serve --log off

# a call through serve, still running while recover looks
"$REXEC_BIN" --workspace "$WS" --socket "$SOCK" run lab1 t.hold1 >"$RX_TMP/c.out" 2>&1 &
CLIENT=$!
wait_until 30 test -e "$RX_TMP/hold1"

# a direct run, killed once its command runs
"$REXEC_BIN" --workspace "$WS" run lab1 t.hold2 >/dev/null 2>&1 &
KILLED=$!
wait_until 30 test -e "$RX_TMP/hold2"
kill -KILL "$KILLED"
wait "$KILLED" || true
killed_run=$(grep '"action":"t.hold2"' "$WS/audit/audit.log" | sed -E 's/.*"run_id":"([^"]+)".*/\1/')
served_run=$(grep '"action":"t.hold1"' "$WS/audit/audit.log" | sed -E 's/.*"run_id":"([^"]+)".*/\1/')
[[ -n $killed_run && -n $served_run ]] || fail "intents not found"

assert_exit 2 rx audit verify
assert_contains "$OUT" "2 intent(s) without outcome"
assert_contains "$OUT" "rexec audit recover"

assert_exit 2 rx audit recover
assert_contains "$OUT" "run $killed_run (writer $KILLED-"
assert_contains "$OUT" "): abandoned"
assert_contains "$OUT" "run $served_run (writer $SERVE_PID-"
assert_contains "$OUT" "kept: its writer is still running"
assert_contains "$OUT" "audit: recover: 1 intent(s) abandoned, 1 left open"
grep -q "\"run_id\":\"$served_run\",\"phase\":\"abandoned\"" "$WS/audit/audit.log" &&
    fail "the live serve's intent was abandoned"

assert_exit 2 rx audit verify
assert_contains "$OUT" "abandoned: run $killed_run"
assert_contains "$OUT" "1 intent(s) without outcome"

# the serve call ends (cancelled): its outcome comes, and the log is clean
kill -INT "$CLIENT"
rc=0
wait "$CLIENT" || rc=$?
CLIENT=
assert_eq 130 "$rc" "the served call, cancelled"
assert_exit 0 rx audit verify
assert_contains "$OUT" "audit: ok:"
assert_contains "$OUT" "1 intent(s) abandoned by \`rexec audit recover\`"
assert_exit 0 rx audit verify --json
"$RX_PYTHON" - "$OUT" "$killed_run" <<'PY' || fail "verify --json"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["status"] == "ok" and o["exit_code"] == 0, o
assert o["n_abandoned"] == 1 and o["abandoned"][0]["run_id"] == sys.argv[2], o
PY
assert_exit 0 rx audit show --run "$killed_run"
assert_contains "$OUT" "abandoned"
assert_contains "$OUT" "WRITER_GONE"
assert_contains "$OUT" "unknown"
assert_exit 0 rx audit recover --json
assert_contains "$OUT" '{"abandoned":0,"kept":0,"intents":[]}'
assert_exit 64 rx audit recover --frob
assert_contains "$ERR" 'audit recover: unknown argument "--frob"'
pass
