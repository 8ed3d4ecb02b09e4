#!/usr/bin/env bash
# The parameter corpus (issue 31): some 300 templates that put {v} in every shell context
# (plain words, "...", $(...), backticks, heredocs, quotes, comments, ${...}, arithmetic, [[ ]],
# declare/read/printf -v/test -v, eval/source/trap/let, bash -c, the command word, subscripts,
# what the loader cannot read: backslash-newline, two heredocs on a line, long delimiters...),
# each with a string, path, int and enum parameter. Every (template, type) is either refused at
# load (exit 78, `line N, column M` pointing at a {v}) or run against the lab with every hostile
# value of its type through one `rexec serve`; each value tries to create a witness file of its
# own, and none may exist afterwards. Plain-word templates also check the value arrived intact.
# The work is in tests/e2e/param_corpus.py.
tid="params: corpus of templates x hostile values, no witness"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
# REXEC_CORPUS_REPORT=FILE keeps the whole report (the failure display shows 200 lines); then
# lib.sh's cleanup, with the test's status in $? (it goes through an if).
# shellcheck disable=SC2317 # run by the EXIT trap
_t_exit() {
    local rc=$?
    [[ -z ${REXEC_CORPUS_REPORT:-} ]] || cp -- "$OUT" "$REXEC_CORPUS_REPORT" || true
    if (exit "$rc"); then _rx_cleanup; else _rx_cleanup; fi
}
trap _t_exit EXIT
timeout 240 "$RX_PYTHON" "$REXEC_SRC/tests/e2e/param_corpus.py" "$REXEC_BIN" "$WS" "$RX_TMP" \
    >"$OUT" 2>"$ERR" || { rc=$?; _rx_show stdout "$OUT"; _rx_show stderr "$ERR"; fail "param_corpus.py exited $rc"; }
cat "$OUT"
grep -q '^param corpus: .* 0 witnesses$' "$OUT" || fail "no summary line"
pass
