#!/usr/bin/env bash
# docs/ci-recipe.sh, the CI recipe docs/ci.md includes, passes against the local lab
# (LAB_PROVIDER=local): every step exits 0, L3 is denied, the artifacts hold the JSON results,
# the audit log and evidence, the verification passes and the token is in no artifact; and the
# lab and the workspace are gone afterwards. The wait for the lab's sshd (what the docker and
# external providers do before going on): an sshd that comes up only after the recipe has
# started waiting is waited for; one that never answers ends the job after LAB_WAIT_S, saying so.
# And .dockerignore keeps the build trees, the local lab and .git out of the build context.
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

# --- the wait for a lab's sshd (external provider: the CI starts the lab, maybe late)
late=$RX_TMP/late-lab
# shellcheck disable=SC2154 # _rc is set inside the trap
trap '_rc=$?; set +e; "$REXEC_SRC/scripts/lab" down --purge --dir "$late" >/dev/null 2>&1; (exit "$_rc"); _rx_cleanup' EXIT
port=$(_rx_free_block 1)
ext=(env TMPDIR="$RX_TMP" REXEC="$REXEC_BIN" ARTIFACTS="$RX_TMP/art2" LAB_PROVIDER=external
     LAB_ADDRESS=127.0.0.1 LAB_PORT="$port" LAB_USER="$(id -un)"
     LAB_CLIENT_KEY_FILE="$late/workspace/keys/id_ed25519"
     LAB_HOST_KEY_PUB_FILE="$late/hosts/lab1/ssh_host_ed25519_key.pub")
LAB_WAIT_S=1 assert_exit 1 "${ext[@]}" bash "$REXEC_SRC/docs/ci-recipe.sh"
assert_contains "$ERR" "ci-recipe: the lab's sshd at 127.0.0.1:$port did not answer within 1 s"
"${ext[@]}" LAB_WAIT_S=120 bash "$REXEC_SRC/docs/ci-recipe.sh" >"$OUT" 2>"$ERR" &
recipe=$!
wait_until 60 grep -q "ci-recipe: waiting for the lab's sshd at 127.0.0.1:$port" "$ERR"
"$REXEC_SRC/scripts/lab" up --dir "$late" --hosts 1 --base-port "$port" >/dev/null
rc=0; wait "$recipe" || rc=$?
[[ $rc == 0 ]] || { _rx_show "the recipe's stderr" "$ERR"; fail "the recipe did not go on once the lab answered (exit $rc)"; }
assert_contains "$OUT" "ci: done"

# --- .dockerignore: what `docker build -f docs/controller.Dockerfile .` leaves out (Go's
# filepath.Match per pattern, as docker's; fnmatch agrees for these names)
"$RX_PYTHON" - "$REXEC_SRC/.dockerignore" <<'PY' || fail ".dockerignore lets a build tree, the lab or .git into the context"
import fnmatch, sys
pats = [l.strip() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
for path in ["build", "build-release", "build-iface", ".lab", ".git", "python/build"]:
    assert any(fnmatch.fnmatch(path, p) for p in pats), path
for path in ["src", "docs", "CMakeLists.txt", "python/rexec_client", "remote", "man"]:
    assert not any(fnmatch.fnmatch(path, p) for p in pats), path
PY
pass
