#!/usr/bin/env bash
# proxy_jump through a real bastion: two network namespaces made here. The bastion's sshd runs in
# A (a veth to the host, a veth to B); the target's sshd runs in B, which the host has no route
# to (A does not forward). The call succeeds only through a direct-tcpip channel of the bastion
# connection: B's sshd sees the login come from A's address. Both host keys are verified, the
# bastion connection is shared by the hosts behind it, and each failure shows its message.
# Only addresses inside these namespaces are used; they are removed at the end.
tid="interop: proxy_jump through a bastion in a network namespace"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root for network namespaces"
command -v ip >/dev/null || skip "ip (iproute2) not installed"
lab_start 1
sfx=$$
NA=rxjA$sfx NB=rxjB$sfx
net=$(( (sfx % 200) + 20 ))
HA=10.254.$net.1 AA=10.254.$net.2 AB=10.254.$((net + 1)).1 BB=10.254.$((net + 1)).2
pids=()
netns_cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    ip netns del "$NA" 2>/dev/null || true
    ip netns del "$NB" 2>/dev/null || true
}
trap '_rc=$?; set +e; netns_cleanup; (exit "$_rc"); _rx_cleanup' EXIT
if ! ip netns add "$NA" 2>"$RX_TMP/netns.err"; then
    skip "network namespaces not permitted here: $(head -n1 "$RX_TMP/netns.err")"
fi
ip netns add "$NB"
ip link add "rxh$sfx" type veth peer name "rxa$sfx" netns "$NA"
ip -n "$NA" link add "rxab$sfx" type veth peer name "rxb$sfx" netns "$NB"
ip addr add "$HA/30" dev "rxh$sfx"; ip link set "rxh$sfx" up
ip -n "$NA" addr add "$AA/30" dev "rxa$sfx"; ip -n "$NA" link set "rxa$sfx" up
ip -n "$NA" addr add "$AB/30" dev "rxab$sfx"; ip -n "$NA" link set "rxab$sfx" up
ip -n "$NB" addr add "$BB/30" dev "rxb$sfx"; ip -n "$NB" link set "rxb$sfx" up
ip -n "$NA" link set lo up; ip -n "$NB" link set lo up
ip netns exec "$NA" sysctl -qw net.ipv4.ip_forward=0

# sshd_config for a namespace's sshd (the lab's keys and authorized_keys).
sshd_conf() {  # NAME LISTEN FORWARDING
    ssh-keygen -q -t ed25519 -N '' -f "$RX_TMP/$1_hostkey" </dev/null
    cat >"$RX_TMP/$1.conf" <<CFG
ListenAddress $2
Port 22
HostKey $RX_TMP/$1_hostkey
PidFile $RX_TMP/$1.pid
AuthorizedKeysFile $LAB_DIR/authorized_keys
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowTcpForwarding $3
MaxSessions 64
LogLevel VERBOSE
CFG
}
start_sshd() {  # NETNS NAME
    rm -f "$RX_TMP/$2.pid"
    : >"$RX_TMP/$2.log"
    ip netns exec "$1" setsid /usr/sbin/sshd -D -f "$RX_TMP/$2.conf" -E "$RX_TMP/$2.log" </dev/null >/dev/null 2>&1 &
    pids+=($!)
    wait_until 10 test -s "$RX_TMP/$2.pid"
}
sshd_conf a "$AA" yes
sshd_conf b "$BB" no
start_sshd "$NA" a
start_sshd "$NB" b
ip route get "$BB" 2>/dev/null | grep -q "rxh$sfx" && fail "the host has a route to B through A: the test would prove nothing"

read -r _ ka _ <"$RX_TMP/a_hostkey.pub"
read -r _ kb _ <"$RX_TMP/b_hostkey.pub"
printf '%s ssh-ed25519 %s\n%s ssh-ed25519 %s\n' "$AA" "$ka" "$BB" "$kb" >"$WS/known_hosts"
ws_edit '
base = {"user": args[2], "key": "keys/id_ed25519", "host_key": "strict"}
c["hosts"] = {"bastion": dict(base, address=args[0]),
              "inner": dict(base, address=args[1], proxy_jump="bastion"),
              "inner2": dict(base, address=args[1], proxy_jump="bastion")}
c.pop("groups", None)
c["limits"]["connect_timeout_s"] = 10' "$AA" "$BB" "$LAB_USER"
ws_add_action t.hi '{"risk": "L0", "command": "echo hi from $SSH_CONNECTION"}'

# Through the jump: B's sshd sees the connection come from A's address on the A-B link.
assert_exit 0 rx run inner t.hi
assert_contains "$OUT" "hi from $AB "
assert_contains "$RX_TMP/b.log" "Accepted publickey for $LAB_USER from $AB"

# Two hosts behind the bastion in one run share one bastion connection (one login on A).
before=$(grep -c "Accepted publickey" "$RX_TMP/a.log")
assert_exit 0 rx run inner,inner2 t.hi
assert_eq 2 "$(grep -c "hi from $AB " "$OUT")" "answers through the jump"
assert_eq $((before + 1)) "$(grep -c "Accepted publickey" "$RX_TMP/a.log")" "bastion logins for two targets"

# Both host keys are verified: the target's key unknown, then the bastion's wrong.
printf '%s ssh-ed25519 %s\n' "$AA" "$ka" >"$WS/known_hosts"
assert_exit 255 rx run inner t.hi
assert_contains "$ERR" "inner: host key"
assert_contains "$ERR" "of $BB port 22 is not in $WS/known_hosts"
printf '%s ssh-ed25519 %s\n%s ssh-ed25519 %s\n' "$AA" "$kb" "$BB" "$kb" >"$WS/known_hosts"
assert_exit 255 rx run inner t.hi
assert_contains "$ERR" "inner: through proxy_jump bastion: bastion: HOST KEY MISMATCH for $AA port 22"
printf '%s ssh-ed25519 %s\n%s ssh-ed25519 %s\n' "$AA" "$ka" "$BB" "$kb" >"$WS/known_hosts"

# A bastion that refuses forwarding: the direct-tcpip refusal is the message.
sed -i 's/^AllowTcpForwarding yes/AllowTcpForwarding no/' "$RX_TMP/a.conf"
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true
start_sshd "$NA" a
assert_exit 255 rx run inner t.hi
assert_contains "$ERR" "the bastion bastion could not open a direct-tcpip channel to $BB port 22 (proxy_jump)"

# The bastion is down: said so, through the jump.
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
assert_exit 255 rx run inner t.hi
assert_contains "$ERR" "inner: through proxy_jump bastion: bastion: cannot connect to $AA port 22"

# Chains: at most 4 hops, no loops (checked at load).
ws_edit 'c["hosts"]["bastion"]["proxy_jump"] = "inner"'
assert_exit 78 rx hosts
assert_contains "$ERR" "proxy_jump: the chain of jumps comes back to"
ws_edit '
del c["hosts"]["bastion"]["proxy_jump"]
for i in range(1, 6):
    c["hosts"]["j%d" % i] = dict(c["hosts"]["bastion"], proxy_jump=("j%d" % (i - 1)) if i > 1 else "bastion")'
assert_exit 78 rx hosts
assert_contains "$ERR" "hosts.j5.proxy_jump: more than 4 jumps to reach j5"
pass
