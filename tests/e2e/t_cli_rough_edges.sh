#!/usr/bin/env bash
# Small things a first user meets (issue 35, item 4): outside a workspace the message says how to
# name one; `audit prune` with nothing to prune names no anchor.json (none is written); eval
# does not repeat a reason that is the decision; audit show's DECISION/REASON column holds the
# longest pair, so EXIT stays in its column; the hidden helpers' --help. No sshd is needed.
tid="cli: workspace hint, prune with nothing, eval's line, audit show's columns"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

empty=$RX_TMP/empty
mkdir "$empty"
for cmd in hosts actions approvals "run web1 sys.uname"; do
    # shellcheck disable=SC2086 # the command's words
    (cd "$empty" && REXEC_WORKSPACE='' assert_exit 78 "$REXEC_BIN" $cmd)
    assert_contains "$ERR" "$empty/rexec.json: No such file or directory (not a workspace: name one with --workspace DIR, -w DIR or \$REXEC_WORKSPACE"
done
assert_exit 78 "$REXEC_BIN" -w "$empty" hosts --json
assert_contains "$OUT" '(not a workspace: name one with --workspace DIR'

WS=$RX_TMP/ws
mkdir -m 700 "$WS"
cat >"$WS/rexec.json" <<'JSON'
{"hosts": {"web1": {"address": "127.0.0.1", "user": "u", "key": "k"}},
 "actions": {"sys.uname": {"risk": "L0", "command": "uname -a"},
             "svc.restart": {"risk": "L2", "command": "echo {unit}",
                             "params": {"unit": {"type": "string"}}}}}
JSON
chmod 600 "$WS/rexec.json"

# a workspace that loads gets no hint for another missing file
assert_exit 0 rx audit prune --before 1d
assert_eq "audit: nothing to prune: no rotated audit file is older than 1d (audit.log itself never is pruned)" "$(cat "$OUT")" "prune with nothing to prune"
assert_not_contains "$OUT" "anchor.json"
[[ ! -e $WS/audit/anchor.json ]] || fail "a prune with nothing to prune wrote audit/anchor.json"

assert_exit 75 rx eval web1 svc.restart --param unit=x
assert_eq "web1: REQUIRES_APPROVAL (L2)" "$(head -1 "$OUT")" "eval's line for REQUIRES_APPROVAL"
assert_exit 0 rx eval web1 sys.uname
assert_eq "web1: ALLOW (ALLOW_LEVEL, L0)" "$(head -1 "$OUT")" "eval's line for ALLOW"

# show does not verify: a hand-written record with the longest DECISION/REASON pair
mkdir -p "$WS/audit"
printf '%s\n' '{"seq":1,"ts":"2026-12-02T10:48:19.650Z","run_id":"20261202T104819Z-fbd4c1a3125c067d","phase":"intent","host":"web1","action":"svc.restart","decision":"REQUIRES_APPROVAL","reason":"GRANT_NOT_APPROVED"}' \
    >"$WS/audit/audit.log"
assert_exit 0 rx audit show
"$RX_PYTHON" - "$OUT" <<'PY' || fail "audit show's EXIT column moved: $(cat "$OUT")"
import sys
head, row = open(sys.argv[1]).read().splitlines()[:2]
col = head.index("EXIT")
assert "REQUIRES_APPROVAL/GRANT_NOT_APPROVED " in row, row
assert row[col - 1] == " " and row[col] == "-", (col, row)
PY

# the hidden helpers have no help of their own: --help prints the overview (it once passed NULL
# to fputs)
for c in __complete __interface; do
    assert_exit 0 "$REXEC_BIN" "$c" --help
    assert_contains "$OUT" "usage: rexec [--workspace DIR]"
done
pass
