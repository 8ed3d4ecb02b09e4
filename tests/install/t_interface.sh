#!/usr/bin/env bash
# One table per interface (src/cli/interface.c, printed by `rexec __interface`): `rexec help`,
# rexec(1)'s synopsis and options, completions/rexec and docs/cli.md's synopsis and tables, and
# the option literals of the parsers, each hold exactly its commands and options
# (tests/install/interface_check.py names every difference). Then the check itself is put to
# the test: an option added to one place only must fail it.
tid="interface: help, man page, completion, cli.md and parsers match the one table"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
command -v man >/dev/null && command -v groff >/dev/null || skip "man-db or groff is not installed"

render_man() { MANWIDTH=400 LC_ALL=C.UTF-8 man -l "$1" 2>/dev/null; }
check() { "$RX_PYTHON" "$REXEC_SRC/tests/install/interface_check.py" "$REXEC_BIN" "$1" "$2"; }

render_man "$REXEC_SRC/man/rexec.1" >"$RX_TMP/man.txt"
check "$REXEC_SRC" "$RX_TMP/man.txt" >"$OUT" || { cat "$OUT" >&2; fail "the interface drifted from its table (above)"; }

# The same check on a copy with one option added to one place only: each must be named.
copy=$RX_TMP/src
mkdir -p "$copy/src" "$copy/docs" "$copy/man"
cp -r "$REXEC_SRC/src/cli" "$copy/src/"
cp -r "$REXEC_SRC/completions" "$copy/"
cp "$REXEC_SRC/docs/cli.md" "$copy/docs/"
cp "$REXEC_SRC/man/rexec.1" "$copy/man/"
mutated() {  # mutated WHAT FILE PY_RE REPLACEMENT EXPECTED_NEEDLE
    local what=$1 file=$2
    cp "$REXEC_SRC/$file" "$copy/$file.orig"
    "$RX_PYTHON" - "$copy/$file" "$3" "$4" <<'PY' || fail "could not mutate $file"
import re, sys
p, pat, rep = sys.argv[1:4]
s = open(p).read()
t = re.sub(pat, rep, s, count=1, flags=re.M)
assert t != s, "pattern not found"
open(p, "w").write(t)
PY
    render_man "$copy/man/rexec.1" >"$RX_TMP/man2.txt"
    if check "$copy" "$RX_TMP/man2.txt" >"$OUT"; then
        fail "an option added to $what only was not noticed"
    fi
    assert_contains "$OUT" "$5"
    mv "$copy/$file.orig" "$copy/$file"
}
mutated "docs/cli.md's synopsis" docs/cli.md '^(rexec groups \[--json\])' '\1 [--frob]' "'rexec groups' shows ['--frob']"
mutated "rexec(1)'s synopsis" man/rexec.1 '^(\.B rexec groups\n\.RB \[ \\-\\-json \])' '\1\n.RB [ \\-\\-frob ]' "'rexec groups' shows ['--frob']"
mutated "the man page, as a new command" man/rexec.1 '^(\.B rexec groups\n)' '.B rexec frob\n.br\n\1' "'rexec frob' names a command that is not in the table"
mutated "the parser" src/cli/cmd_evidence.c '(if \(strcmp\(argv\[i\], "--json"\) == 0\))' 'if (strcmp(argv[i], "--frob") == 0) json = 1; else \1' "shows ['--frob']"
mutated "docs/cli.md's table of run" docs/cli.md '^(\| `--approve` \|)' '| `--frob` | x |\n\1' "the table of \`rexec run\` shows ['--frob']"
# added to the table only: every face that does not show it is named
sed -i 's|{"--all", NULL, NULL, "also the grants already used"},|&\n    {"--frob", NULL, NULL, "x"},|' "$copy/src/cli/interface.c"
grep -q -- '"--frob"' "$copy/src/cli/interface.c" || fail "could not add --frob to the copy of the table"
cc -I"$REXEC_SRC/include" -o "$RX_TMP/table" -x c - "$copy/src/cli/interface.c" -lcjson <<'C' || skip "no C compiler for the table-only case"
#include <stdio.h>
char *cli_interface_json(void);
int main(void) { puts(cli_interface_json()); return 0; }
C
"$RX_TMP/table" | grep -q -- '--frob' || fail "the copy of the table does not list --frob"
mkdir "$RX_TMP/bin"
printf '#!/bin/sh\n[ "$1" = __interface ] && exec "%s"\nexec "%s" "$@"\n' "$RX_TMP/table" "$REXEC_BIN" >"$RX_TMP/bin/rexec"
chmod +x "$RX_TMP/bin/rexec"
render_man "$copy/man/rexec.1" >"$RX_TMP/man2.txt"
REXEC_BIN=$RX_TMP/bin/rexec check "$copy" "$RX_TMP/man2.txt" >"$OUT" && fail "an option added to the table only was not noticed"
for face in "help: 'rexec approvals' lacks ['--frob']" "rexec(1) SYNOPSIS: 'rexec approvals' lacks ['--frob']" \
    "docs/cli.md (the synopsis at the top): 'rexec approvals' lacks ['--frob']" \
    "completions/rexec: 'rexec approvals --<TAB>' lacks ['--frob']" "src/cli/cmd_approve.c: the options its parser takes lacks ['--frob']"; do
    assert_contains "$OUT" "$face"
done
pass
