#!/usr/bin/env bash
# An idle runner closes (limits.runner_idle_s, docs/workspace.md; "The runner" in
# docs/remote-contract.md): after calls through serve, the runner and everything it started leave
# the VM once it has had no call for runner_idle_s, while serve keeps the connection warm (the
# same TCP connection), and the next calls get a new runner on it.
tid="runner: an idle runner closes, the connection stays"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c["limits"]["runner_idle_s"] = 1'
ws_add_action t.ok '{"risk": "L0", "command": "echo ok"}'
start_serve --log off
sx() { timeout 60 "$REXEC_BIN" --workspace "$WS" --socket "$SOCK" "$@"; }
port=$(lab_port lab1)

# the first call to a host takes a channel of its own; runners start with the second
for i in 1 2 3; do
    assert_exit 0 sx run lab1 t.ok
    assert_eq ok "$(cat "$OUT")" "call $i"
done
remote_pgrep "$RX_SHELL_RE" >/dev/null || fail "no runner on the VM after three calls"
conn=$(ss -Htn state established "( dport = :$port and dst 127.0.0.1 )" | awk '{print $3}')
[[ -n $conn ]] || fail "no connection from serve to lab1"

# a second without a call: the runner goes, with its slots, and nothing else is left
wait_until 20 bash -c '! "$1" --dir "$2" ps "." >/dev/null' _ "$RX_LAB" "$LAB_DIR"
assert_eq "$conn" "$(ss -Htn state established "( dport = :$port and dst 127.0.0.1 )" | awk '{print $3}')" \
    "serve's connection to lab1 (still the same)"

# the next calls work, on a new runner over the same connection
for i in 4 5; do
    assert_exit 0 sx run lab1 t.ok
    assert_eq ok "$(cat "$OUT")" "call $i"
done
remote_pgrep "$RX_SHELL_RE" >/dev/null || fail "no new runner"
assert_eq "$conn" "$(ss -Htn state established "( dport = :$port and dst 127.0.0.1 )" | awk '{print $3}')" \
    "serve's connection to lab1 after the runner closed"

# a value out of range is refused naming the key
ws_edit 'c["limits"]["runner_idle_s"] = 0'
assert_exit 78 rx hosts
assert_contains "$ERR" "limits.runner_idle_s: 0 is outside 0.1..604800 seconds"
pass
