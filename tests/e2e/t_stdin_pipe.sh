#!/usr/bin/env bash
# `--stdin -` fed by a pipe (docs/cli.md, "--stdin"; docs/remote-contract.md, "Stdin of unknown
# length"): sent as it is read, in frames, in flat memory.
tid="stdin: a pipe streams in flat memory"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
ws_edit 'c["hosts"]["lab1"]["allow"] = "L0"; c["hosts"]["lab2"]["allow"] = "L0"
c["limits"]["max_stdin_bytes"] = 512 * 1024 * 1024'
ws_add_action t.sha '{"risk": "L0", "command": "sha256sum | cut -d\" \" -f1"}'
ws_add_action t.psha '{"risk": "L0", "stdin": "piped", "command": "sha256sum | cut -d\" \" -f1"}'
d=$RX_TMP/in
mkdir -p "$d"
n=$((64 * 1024 * 1024))
head -c "$n" /dev/urandom >"$d/big"
want=$(sha256sum <"$d/big" | cut -d' ' -f1)

# peak ACTION: `cat big | rexec run lab1 ACTION --stdin -`, the controller's peak RSS in KiB in $PEAK
peak() {
    cat "$d/big" | /usr/bin/time -f %M -o "$RX_TMP/rss" "$REXEC_BIN" --workspace "$WS" run lab1 "$1" --stdin - >"$OUT" 2>"$ERR"
    local rc=$?
    PEAK=$(tail -n1 "$RX_TMP/rss")
    return $rc
}
peak t.sha || fail "exit $?: $(cat "$ERR")"
assert_eq "$want" "$(cat "$OUT")" "sha256 of 64 MiB piped (staged)"
echo "peak RSS staged: $PEAK KiB" >&2
peak t.psha || fail "exit $?: $(cat "$ERR")"
assert_eq "$want" "$(cat "$OUT")" "sha256 of 64 MiB piped (piped action)"
echo "peak RSS piped: $PEAK KiB" >&2
pass
