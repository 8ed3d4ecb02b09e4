#!/usr/bin/env bash
# serve starts a host's runner as soon as the host's first call ends (docs/remote-contract.md,
# "The runner"): the first call takes a channel of its own, the runner starts with no call behind
# it, and the second call runs on it (warm) instead of starting it.
tid="runner: serve starts a host's runner after its first call"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.ok '{"risk": "L0", "command": "echo ok"}'
start_serve --log off
sx() { timeout 60 "$REXEC_BIN" --workspace "$WS" --socket "$SOCK" "$@"; }
slots() { remote_pgrep '^bash /[^ ]*/\.rexec-[0-9]+/r\.[^ /]*/slot '; }

# one call, and only one: the runner (its shell and its first slot; the second comes with its
# first call) comes up behind it
assert_exit 0 sx run lab1 t.ok
assert_eq ok "$(cat "$OUT")" "the first call"
poll_until 30 has_remote '^bash /[^ ]*/\.rexec-[0-9]+/r\.[^ /]*/slot ' ||
    fail "no runner on the VM after the first call: $(lab ps '.')"
one_shell() { [[ $(session_shells | wc -l) == 1 ]]; } # the first call's own shell may still be going
poll_until 30 one_shell || fail "one runner shell expected, found: $(session_shells | tr '\n' ' ')"
runner=$(session_shells)
first=$(slots)

# the next calls run on that runner: the same shell and slots, nothing new started for them
for i in 2 3; do
    assert_exit 0 sx run lab1 t.ok
    assert_eq ok "$(cat "$OUT")" "call $i"
done
assert_eq "$runner" "$(session_shells)" "the runner's shell after calls 2 and 3"
slots | grep -qx "$first" || fail "the runner's first slot ($first) is gone after calls 2 and 3"
pass
