#!/usr/bin/env bash
# Packets dropped mid-command (issue #12, "What to deliver" 2): the VM is an sshd inside a network
# namespace made here (V), rexec runs in a second one (C), joined by a veth pair whose addresses
# exist only inside the two namespaces (10.253.N.0/30); both are removed on exit. Mid-command the
# link goes down (`ip link set down` on C's end): no packet passes either way, no RST, no FIN.
# The call must end 255 (connection lost) within the keepalive bound (RX_KEEPALIVE_COUNT + 1
# intervals after the last bytes, docs/architecture.md "Keepalive"), the audit has an outcome for
# the intent and verifies, and once the link is back the VM keeps no process of the call.
# Then the link is up again and a new call on the same host succeeds (nothing stuck).
tid="faults: packets dropped mid-command (a veth between two network namespaces goes down)"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
. "$REXEC_SRC/tests/faults/lib_faults.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (CAP_NET_ADMIN) for network namespaces"
command -v ip >/dev/null || skip "ip (iproute2) is not installed"
lab_start 1
sfx=$$
NC=rxfC$sfx NV=rxfV$sfx
net=$(( sfx % 250 ))
CA=10.253.$net.1 VA=10.253.$net.2
SSHD_PID=""
netns_cleanup() {
    [[ -z $SSHD_PID ]] || kill -KILL "$SSHD_PID" 2>/dev/null || true
    ip netns del "$NC" 2>/dev/null || true
    ip netns del "$NV" 2>/dev/null || true
}
trap '_rc=$?; set +e; _f_stop_serves; netns_cleanup; (exit "$_rc"); _rx_cleanup' EXIT
if ! ip netns add "$NC" 2>"$RX_TMP/netns.err"; then
    skip "network namespaces not permitted here (no CAP_NET_ADMIN?): $(head -n1 "$RX_TMP/netns.err")"
fi
ip netns add "$NV"
ip -n "$NC" link add "rxfc$sfx" type veth peer name "rxfv$sfx" netns "$NV"
ip -n "$NC" addr add "$CA/30" dev "rxfc$sfx"; ip -n "$NC" link set "rxfc$sfx" up
ip -n "$NV" addr add "$VA/30" dev "rxfv$sfx"; ip -n "$NV" link set "rxfv$sfx" up
ip -n "$NC" link set lo up; ip -n "$NV" link set lo up

# The VM: lab1's sshd configuration (its host key, keys, SetEnv lab id, so `lab ps` sees what it
# starts), listening on V's address only.
HD=$LAB_DIR/hosts/lab1
sed -e "s/^ListenAddress .*/ListenAddress $VA/" -e 's/^Port .*/Port 22/' \
    -e "s|^PidFile .*|PidFile $RX_TMP/v.pid|" "$HD/sshd_config" >"$RX_TMP/v.conf"
: >"$RX_TMP/v.log"
ip netns exec "$NV" setsid /usr/sbin/sshd -D -f "$RX_TMP/v.conf" -E "$RX_TMP/v.log" \
    </dev/null >/dev/null 2>&1 &
SSHD_PID=$!
wait_until 10 test -s "$RX_TMP/v.pid"

read -r _ key _ <"$HD/ssh_host_ed25519_key.pub"
printf '%s ssh-ed25519 %s\n' "$VA" "$key" >>"$WS/known_hosts"
KA=2
ws_edit '
c["hosts"]["vm"] = dict(c["hosts"]["lab1"], address=args[0], port=22)
c["scope"]["cidrs"].append(args[0] + "/32")
c["limits"].update({"keepalive_s": int(args[1]), "connect_timeout_s": 5})' "$VA" "$KA"
MARK=$RX_TMP/started
ws_edit 'c["actions"]["t.hold"] = {"risk": "L0", "command": "touch " + args[0] + "; exec sleep 3142"}' "$MARK"
ws_add_action t.quick '{"risk": "L0", "command": "echo quick"}'
rxn() { timeout 60 ip netns exec "$NC" "$REXEC_BIN" --workspace "$WS" "$@"; }
now_ms() { echo $(( ${EPOCHREALTIME/[.,]/} / 1000 )); }

assert_exit 0 rxn run vm t.quick               # the path works
assert_contains "$OUT" quick

rxn run vm t.hold --json >"$RX_TMP/h.out" 2>"$RX_TMP/h.err" & H=$!
wait_until 30 test -e "$MARK"
ip -n "$NC" link set "rxfc$sfx" down
t0=$(now_ms)
rc=0; wait "$H" || rc=$?
t=$(( $(now_ms) - t0 ))
echo "the call ended $t ms after the link went down: $(head -c 600 "$RX_TMP/h.out")"
assert_eq 255 "$rc" "exit status of a call whose packets are dropped"
assert_contains "$RX_TMP/h.out" '"exit_status":255'
assert_contains "$RX_TMP/h.out" '"executed":true'
# the keepalive's verdict (3-4 intervals) or TCP_USER_TIMEOUT (3 intervals), + 3 s of slack for a
# loaded machine; and not before two intervals (the peer was healthy until the link went down)
(( t <= (3 + 1) * KA * 1000 + 3000 )) || fail "the dropped link was found after $t ms"
(( t >= 2 * KA * 1000 )) || fail "the connection was declared dead after only $t ms"
grep -qE '"error":"[^"]*(keepalive|connection)' "$RX_TMP/h.out" || fail "no connection-lost class in: $(cat "$RX_TMP/h.out")"

ip -n "$NC" link set "rxfc$sfx" up
# sshd's ClientAlive probe now meets C's kernel, which knows no such connection (RST): the session
# ends and the command with it.
assert_vm_clean 'sleep 3142'
assert_exit 0 rxn run vm t.quick                # and the host works again
assert_audit_whole
pass
