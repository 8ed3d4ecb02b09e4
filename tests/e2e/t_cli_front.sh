#!/usr/bin/env bash
# The light rexec (src/cli/front.c): linked without libcrypto, libssh2 and libuv, it runs `run`
# and `eval` through a serve socket itself and hands every other command line to rexec-full.
# Both print the same: stdout, stderr, exit status and the --json object (without its per-call
# values), for a success, a remote failure, a refusal, eval, errors with --json, and for command
# lines it hands over (a direct run, an unreachable socket, a usage error, --stdin). A front that
# cannot find rexec-full still runs a call through serve (it runs it itself) and says, for
# anything else, which program it could not start (exit 70).
tid="cli: the light front runs serve calls itself, hands the rest to rexec-full"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

FULL=$(dirname "$REXEC_BIN")/rexec-full
[[ -x $FULL ]] || fail "no rexec-full beside $REXEC_BIN"
readelf -d "$REXEC_BIN" >"$OUT"
assert_contains "$OUT" "Shared library: [libc.so"
for lib in libssh2 libcrypto libssl libuv; do
    grep -q "Shared library: \[${lib}[.]" "$OUT" && fail "the front needs $lib: $(grep NEEDED "$OUT")"
done

lab_start 1
ws_add_action t.both '{"risk": "L0", "command": "echo out-{text}; echo err-{text} >&2; exit 3", "params": {"text": {"type": "string"}}}'
ws_add_action t.held '{"risk": "L2", "command": "echo held"}'
ws_add_action t.cat '{"risk": "L0", "command": "cat"}'
SOCK=$RX_TMP/s.sock
REXEC_BIN=$FULL start_serve  # (rexec-full's own serve)

# same ARGS...: the front and rexec-full, given ARGS, exit alike and print alike (the --json
# objects' run_id, duration_ms and evidence, challenge ids and check's "(N ms)" aside)
normal() {
    "$RX_PYTHON" - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        o = json.loads(line)
    except ValueError:
        print(line, end="")
        continue
    for k in ("run_id", "duration_ms", "evidence"):
        o.pop(k, None)
    print(json.dumps(o, sort_keys=True))
PY
}
ids() { sed -E 's/ch-[0-9a-f]{8,}/ch-ID/g; s/\([0-9]+ ms\)/(N ms)/g' "$1"; }
same() {
    local rc_front rc_full
    rc_front=0; "$REXEC_BIN" "$@" >"$RX_TMP/f.out" 2>"$RX_TMP/f.err" </dev/null || rc_front=$?
    rc_full=0; "$FULL" "$@" >"$RX_TMP/g.out" 2>"$RX_TMP/g.err" </dev/null || rc_full=$?
    assert_eq "$rc_full" "$rc_front" "exit status of: $*"
    assert_eq "$(normal "$RX_TMP/g.out" | ids /dev/stdin)" "$(normal "$RX_TMP/f.out" | ids /dev/stdin)" \
        "stdout of: $*"
    assert_eq "$(ids "$RX_TMP/g.err")" "$(ids "$RX_TMP/f.err")" "stderr of: $*"
    LAST_RC=$rc_front
}
S=(--workspace "$WS" --socket "$SOCK")
same "${S[@]}" run lab1 sys.echo -p text=hello
assert_eq 0 "$LAST_RC" "a plain call"
same "${S[@]}" run lab1 sys.echo -p text=hello --json
same run lab1 t.both --param=text=x "${S[@]}"
assert_eq 3 "$LAST_RC" "the remote exit status"
same "${S[@]}" run lab1 t.both -p text=x --json --timeout 30
same "${S[@]}" run lab1 nope
assert_eq 78 "$LAST_RC" "an unknown action"
same "${S[@]}" run lab1 nope --json
same "${S[@]}" run lab1 sys.echo -p text=x -p bogus=1 --json
same "${S[@]}" run lab1 t.held
same "${S[@]}" run lab1 t.held --grant nosuchgrant --json
same "${S[@]}" eval lab1 t.held
same "${S[@]}" eval lab1 sys.echo -p text=x --json
# handed over: a direct call, an unreachable socket, usage errors, --stdin, check
same --workspace "$WS" run lab1 sys.echo -p text=direct
same --workspace "$WS" --socket "$RX_TMP/none.sock" run lab1 sys.echo -p text=x
assert_eq 255 "$LAST_RC" "an unreachable serve"
same "${S[@]}" run lab1
same "${S[@]}" run lab1 sys.echo -p text=x --timeout 0
same "${S[@]}" run lab1 sys.echo -p text=x --grant a --grant b
printf 'piped' >"$RX_TMP/in"
same "${S[@]}" run lab1 t.cat --stdin "$RX_TMP/in"
same "${S[@]}" check lab1
same --version

# alone: the front still runs a serve call itself; anything else names what it cannot start
mkdir "$RX_TMP/alone"
cp "$REXEC_BIN" "$RX_TMP/alone/rexec"
assert_exit 0 "$RX_TMP/alone/rexec" "${S[@]}" run lab1 sys.echo -p text=by-the-front
assert_contains "$OUT" by-the-front
assert_exit 70 "$RX_TMP/alone/rexec" --version
assert_contains "$ERR" "cannot start the full program rexec-full"
pass
