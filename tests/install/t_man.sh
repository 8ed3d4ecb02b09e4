#!/usr/bin/env bash
# The man pages in man/ format without a warning (man --warnings: groff -ww), and rexec(1) names
# every command `rexec --help` lists and every global option.
tid="man: rexec(1), rexec.json(5) without warnings"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
command -v man >/dev/null && command -v groff >/dev/null || skip "man-db or groff is not installed"

for page in rexec.1 rexec.json.5; do
    MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$REXEC_SRC/man/$page" >"$OUT" 2>"$ERR" \
        || fail "man -l $page failed: $(cat "$ERR")"
    [[ ! -s $ERR ]] || { _rx_show "warnings of $page" "$ERR"; fail "man --warnings complains about $page"; }
    [[ $(wc -l <"$OUT") -gt 40 ]] || fail "$page renders to only $(wc -l <"$OUT") lines"
done
MANWIDTH=200 man -l "$REXEC_SRC/man/rexec.1" 2>/dev/null >"$OUT"
"$REXEC_BIN" --help | awk '/^commands:/ { on = 1; next } on && !/^  / { exit }
    on { split($0, f, "  +"); n = split(f[2], c, " [|] "); for (i = 1; i <= n; i++) { split(c[i], w, " "); print w[1] } }' \
    >"$RX_TMP/commands"
[[ $(wc -l <"$RX_TMP/commands") -ge 10 ]] || fail "could not read the commands of rexec --help"
while read -r c; do
    grep -qE "^ +rexec $c( |$)" "$OUT" || fail "rexec(1) has no synopsis line for 'rexec $c'"
done <"$RX_TMP/commands"
for o in --workspace --socket --version --help; do
    assert_contains "$OUT" "$o"
done
pass
