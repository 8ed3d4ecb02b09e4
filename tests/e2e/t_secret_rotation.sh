#!/usr/bin/env bash
# A secret file rewritten while serve runs (docs/serve-protocol.md: "Secret values are read for
# every call"): the next call gets the new value, and the new value is redacted from its stdout,
# stderr, result, evidence and audit, although serve's workspace-wide redactor was built from
# the old one. A call that is not handed the secret still has the old value redacted.
tid="serve: a secret rotated while serve runs"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
rand() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
old="rot-$(rand)-old"
new="rot-$(rand)-new"
umask 077
printf '%s' "$old" >"$WS/secrets/rot"
ws_edit 'c["secrets"]["ROT_TOKEN"] = {"file": "secrets/rot"}'
# The command prints the value it got, and its base64, on both streams; and the sha256 of the
# value, which says which value it was without showing it.
ws_add_action t.use '{"risk": "L0", "secrets": ["ROT_TOKEN"], "command": "echo \"v:$ROT_TOKEN:e\"; echo \"v:$ROT_TOKEN:e\" >&2; printf %s \"$ROT_TOKEN\" | base64; printf %s \"$ROT_TOKEN\" | sha256sum | cut -c1-64"}'
ws_add_action t.say "{\"risk\": \"L0\", \"command\": \"echo 'o:$old:e'\"}"

SOCK=$RX_TMP/serve.sock
start_serve
SX=("$REXEC_BIN" --workspace "$WS" --socket "$SOCK")
sha() { printf %s "$1" | sha256sum | cut -c1-64; }

assert_exit 0 timeout 60 "${SX[@]}" run lab1 t.use --json
assert_contains "$OUT" "$(sha "$old")" # the command got the old value
assert_contains "$OUT" 'v:[REDACTED:ROT_TOKEN]:e'
assert_not_contains "$OUT" "$old"

printf '%s' "$new" >"$WS/secrets/rot.tmp"
mv "$WS/secrets/rot.tmp" "$WS/secrets/rot"
assert_exit 0 timeout 60 "${SX[@]}" run lab1 t.use --json
assert_contains "$OUT" "$(sha "$new")" # the command got the new value
out=$(json stdout) err=$(json stderr)
[[ $out == *'v:[REDACTED:ROT_TOKEN]:e'* ]] || fail "the new value in stdout is not redacted: $(json stdout_bytes) bytes"
[[ $err == *'v:[REDACTED:ROT_TOKEN]:e'* ]] || fail "the new value in stderr is not redacted"
# its base64 form is redacted too
[[ $out != *"$(printf %s "$new" | base64)"* ]] || fail "the new value's base64 in stdout"
# a call that is not handed the secret: the old value is still known
assert_exit 0 timeout 60 "${SX[@]}" run lab1 t.say
assert_contains "$OUT" 'o:[REDACTED:ROT_TOKEN]:e'

stop_gently "$SERVE_PID"
for v in "$old" "$new"; do
    if grep -rlaF -- "$v" "$WS/audit" "$WS/evidence" "$RX_TMP/serve.err" >"$RX_TMP/leaks"; then
        fail "a secret value in $(tr '\n' ' ' <"$RX_TMP/leaks")"
    fi
done
assert_exit 0 rx audit verify
pass
