#!/usr/bin/env bash
# Keys as OpenSSH treats them (issue 35, item 5), against a real sshd and a real ssh-agent:
# a private key its group or others may read is refused in ssh's words unless the host says
# "key_permissions": "ignore"; a passphrase key with no key_passphrase is used through the agent
# when SSH_AUTH_SOCK is set (and the messages name both ways out when it cannot be); and
# `hosts import-ssh-config` says "auth": "agent" where ssh would use the agent, and the entry it
# prints logs in.
tid="auth: key permissions, a passphrase key through the agent, import-ssh-config's agent"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
command -v ssh-agent >/dev/null && command -v ssh-add >/dev/null || skip "ssh-agent/ssh-add not installed"
lab_start 1
marker=$RX_TMP/ran
ws_add_action t.touch '{"risk": "L0", "command": "touch {path}", "params": {"path": {"type": "path"}}}'
ran() { [[ -e $marker ]] && rm -f "$marker"; }
key=$WS/keys/id_ed25519

# ---- permissions, as sshkey_perm_ok: group/other bits on a key of our own uid
for mode in 644 640 604 660; do
    chmod "$mode" "$key"
    assert_exit 255 rx run lab1 t.touch --param "path=$marker"
    assert_contains "$ERR" "Permissions 0$mode for '$key' are too open. It is required that your private key files are NOT accessible by others. This private key will be ignored."
    assert_contains "$ERR" '"key_permissions": "ignore"'
    ! ran || fail "ran with a key of mode $mode"
done
ws_edit 'c["hosts"]["lab1"]["key_permissions"] = "ignore"'
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
ran || fail "key_permissions ignore did not run with a 0660 key"
ws_edit 'c["hosts"]["lab1"]["key_permissions"] = "sometimes"'
assert_exit 78 rx hosts
assert_contains "$ERR" "key_permissions"
ws_edit 'del c["hosts"]["lab1"]["key_permissions"]'
chmod 400 "$key"
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
ran || fail "a 0400 key did not run"
chmod 600 "$key"

# ---- a passphrase key, no key_passphrase
pass="pp-$(head -c 12 /dev/urandom | base64 | tr '+/' 'xy')"
ssh-keygen -q -t ed25519 -N "$pass" -C locked -f "$WS/keys/locked" </dev/null
cat "$WS/keys/locked.pub" >>"$LAB_DIR/authorized_keys"
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/locked"'

# no agent: both ways out are named
assert_exit 255 env -u SSH_AUTH_SOCK "$REXEC_BIN" --workspace "$WS" run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "the key $WS/keys/locked is protected by a passphrase: set \"key_passphrase\" to the name of a secret holding it, or load the key into an ssh-agent (ssh-add $WS/keys/locked) and run rexec with SSH_AUTH_SOCK set"

agent_sock=$RX_TMP/agent.sock
agent_pid=""
# shellcheck disable=SC2154 # _rc is set inside the trap
trap '_rc=$?; set +e; [[ -z $agent_pid ]] || kill "$agent_pid" 2>/dev/null; (exit "$_rc"); _rx_cleanup' EXIT
eval "$(ssh-agent -s -a "$agent_sock")" >/dev/null
agent_pid=$SSH_AGENT_PID
export SSH_AUTH_SOCK=$agent_sock

# an agent that does not hold it
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "the key $WS/keys/locked is protected by a passphrase and the ssh-agent at $agent_sock does not hold it: ssh-add $WS/keys/locked, or set \"key_passphrase\""
! ran || fail "ran with a locked key the agent does not hold"

# ssh-add it (the passphrase through SSH_ASKPASS, as a desktop would ask): rexec logs in with it
printf '#!/bin/sh\ncat %q\n' "$RX_TMP/pass" >"$RX_TMP/askpass"
printf '%s\n' "$pass" >"$RX_TMP/pass"
chmod 700 "$RX_TMP/askpass"
SSH_ASKPASS=$RX_TMP/askpass SSH_ASKPASS_REQUIRE=force DISPLAY=:0 setsid -w ssh-add -q "$WS/keys/locked" </dev/null 2>"$ERR" \
    || fail "ssh-add of the locked key failed: $(cat "$ERR")"
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
ran || fail "the passphrase key did not run through the agent"
grep -q "Accepted publickey.*ED25519" "$(lab_log lab1)" || fail "sshd logged no publickey login"
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/id_ed25519"'

# ---- import-ssh-config: "auth": "agent" where ssh would use the agent
export REXEC_SSH_CONFIG=$RX_TMP/ssh_config
home=$RX_TMP/home  # no ~/.ssh/id_*: ssh's default IdentityFiles do not exist
mkdir -p "$home"
p1=$(lab_port lab1)
cat >"$REXEC_SSH_CONFIG" <<CFG
Host viaagent
    HostName 127.0.0.1
    Port $p1
    User $LAB_USER
    UserKnownHostsFile $WS/known_hosts
Host keyonly
    HostName 127.0.0.1
    IdentityFile $key
    IdentitiesOnly yes
Host keyandagent
    HostName 127.0.0.1
    IdentityFile $key
Host noagent
    HostName 127.0.0.1
    IdentityAgent none
CFG
HOME=$home assert_exit 0 rx hosts import-ssh-config
for h in viaagent keyandagent; do
    grep -q "^  \"$h\": {\"ssh_alias\":\"$h\",\"auth\":\"agent\"," "$OUT" || fail "$h: no \"auth\": \"agent\": $(cat "$OUT")"
done
for h in keyonly noagent; do
    grep -q "^  \"$h\": {\"ssh_alias\":\"$h\",\"description\"" "$OUT" || fail "$h: expected no \"auth\": $(cat "$OUT")"
done
HOME=$home assert_exit 0 env -u SSH_AUTH_SOCK "$REXEC_BIN" hosts import-ssh-config viaagent
assert_not_contains "$OUT" '"auth"'

# the entry as printed, pasted under "hosts", logs in with the agent's key
ssh-add -q "$key" 2>/dev/null
HOME=$home assert_exit 0 rx hosts import-ssh-config viaagent
entry=$(sed -n 's/^  "viaagent": //p' "$OUT" | sed 's/,$//')
ws_edit 'import json as j; c["hosts"]["viaagent"] = j.loads(args[0])' "$entry"
HOME=$home assert_exit 0 rx run viaagent t.touch --param "path=$marker"
ran || fail "the imported agent entry did not run"
pass
