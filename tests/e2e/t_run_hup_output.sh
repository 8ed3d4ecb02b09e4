#!/usr/bin/env bash
# SIGHUP (a closed terminal, a dropped ssh session to the controller) ends `rexec run` like
# SIGTERM: the remote command is stopped, the outcome record is written, exit 130, and
# `audit verify` stays clean; directly and through serve. What the CLI prints: `--socket --json`
# has the same fields as a direct `--json` (stdout_truncated_in_result included), and
# several hosts' output keeps its NUL bytes, directly and through serve.
tid="run: SIGHUP ends a run with its outcome; --socket --json fields; NUL bytes of several hosts"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
HOLD=$RX_TMP/hold
ws_add_action t.hold "{\"risk\": \"L0\", \"command\": \"touch $HOLD; sleep 2718\"}"
ws_add_action t.big '{"risk": "L0", "command": "head -c 5000 /dev/zero | tr \"\\\\0\" x"}'
ws_add_action t.nul '{"risk": "L0", "command": "printf \"a\\\\0b\\\\n\"; printf \"c\\\\0d\""}'
ws_edit 'c.setdefault("limits", {})["max_result_bytes"] = 1000'

SOCK=$RX_TMP/s.sock
CLIENT=
at_exit '[[ -z $CLIENT ]] || kill -KILL "$CLIENT" 2>/dev/null'
start_serve --log off

# hup_run [GLOBAL_OPTIONS...]: a long call, SIGHUP once it runs on the host; exit 130, the
# remote command gone, an outcome record, and verify exits 0.
hup_run() {
    rm -f "$HOLD"
    "$REXEC_BIN" --workspace "$WS" "$@" run lab1 t.hold >"$RX_TMP/hup.out" 2>"$RX_TMP/hup.err" &
    CLIENT=$!
    wait_until 30 test -e "$HOLD"
    wait_until 10 remote_pgrep 'sleep 2718'
    kill -HUP "$CLIENT"
    rc=0
    wait "$CLIENT" || rc=$?
    CLIENT=
    assert_eq 130 "$rc" "exit status after SIGHUP ($*)"
    wait_until 20 bash -c '! "$1" --dir "$2" ps "sleep 2718" >/dev/null' _ "$RX_LAB" "$LAB_DIR"
    assert_exit 0 rx audit verify
    assert_contains "$OUT" "intact"
    local last
    last=$(tail -n 1 "$WS/audit/audit.log")
    [[ $last == *'"phase":"outcome"'* && $last == *'"action":"t.hold"'* ]] ||
        fail "the last record is not t.hold's outcome: $last"
}
hup_run
assert_contains "$RX_TMP/hup.err" "hung up: stopping the remote commands"
hup_run --socket "$SOCK"
assert_contains "$RX_TMP/hup.err" "interrupted: stopping the remote commands"

# ---- --socket --json carries what a direct --json does -----------------------------------------
keys() {  # keys FILE: the sorted keys of the JSON object in FILE, and the *_in_result values
    "$RX_PYTHON" -c 'import json,sys; o=json.load(open(sys.argv[1]));
print(" ".join(sorted(o)), o["stdout_truncated_in_result"], o["stderr_truncated_in_result"])' "$1"
}
assert_exit 0 rx run lab1 t.big --json
direct=$(keys "$OUT")
assert_exit 0 rx --socket "$SOCK" run lab1 t.big --json
served=$(keys "$OUT")
assert_eq "$direct" "$served" "the fields of --json, direct and through serve"
[[ $served == *"True False" ]] || fail "stdout_truncated_in_result is not true: $served"

# ---- several hosts: lines keep their NUL bytes ---------------------------------------------------
# nul_lines FILE: FILE is lab1's and lab2's two prefixed lines, NULs included, in any order
nul_lines() {
    "$RX_PYTHON" - "$1" <<'PY' || { _rx_show stdout "$1"; fail "NUL bytes lost in prefixed output"; }
import sys
lines = sorted(open(sys.argv[1], "rb").read().splitlines(keepends=True))
want = sorted([b"[lab1] a\0b\n", b"[lab1] c\0d\n", b"[lab2] a\0b\n", b"[lab2] c\0d\n"])
assert lines == want, lines
PY
}
assert_exit 0 rx run @lab t.nul --no-progress
nul_lines "$OUT"
assert_exit 0 rx --socket "$SOCK" run @lab t.nul --no-progress
nul_lines "$OUT"
pass
