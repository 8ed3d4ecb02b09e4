#!/usr/bin/env bash
# stdout and stderr stay apart and byte-exact: binary data, NUL bytes, more than 1 MiB, and a
# remote that fills stderr before writing stdout (a reader stuck on stdout would deadlock).
tid="run: streams apart and byte-exact"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.cat '{"risk": "L0", "max_output_bytes": 16777216,
  "command": "cat {out}; cat {err} >&2", "params": {"out": {"type": "path"}, "err": {"type": "path"}}}'
ws_add_action t.cat_err_first '{"risk": "L0", "max_output_bytes": 16777216,
  "command": "cat {err} >&2; cat {out}", "params": {"out": {"type": "path"}, "err": {"type": "path"}}}'

head -c 3000000 /dev/urandom >"$RX_TMP/out.bin"
head -c 2500000 /dev/urandom >"$RX_TMP/err.bin"
printf 'a\0b\0\0c\377\376' >>"$RX_TMP/out.bin"

for action in t.cat t.cat_err_first; do
    assert_exit 0 rx run lab1 $action --param "out=$RX_TMP/out.bin" --param "err=$RX_TMP/err.bin"
    cmp "$OUT" "$RX_TMP/out.bin" || fail "$action: stdout differs from the file"
    cmp "$ERR" "$RX_TMP/err.bin" || fail "$action: stderr differs from the file"
done

# Empty output stays empty; output without a final newline keeps it missing.
printf 'no newline' >"$RX_TMP/nonl"
: >"$RX_TMP/empty"
assert_exit 0 rx run lab1 t.cat --param "out=$RX_TMP/nonl" --param "err=$RX_TMP/empty"
cmp "$OUT" "$RX_TMP/nonl" || fail "stdout without a final newline"
assert_eq 0 "$(wc -c <"$ERR")" "empty stderr"
pass
