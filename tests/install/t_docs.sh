#!/usr/bin/env bash
# The contract lives in the repository: files the docs include are included verbatim
# (docs/examples/embed.c in docs/architecture.md; docs/ci-recipe.sh and the Dockerfiles in
# docs/ci.md); no tracked file points outside the repository (to the first contract's
# documents or the project folder beside the clone); README links every part of the contract; and every
# relative Markdown link in README.md and docs/ resolves to a file.
tid="docs: included files verbatim, no outside references, links resolve"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
cd "$REXEC_SRC"

# included DOC FILE: FILE's whole text appears in DOC
included() {
    "$RX_PYTHON" - "$1" "$2" <<'PY' || fail "$1 does not include $2 verbatim (copy $2 into it again)"
import sys
doc, inc = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
sys.exit(0 if inc in doc else 1)
PY
}
included docs/architecture.md docs/examples/embed.c
included docs/ci.md docs/ci-recipe.sh
included docs/ci.md docs/controller.Dockerfile
included docs/ci.md docs/lab.Dockerfile

# no pointer outside the repository (the patterns are spelt with classes, so they do not match
# this file itself; it is left out all the same)
if command -v git >/dev/null && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z >"$RX_TMP/files"
else
    find . -path ./.git -prune -o -path './build*' -prune -o -type f -print0 | sed -z 's|^\./||' >"$RX_TMP/files"
fi
pattern='S[P]EC[.]md|D[E]SIGN[.]md|/w[o]rk/|s[h]ared (project )?folder'
hits=$(grep -zv '^tests/install/t_docs.sh$' "$RX_TMP/files" | xargs -0 grep -nIE "$pattern" -- 2>/dev/null || true)
[[ -z $hits ]] || fail "files point outside the repository: $(head -5 <<<"$hits")"

# README links every part of the contract
for d in workspace.md cli.md exit-codes.md audit.md serve-protocol.md contract.md ci.md architecture.md; do
    grep -qF "(docs/$d)" README.md || fail "README.md does not link docs/$d"
done

# relative links resolve
"$RX_PYTHON" - README.md docs/*.md <<'PY' || fail "broken links (above)"
import os, re, sys
bad = 0
for path in sys.argv[1:]:
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # links inside code blocks are not links
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        f = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
        if not os.path.exists(f):
            print(f"{path}: link to {target}: no such file", file=sys.stderr)
            bad = 1
sys.exit(bad)
PY
pass
