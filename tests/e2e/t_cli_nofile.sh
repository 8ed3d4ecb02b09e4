#!/usr/bin/env bash
# Few file descriptors (`ulimit -n`): every command either works or exits 71 naming
# RLIMIT_NOFILE, within a bounded time (never spins, never aborts, no sanitizer report), and
# the audit log stays whole (no intent left without its outcome). Also: started with stdin
# closed, rexec still works (libuv aborts when its own descriptor lands on 0-2).
tid="cli: ulimit -n 3..64: works or exit 71 naming RLIMIT_NOFILE; stdin closed"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.echo '{"risk": "L0", "command": "echo fd-test"}'
# a fan-out: six more names for lab1, each its own connection
ws_edit 'h = c["hosts"]["lab1"]
for i in range(1, 7): c["hosts"]["m%d" % i] = dict(h)
c.setdefault("groups", {})["many"] = ["m%d" % i for i in range(1, 7)]'
assert_exit 0 rx run lab1 t.echo   # the host key is known, the log has its first records

# closes what the test's shell left open above stderr (the watchdog's pipe...), then the limit
LIMITED='for f in /proc/$$/fd/*; do k=${f##*/}; if ((k > 2)); then eval "exec $k>&-"; fi; done
ulimit -n "$1"; shift; exec "$@"'
# limited N CMD...: CMD (rexec and its arguments) under `ulimit -n N`, stdout and stderr opened
# before the limit, in $OUT and $ERR; bounded by timeout (124: it hung or spun). Sets RC.
# The leak checker runs at exit and needs descriptors of its own, so it is off here; the
# address and undefined-behaviour checks stay on.
limited() {
    local n=$1
    shift
    RC=0
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
        timeout -k 5 30 bash -c "$LIMITED" _ "$n" "$@" \
        >"$OUT" 2>"$ERR" || RC=$?
}

# One dynamically linked program cannot even start under `ulimit -n 3` with stdin, stdout and
# stderr open: the loader needs a descriptor for each library, before rexec's code runs.
checked=0
for n in 3 4 5 6 7 8 9 10 12 16 24 32 64; do
    for cmd in "run lab1 t.echo" "run @many t.echo" "check lab1" "hosts" "audit verify"; do
        # shellcheck disable=SC2086 # cmd is words
        limited "$n" "$REXEC_BIN" --workspace "$WS" $cmd
        what="ulimit -n $n: rexec $cmd"
        if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$ERR"; then
            _rx_show stderr "$ERR"
            fail "$what: a sanitizer report"
        fi
        case $RC in
        0) ;;
        71) assert_contains "$ERR" "too many open files (RLIMIT_NOFILE is $n)" ;;
        127)
            if [[ $n != 3 ]] || ! grep -q 'error while loading shared libraries' "$ERR"; then
                _rx_show stderr "$ERR"
                fail "$what: exit 127"
            fi ;;
        124 | 137) fail "$what: did not end within 30 s (spinning or hung)" ;;
        *) _rx_show stderr "$ERR"; fail "$what: exit $RC, expected 0 or 71" ;;
        esac
        checked=$((checked + 1))
    done
    # from 24 on, everything works (the needs in src/cli/cli.h, CLI_FDS_*, plus 0-2); from 32
    # on, the fan-out too, one host at a time at first
    if (( n >= 24 )); then
        limited "$n" "$REXEC_BIN" --workspace "$WS" run lab1 t.echo
        assert_eq 0 "$RC" "rexec run under ulimit -n $n"
        assert_contains "$OUT" "fd-test"
    fi
    if (( n >= 32 )); then
        limited "$n" "$REXEC_BIN" --workspace "$WS" run @many t.echo --no-progress
        assert_eq 0 "$RC" "rexec run @many under ulimit -n $n"
        assert_eq 6 "$(grep -c fd-test "$OUT")" "hosts that ran under ulimit -n $n"
        (( n >= 64 )) || assert_contains "$ERR" "rexec: warning: RLIMIT_NOFILE is $n: running at most"
    fi
done
assert_eq 65 "$checked" "commands tried"
# nothing half done: every intent has its outcome, the head is where the log ends
assert_exit 0 rx audit verify
assert_exit 0 rx run lab1 t.echo

# stdin, stdout or stderr closed: the first descriptors rexec opens must not land there
RC=0
"$REXEC_BIN" --workspace "$WS" hosts <&- >"$OUT" 2>"$ERR" || RC=$?
assert_eq 0 "$RC" "hosts with stdin closed"
assert_contains "$OUT" "lab1"
RC=0
"$REXEC_BIN" --workspace "$WS" run lab1 t.echo <&- >"$OUT" 2>"$ERR" || RC=$?
assert_eq 0 "$RC" "run with stdin closed"
assert_contains "$OUT" "fd-test"
assert_exit 0 rx audit verify
pass
