#!/usr/bin/env bash
# A runner is not idled out while its host is part of a serve request that still runs
# (limits.runner_idle_s, docs/workspace.md): with runner_idle_s 1, a request to lab1 and lab2
# (parallel 1) whose lab1 call ends at once and whose lab2 call waits for a file the test creates
# keeps lab1's runner for as long as it runs, while lab3's runner, idle since after lab1's call
# ended, closes; once the request ends, lab1's runner idles out as before. Runner starts and
# closes are read from serve's debug lines (REXEC_DEBUG), which name the host.
tid="runner: a request's hosts keep their runners until it ends"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 3
ws_edit 'c["limits"]["runner_idle_s"] = 1'
ws_add_action t.ok '{"risk": "L0", "command": "echo ok"}'
# the first host to run it returns at once; any later one waits for the test's file $RX_TMP/go
ws_add_action t.hold "{\"risk\": \"L0\", \"command\": \"mkdir $RX_TMP/first 2>/dev/null && exit 0; touch $RX_TMP/waiting; until [ -e $RX_TMP/go ]; do sleep 0.05; done; echo released\"}"
SOCK=$RX_TMP/s.sock
SLOG=$RX_TMP/serve.err
HOLD=
at_exit 'touch "$RX_TMP/go"; [[ -z $HOLD ]] || wait "$HOLD" || true'
SERVE_ERR=$SLOG start_serve REXEC_DEBUG=1 --log off
sx() { timeout 120 "$REXEC_BIN" --workspace "$WS" --socket "$SOCK" "$@"; }
starts() { grep -c "^rexec: debug: $1: runner [^ ]*: START -> IDLE$" "$SLOG" || true; }
closes() { grep -c "^rexec: debug: $1: runner [^ ]*: IDLE -> CLOSE$" "$SLOG" || true; }
closed() { grep -q "^rexec: debug: $1: runner [^ ]*: IDLE -> CLOSE$" "$SLOG"; }
more_closes() { [[ $(closes "$1") -gt $2 ]]; }

# lab1 gets a runner (the first call to a host takes a channel of its own; runners start with
# the second)
assert_exit 0 sx run lab1 t.ok
assert_exit 0 sx run lab1 t.ok
assert_eq 1 "$(starts lab1)" "runners started on lab1"

# the request: lab1's call (on that runner) ends at once, lab2's waits
sx run lab1,lab2 t.hold --parallel 1 >"$RX_TMP/hold.out" 2>"$RX_TMP/hold.err" &
HOLD=$!
wait_until 60 test -e "$RX_TMP/waiting"
# (counted from here: on a slow machine the warm-up's runner may have idled out before the
# request came, and the request's lab1 call started another)
s0=$(starts lab1) c0=$(closes lab1)

# lab3's runner starts after lab1's call ended, and idles out (the clock of this test)
assert_exit 0 sx run lab3 t.ok
assert_exit 0 sx run lab3 t.ok
wait_until 60 closed lab3
assert_eq "$c0" "$(closes lab1)" "lab1's runners idled out while its request still ran"
assert_eq "$s0" "$(starts lab1)" "runners started on lab1 while its request ran"

# the request ends: lab1's runner idles out as before
touch "$RX_TMP/go"
wait "$HOLD" || fail "the request failed: $(cat "$RX_TMP/hold.err")"
HOLD=
assert_contains "$RX_TMP/hold.out" released
wait_until 60 more_closes lab1 "$c0"
assert_eq "$s0" "$(starts lab1)" "runners started on lab1"

# and the next call to lab1 gets a new runner
assert_exit 0 sx run lab1 t.ok
assert_eq $((s0 + 1)) "$(starts lab1)" "runners started on lab1 after the first closed"
pass
