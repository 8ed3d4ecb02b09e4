#!/usr/bin/env bash
# "ssh_alias": a host resolved by OpenSSH's own `ssh -G` (HostName, Port, User, IdentityFile,
# UserKnownHostsFile, ProxyJump), and `rexec hosts import-ssh-config` printing entries to paste.
# The ssh config is the test's own ($REXEC_SSH_CONFIG, passed as ssh -F); ~/.ssh is not touched.
tid="interop: ssh_alias and import-ssh-config"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
p1=$(lab_port lab1)
marker=$RX_TMP/ran
ws_add_action t.touch '{"risk": "L0", "command": "touch {path}", "params": {"path": {"type": "path"}}}'
export REXEC_SSH_CONFIG=$RX_TMP/ssh_config
# The host key only in the alias's UserKnownHostsFile; the workspace's known_hosts is empty.
mv "$WS/known_hosts" "$RX_TMP/kh_user"
: >"$WS/known_hosts"
cat >"$REXEC_SSH_CONFIG" <<CFG
Host labalias
    HostName 127.0.0.1
    Port $p1
    User $LAB_USER
    IdentityFile $WS/keys/id_ed25519
    UserKnownHostsFile $RX_TMP/kh_user
Host web-*
    User nobody
Host other.one second
    HostName 192.0.2.7
    IdentityFile $RX_TMP/absent_key
    ProxyJump labalias
CFG

ws_edit 'c["hosts"]["lab1"] = {"ssh_alias": "labalias"}'
assert_exit 0 rx hosts --json
"$RX_PYTHON" - "$OUT" "$p1" "$LAB_USER" <<'PY' || fail "ssh -G values not used: $(cat "$OUT")"
import json, sys
doc = json.load(open(sys.argv[1]))
h = [x for x in doc if x["name"] == "lab1"][0]
assert (h["address"], h["port"], h["user"]) == ("127.0.0.1", int(sys.argv[2]), sys.argv[3]), h
PY
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
[[ -e $marker ]] || fail "the alias host did not run"
rm -f "$marker"

# Values in rexec.json win over ssh -G: a wrong port given explicitly is used (and fails).
closed=$("$RX_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
ws_edit 'c["hosts"]["lab1"]["port"] = int(args[0])' "$closed"
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "cannot connect to 127.0.0.1 port $closed"
ws_edit 'del c["hosts"]["lab1"]["port"]'

# Failure modes, each with its message.
ws_edit 'c["hosts"]["o"] = {"ssh_alias": "second", "proxy_jump": "nowhere"}'
assert_exit 78 rx hosts
assert_contains "$ERR" "hosts.o.ssh_alias: ssh -G second names no IdentityFile that exists (1 listed, first $RX_TMP/absent_key)"
ws_edit 'c["hosts"]["o"] = {"ssh_alias": "second", "auth": "agent", "proxy_jump": "nowhere"}'
assert_exit 78 rx hosts
assert_contains "$ERR" 'hosts.o.proxy_jump: "nowhere" is not an inventory host'
# The alias's ProxyJump names the inventory host by its alias.
ws_edit 'c["hosts"]["o"] = {"ssh_alias": "second", "auth": "agent"}'
assert_exit 0 rx hosts --json
ws_edit 'c["hosts"]["o"] = {"ssh_alias": "-oProxyCommand=x"}'
assert_exit 78 rx hosts
assert_contains "$ERR" "is not an ssh alias rexec passes to ssh -G"
echo "Bogus-Keyword yes" >>"$REXEC_SSH_CONFIG"
ws_edit 'c["hosts"]["o"] = {"ssh_alias": "second", "auth": "agent"}'
assert_exit 78 rx hosts
assert_contains "$ERR" "hosts.lab1.ssh_alias: ssh -G labalias failed (exit 255): "
assert_contains "$ERR" "Bad configuration option"
sed -i '$d' "$REXEC_SSH_CONFIG"
ws_edit 'del c["hosts"]["o"]'

# import-ssh-config: concrete names only (no web-*), PATTERN filters, the output pastes.
assert_exit 0 rx hosts import-ssh-config
assert_contains "$OUT" '"labalias": {"ssh_alias":"labalias","description":"ssh -G: '"$LAB_USER"'@127.0.0.1 port '"$p1"'"}'
assert_contains "$OUT" '"other.one": {"ssh_alias":"other.one"'
assert_contains "$OUT" "via labalias"
assert_not_contains "$OUT" "web-"
"$RX_PYTHON" -c 'import json, sys; d = json.loads("{" + open(sys.argv[1]).read() + "}"); assert set(d) == {"labalias", "other.one", "second"}, d' "$OUT" \
    || fail "import output does not paste as JSON members: $(cat "$OUT")"
assert_exit 0 rx hosts import-ssh-config 'lab*'
assert_contains "$OUT" '"labalias"'
assert_not_contains "$OUT" "second"
assert_exit 1 rx hosts import-ssh-config 'zzz*'
assert_contains "$ERR" "no Host in the ssh config matches"
# "~/" in what ssh -G prints (it leaves IdentityFile unexpanded) is $HOME, or without HOME the
# passwd entry's home directory.
cat >>"$REXEC_SSH_CONFIG" <<CFG
Host tilde
    HostName 127.0.0.1
    Port $p1
    IdentityFile ~/.ssh/rx-absent-key
CFG
mkdir -p "$RX_TMP/home/.ssh"
ws_edit 'c["hosts"]["o"] = {"ssh_alias": "tilde"}'
assert_exit 78 env HOME="$RX_TMP/home" "$REXEC_BIN" --workspace "$WS" hosts
assert_contains "$ERR" "hosts.o.ssh_alias: ssh -G tilde names no IdentityFile that exists (1 listed, first $RX_TMP/home/.ssh/rx-absent-key)"
pwhome=$(getent passwd "$(id -u)" | cut -d: -f6)
assert_exit 78 env -u HOME "$REXEC_BIN" --workspace "$WS" hosts
assert_contains "$ERR" "(1 listed, first $pwhome/.ssh/rx-absent-key)"
# ssh that cannot be run, prints no hostname, or does not stop talking: 78, naming why
mkdir "$RX_TMP/nossh" "$RX_TMP/fakessh"
assert_exit 78 env PATH="$RX_TMP/nossh" "$REXEC_BIN" --workspace "$WS" hosts
assert_contains "$ERR" "cannot run ssh: No such file or directory (install openssh-client)"
printf '#!/bin/sh\nprintf "user x\\nnospace\\nport 22\\n"\n' >"$RX_TMP/fakessh/ssh"
chmod 755 "$RX_TMP/fakessh/ssh"
assert_exit 78 env PATH="$RX_TMP/fakessh" "$REXEC_BIN" --workspace "$WS" hosts
assert_contains "$ERR" "printed no usable hostname/port"
printf '#!/bin/sh\nexec /usr/bin/yes\n' >"$RX_TMP/fakessh/ssh"
assert_exit 78 timeout -k 5 30 env PATH="$RX_TMP/fakessh" "$REXEC_BIN" --workspace "$WS" hosts
assert_contains "$ERR" "no answer within 5 s (or more than 262144 bytes)"
ws_edit 'del c["hosts"]["o"]'
# import-ssh-config without REXEC_SSH_CONFIG reads $HOME/.ssh/config; names rexec cannot take
# (not 1-64 of [A-Za-z0-9._-]) are skipped with a note
long=$(printf 'h%.0s' $(seq 65))
printf 'Host homehost bad@name %s\n    HostName 127.0.0.1\n' "$long" >"$RX_TMP/home/.ssh/config"
assert_exit 0 env -u REXEC_SSH_CONFIG HOME="$RX_TMP/home" "$REXEC_BIN" --workspace "$WS" hosts import-ssh-config
assert_contains "$OUT" '"homehost": {"ssh_alias":"homehost"'
assert_not_contains "$OUT" "bad@name"
assert_contains "$ERR" "skipped bad@name: not a rexec host name (1-64 of [A-Za-z0-9._-])"
assert_contains "$ERR" "skipped $long: not a rexec host name"
pass
