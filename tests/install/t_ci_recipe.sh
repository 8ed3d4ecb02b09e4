#!/usr/bin/env bash
# docs/ci-recipe.sh, the CI recipe docs/ci.md includes, passes against the local lab
# (LAB_PROVIDER=local): every step exits 0, L3 is denied, the artifacts hold the JSON results,
# the audit log and evidence, the verification passes and the token is in no artifact; and the
# lab and the workspace are gone afterwards.
tid="ci recipe: docs/ci-recipe.sh against the local lab"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
command -v sshd >/dev/null 2>&1 || [[ -x /usr/sbin/sshd ]] || skip "sshd is not installed"

art=$RX_TMP/artifacts
head -c 24 /dev/urandom | base64 | tr '+/' 'xy' >"$RX_TMP/token"
LAB_API_TOKEN=$(<"$RX_TMP/token")
export LAB_API_TOKEN
port=$(_rx_free_block 1)
TMPDIR=$RX_TMP REXEC=$REXEC_BIN ARTIFACTS=$art LAB_PROVIDER=local LAB_PORT=$port \
    assert_exit 0 bash "$REXEC_SRC/docs/ci-recipe.sh"
assert_contains "$OUT" "ci: done"
for f in check reset api suite rootwipe audit-verify; do
    [[ -s $art/$f.json ]] || fail "no artifact $f.json"
done
assert_contains "$art/rootwipe.json" '"decision":"DENY"'
assert_contains "$art/audit-verify.json" "\"status\":\"ok\""
assert_contains "$art/reset.json" '"decision":"ALLOW"'
assert_contains "$art/suite.json" '"stdout":"smoke\n"'
assert_contains "$art/api.json" "token of 32 bytes"
assert_not_contains "$art/api.json" "$LAB_API_TOKEN"
[[ -s $art/audit/audit.log ]] || fail "the audit log is not among the artifacts"
[[ $(find "$art/evidence" -name meta.json | wc -l) -eq 3 ]] || fail "expected the evidence of 3 calls (reset, api, suite)"
# torn down: no rexec-ci.* directory left, no sshd of that lab
if compgen -G "$RX_TMP/rexec-ci.*" >/dev/null; then fail "the recipe left its work directory"; fi
if ss -Hltn "sport = :$port" | grep -q .; then fail "the lab still listens on port $port"; fi
pass
