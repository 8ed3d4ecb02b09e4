#!/usr/bin/env bash
# remote/provision.sh, tested without touching this machine:
#  - bash -n, shellcheck (when installed), --help, usage errors (exit 2);
#  - --dry-run changes nothing (/etc/passwd, /etc/group, /etc/shadow, /etc/ssh compared before
#    and after) and shows the drop-in and the key line it would write;
#  - as root, a real run in a throwaway sandbox: a private mount namespace (and pid namespace,
#    so nothing started there survives the test) where /etc is a copy. There provision.sh
#    creates the account, the keys file and the sshd drop-in; a second run changes nothing;
#    `sshd -T` shows the drop-in's settings for the account; an sshd started from a config that
#    includes the drop-in accepts the key, refuses a pty, and rexec runs actions through it
#    as that account, with the containment provision.sh predicted (`rexec check`).
tid="remote: provision.sh"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

P=$REXEC_SRC/remote/provision.sh
bash -n "$P" || fail "bash -n remote/provision.sh"
if command -v shellcheck >/dev/null 2>&1; then
    shellcheck -x "$P" >"$OUT" 2>&1 || { _rx_show shellcheck "$OUT"; fail "shellcheck remote/provision.sh"; }
fi
assert_exit 0 bash "$P" --help
assert_contains "$OUT" "usage: provision.sh"
assert_contains "$OUT" "--dry-run"
assert_exit 2 bash "$P"                                    # no key
assert_exit 2 bash "$P" --bogus key.pub
assert_exit 2 bash "$P" --user root key.pub
assert_exit 2 bash "$P" --user 'bad name' key.pub
assert_exit 2 bash "$P" --max-sessions 0 key.pub

lab_start 1
pub=$WS/keys/id_ed25519.pub
[[ -f $pub ]] || ssh-keygen -y -f "$WS/keys/id_ed25519" >"$pub"

# What provision.sh may change: the account's lines (passwd, group, shadow) and /etc/ssh. Not the
# whole of passwd/group/shadow: other tests (t_two_users, t_serve_groups, in this suite at -j or
# in another run on the machine) add and remove accounts meanwhile, and failed this under load.
snapshot() {
    { grep -h -w rexec-e2e /etc/passwd /etc/group /etc/shadow 2>/dev/null || true
      find /etc/ssh -xdev \( -type f -o -type d \) -printf '%p %m %s\n' 2>/dev/null | sort
      find /etc/ssh -xdev -type f -readable -exec sha256sum {} + 2>/dev/null | sort; } | sha256sum
}
before=$(snapshot)
assert_exit 0 bash "$P" --dry-run --user rexec-e2e "$pub"
assert_eq "$before" "$(snapshot)" "--dry-run changed /etc"
getent passwd rexec-e2e >/dev/null && fail "--dry-run created the account"
assert_contains "$OUT" "dry run done (nothing changed)"
assert_contains "$OUT" "Match User rexec-e2e"
assert_contains "$OUT" "restrict ssh-ed25519 "
assert_contains "$OUT" "containment"
# a private key is refused, whatever else is fine
assert_exit 1 bash "$P" --dry-run "$WS/keys/id_ed25519"
assert_contains "$ERR" "PRIVATE key"

if [[ $EUID -ne 0 ]] || ! unshare --mount --pid --fork --kill-child true 2>/dev/null; then
    printf 'ok %s (dry run only: the sandboxed real run needs root and mount namespaces)\n' "$tid"
    exit 0
fi

# ---- a real run in a sandbox ---------------------------------------------------------------------
port=$(_rx_free_block 1)
export P pub port RX_TMP WS REXEC_BIN RX_PYTHON
ws_edit 'c["hosts"]["vm"] = {"address": "127.0.0.1", "port": int(args[0]), "user": "rexec-e2e",
  "key": "keys/id_ed25519", "host_key": "accept-new", "allow": "L0"}' "$port"
ws_add_action t.whoami '{"risk": "L0", "command": "id -un"}'
ws_add_action t.ns '{"risk": "L0", "command": "grep ^NSpid: /proc/self/status | wc -w"}'
chmod 0711 "$RX_TMP"   # the account's home is below it

rc=0
unshare --mount --propagation private --pid --fork --kill-child --mount-proc bash -s >"$OUT" 2>"$ERR" <<'SANDBOX' || rc=$?
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
poll() {  # poll SECONDS CMD...: until CMD succeeds
    local i
    for ((i = 0; i < $1 * 20; i++)); do "${@:2}" && return 0; sleep 0.05; done
    return 1
}
# /etc (and the mail spool) become private copies: nothing below reaches the real ones
mkdir -m 0755 "$RX_TMP/etc"
cp -a /etc/. "$RX_TMP/etc/"
mount --bind "$RX_TMP/etc" /etc
for d in /var/mail /var/spool/mail; do [[ -d $d && ! -L $d ]] && mount -t tmpfs -o mode=2775 tmpfs "$d"; done
home=$RX_TMP/home/rexec-e2e
mkdir -p "$RX_TMP/home"

echo "--- first run"
bash "$P" --user rexec-e2e --home "$home" --no-reload "$pub" | tee "$RX_TMP/run1"
getent passwd rexec-e2e >/dev/null || fail "the account was not created"
[[ $(getent passwd rexec-e2e | cut -d: -f7) == /bin/bash ]] || fail "shell"
[[ $(getent shadow rexec-e2e | cut -d: -f2) == '*' ]] || fail "password field"
[[ $(stat -c '%U %a' /etc/ssh/rexec/rexec-e2e.keys) == "root 644" ]] || fail "keys file owner/mode"
grep -q "^restrict ssh-ed25519 " /etc/ssh/rexec/rexec-e2e.keys || fail "keys file line"
[[ -f /etc/ssh/sshd_config.d/50-rexec-rexec-e2e.conf ]] || fail "no drop-in"
cp /etc/ssh/sshd_config.d/50-rexec-rexec-e2e.conf "$RX_TMP/dropin1"

echo "--- second run (idempotent)"
bash "$P" --user rexec-e2e --home "$home" --no-reload "$pub" | tee "$RX_TMP/run2"
grep -Eq '^  (created|wrote|changed) ' "$RX_TMP/run2" && fail "the second run changed something"
[[ $(grep -c '^  unchanged ' "$RX_TMP/run2") -ge 3 ]] || fail "the second run should say unchanged 3 times"
cmp -s "$RX_TMP/dropin1" /etc/ssh/sshd_config.d/50-rexec-rexec-e2e.conf || fail "drop-in rewritten"

# an sshd whose configuration includes the drop-ins, as a VM's would
ssh-keygen -q -t ed25519 -N '' -f "$RX_TMP/sb_hostkey"
cat >"$RX_TMP/sb_config" <<EOF
Include /etc/ssh/sshd_config.d/*.conf
Port $port
ListenAddress 127.0.0.1
HostKey $RX_TMP/sb_hostkey
PidFile $RX_TMP/sb.pid
UsePAM no
LogLevel VERBOSE
EOF
sshd=$(command -v sshd || echo /usr/sbin/sshd)
mkdir -p /run/sshd
"$sshd" -t -f "$RX_TMP/sb_config" || fail "sshd -t with the drop-in"
"$sshd" -T -f "$RX_TMP/sb_config" -C user=rexec-e2e,host=localhost,addr=127.0.0.1 >"$RX_TMP/sb_T"
for want in "maxsessions 32" "clientaliveinterval 15" "clientalivecountmax 3" "permittty no" \
            "disableforwarding yes" "authorizedkeysfile /etc/ssh/rexec/rexec-e2e.keys" \
            "authenticationmethods publickey" "setenv SHLVL=1"; do
    grep -qix "$want" "$RX_TMP/sb_T" || fail "sshd -T for the account lacks: $want"
done
"$sshd" -D -f "$RX_TMP/sb_config" -E "$RX_TMP/sb.log" </dev/null &
poll 10 test -s "$RX_TMP/sb.pid" || { cat "$RX_TMP/sb.log" >&2; fail "the sandbox sshd did not start"; }

echo "--- rexec through it"
"$REXEC_BIN" --workspace "$WS" run vm t.whoami >"$RX_TMP/whoami" || { cat "$RX_TMP/sb.log" >&2; fail "rexec run vm t.whoami"; }
cat "$RX_TMP/whoami"
"$REXEC_BIN" --workspace "$WS" check vm --json >"$RX_TMP/check.json" || fail "rexec check vm"
"$REXEC_BIN" --workspace "$WS" run vm t.ns --json >"$RX_TMP/ns.json" || fail "rexec run vm t.ns"
# exec works; a pty is refused (restrict, PermitTTY no)
vm_ssh() {
    ssh -F /dev/null -p "$port" -i "$WS/keys/id_ed25519" -o BatchMode=yes -o IdentitiesOnly=yes \
        -o IdentityAgent=none -o UserKnownHostsFile="$WS/known_hosts" -o StrictHostKeyChecking=yes \
        "$@" </dev/null
}
vm_ssh rexec-e2e@127.0.0.1 'echo exec-ok' >"$RX_TMP/ssh.out" 2>"$RX_TMP/ssh.err" || true
vm_ssh -tt rexec-e2e@127.0.0.1 'echo pty-ok' >"$RX_TMP/pty.out" 2>"$RX_TMP/pty.err" || true
kill "$(cat "$RX_TMP/sb.pid")"
SANDBOX
if [[ $rc -ne 0 ]]; then
    _rx_show "sandbox stdout" "$OUT"
    _rx_show "sandbox stderr" "$ERR"
    fail "the sandboxed provisioning failed (exit $rc)"
fi
assert_eq "$before" "$(snapshot)" "the sandboxed run changed the real /etc"
getent passwd rexec-e2e >/dev/null && fail "the account leaked out of the sandbox"

assert_eq "rexec-e2e" "$(cat "$RX_TMP/whoami")" "the action ran as the provisioned account"
predicted=$(sed -n 's/^  containment  \([a-z-]*\).*/\1/p' "$RX_TMP/run1")
[[ -n $predicted ]] || fail "provision.sh printed no containment"
"$RX_PYTHON" - "$RX_TMP/check.json" "$RX_TMP/ns.json" "$predicted" <<'PY' || fail "containment: check/run vs provision.sh"
import json, sys
check = json.loads(open(sys.argv[1]).readline())
run = json.loads(open(sys.argv[2]).readline())
assert check["ok"] is True, check
assert check["containment"] == sys.argv[3], (check["containment"], sys.argv[3])
assert run["containment"] == sys.argv[3], (run["containment"], sys.argv[3])
assert run["stdout"].strip() == ("3" if sys.argv[3] == "pid-namespace" else "2"), run["stdout"]
PY
assert_contains "$RX_TMP/ssh.out" "exec-ok"
assert_contains "$RX_TMP/pty.err" "PTY allocation request failed"
assert_not_contains "$RX_TMP/pty.out" "pty-ok"
pass
