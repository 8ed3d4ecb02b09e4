#!/usr/bin/env bash
# Real-fleet authentication: a real ssh-agent (with the identity filter), a passphrase-protected
# key whose passphrase is a workspace secret (and never shows), and ssh's defaults for user and
# port. Each failure mode shows its message, and nothing runs.
tid="interop: agent, passphrase keys, defaults"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

command -v ssh-agent >/dev/null && command -v ssh-add >/dev/null || skip "ssh-agent/ssh-add not installed"
lab_start 1
marker=$RX_TMP/ran
ws_add_action t.touch '{"risk": "L0", "command": "touch {path}; echo ran-as-$(id -un)", "params": {"path": {"type": "path"}}}'
ran() { [[ -e $marker ]] && rm -f "$marker"; }

# ---- ssh-agent ----
agent_sock=$RX_TMP/agent.sock
agent_pid=""
stop_agent() { [[ -z $agent_pid ]] || { kill -CONT "$agent_pid" 2>/dev/null; kill "$agent_pid" 2>/dev/null || true; }; }
trap '_rc=$?; set +e; stop_agent; (exit "$_rc"); _rx_cleanup' EXIT
eval "$(ssh-agent -s -a "$agent_sock")" >/dev/null
agent_pid=$SSH_AGENT_PID
export SSH_AUTH_SOCK=$agent_sock

# The workspace key moves into the agent; rexec is given no private key at all.
ssh-add -q "$WS/keys/id_ed25519" 2>/dev/null
mv "$WS/keys/id_ed25519" "$RX_TMP/id_ed25519.private"
ws_edit 'h = c["hosts"]["lab1"]; h["auth"] = "agent"; del h["key"]'
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
ran || fail "agent auth (any key) did not run"

# With the identity filter: only the named public key is offered.
ssh-keygen -q -t ed25519 -N '' -C other -f "$RX_TMP/other" </dev/null
ssh-add -q "$RX_TMP/other" 2>/dev/null
cp "$RX_TMP/other.pub" "$WS/keys/other.pub"
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/id_ed25519.pub"'
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
ran || fail "agent auth with the filter did not run"
grep -q "Accepted publickey.*ED25519" "$(lab_log lab1)" || fail "sshd logged no publickey login"

# The filter names a key the agent holds but the server does not accept.
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/other.pub"'
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "the server refused the agent's key for user $LAB_USER (1 key tried"
! ran || fail "ran with a refused key"

# The filter names a key the agent does not hold.
ssh-add -q -d "$RX_TMP/other.pub" 2>/dev/null
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "does not hold the key $WS/keys/other.pub (it holds 1 key; ssh-add it)"

# No agent in the environment.
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/id_ed25519.pub"'
assert_exit 255 env -u SSH_AUTH_SOCK "$REXEC_BIN" --workspace "$WS" run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" 'auth is "agent" but SSH_AUTH_SOCK is not set'

# A stuck agent (stopped): the connection fails within the agent's deadline, the loop moves on.
kill -STOP "$agent_pid"
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "the ssh-agent at $agent_sock did not answer within"
kill -CONT "$agent_pid"
! ran || fail "ran through a stuck agent"
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
ran || fail "the agent did not work again after it resumed"

# key_passphrase makes no sense with an agent.
ws_edit 'c["hosts"]["lab1"]["key_passphrase"] = "DEMO_TOKEN"'
assert_exit 78 rx hosts
assert_contains "$ERR" 'hosts.lab1.key_passphrase: not used with "auth": "agent"'
stop_agent; agent_pid=""
unset SSH_AUTH_SOCK SSH_AGENT_PID
mv "$RX_TMP/id_ed25519.private" "$WS/keys/id_ed25519"

# ---- a passphrase-protected key (OpenSSH format, bcrypt KDF) ----
pass="pp-$(head -c 12 /dev/urandom | base64 | tr '+/' 'xy')"
ssh-keygen -q -t ed25519 -N "$pass" -C locked -f "$WS/keys/locked" </dev/null
cat "$WS/keys/locked.pub" >>"$LAB_DIR/authorized_keys"
printf '%s\n' "$pass" >"$WS/secrets/key_pass"
chmod 600 "$WS/secrets/key_pass"
ws_edit '
c["hosts"]["lab1"] = {"address": "127.0.0.1", "port": c["hosts"]["lab1"]["port"], "key": "keys/locked"}
c["secrets"]["KEY_PASS"] = {"file": "secrets/key_pass"}'

# No passphrase given: said so, naming the key.
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "the key $WS/keys/locked is protected by a passphrase: set \"key_passphrase\""
! ran || fail "ran with a locked key"

# A secret that is not declared.
ws_edit 'c["hosts"]["lab1"]["key_passphrase"] = "NOPE"'
assert_exit 78 rx hosts
assert_contains "$ERR" 'hosts.lab1.key_passphrase: unknown secret "NOPE" (declare it under "secrets")'

# The wrong passphrase (another secret): named by secret, never by value.
ws_edit 'c["hosts"]["lab1"]["key_passphrase"] = "DEMO_TOKEN"'
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "cannot unlock the key $WS/keys/locked with the passphrase from secret DEMO_TOKEN"
assert_not_contains "$ERR" "$(cat "$WS/secrets/demo_token")"

# The right one. user and port are omitted too: ssh's defaults (the current user; 22 is
# checked at load below, as the lab cannot listen there).
ws_edit 'c["hosts"]["lab1"]["key_passphrase"] = "KEY_PASS"'
ws_add_action t.leak '{"risk": "L0", "command": "echo \"leak: $1\"; echo \"$(cat '"$WS"'/secrets/key_pass)\""}'
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
ran || fail "the passphrase key did not run"
assert_contains "$OUT" "ran-as-$LAB_USER"
# The passphrase is registered with the redactor: output that holds it shows a marker.
assert_exit 0 rx run lab1 t.leak
assert_not_contains "$OUT" "$pass"
assert_contains "$OUT" "[REDACTED:KEY_PASS]"
for f in "$WS/audit/audit.log" "$WS"/evidence/*/*; do
    ! grep -qF -- "$pass" "$f" || fail "the passphrase is in $f"
done
# ... and it never travels on a command line (ps).
! grep -qF -- "$pass" /proc/[0-9]*/cmdline 2>/dev/null || fail "the passphrase is on a command line"

# A missing key file is named as such.
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/absent"; del c["hosts"]["lab1"]["key_passphrase"]'
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "cannot read the key $WS/keys/absent"

# Defaults: port 22 and the current user, as `rexec hosts --json` shows them.
ws_edit 'c["hosts"]["d"] = {"address": "192.0.2.1", "key": "keys/id_ed25519"}'
assert_exit 0 rx hosts --json
"$RX_PYTHON" - "$OUT" "$LAB_USER" <<'PY' || fail "defaults not shown: $(cat "$OUT")"
import json, sys
doc = json.load(open(sys.argv[1]))
hosts = doc["hosts"] if isinstance(doc, dict) and "hosts" in doc else doc
d = [h for h in hosts if h["name"] == "d"][0]
assert d["port"] == 22, d
assert d["user"] == sys.argv[2], d
PY
pass
