#!/usr/bin/env bash
# A proxy_jump tunnel is torn down in the right order (src/ssh/jump.c, jump_free): its poll
# handle is stopped and closed first, its end of the socketpair closed in the close callback.
# Closed the other way round, libuv's epoll_ctl(EPOLL_CTL_DEL) met a closed descriptor (EBADF,
# or worse, a number another socket had taken meanwhile). Checked with strace on a call through
# a bastion on 127.0.0.1 (an sshd of this test's own, forwarding allowed) to lab1: no epoll_ctl
# fails with EBADF, and the call's output arrives.
tid="jump: the tunnel's poll is closed before its descriptor"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

command -v strace >/dev/null || skip "strace not installed"
[[ -x /usr/sbin/sshd ]] || skip "no /usr/sbin/sshd"
lab_start 1
port=$("$RX_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ssh-keygen -q -t ed25519 -N '' -f "$RX_TMP/bastion_hostkey" </dev/null
cat >"$RX_TMP/bastion.conf" <<CFG
ListenAddress 127.0.0.1
Port $port
HostKey $RX_TMP/bastion_hostkey
PidFile $RX_TMP/bastion.pid
AuthorizedKeysFile $LAB_DIR/authorized_keys
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
LogLevel VERBOSE
CFG
setsid /usr/sbin/sshd -D -f "$RX_TMP/bastion.conf" -E "$RX_TMP/bastion.log" </dev/null >/dev/null 2>&1 &
BASTION=$!
trap '_t_rc=$?; kill "$BASTION" 2>/dev/null; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT
wait_until 10 test -s "$RX_TMP/bastion.pid"

read -r _ kb _ <"$RX_TMP/bastion_hostkey.pub"
printf '[127.0.0.1]:%s ssh-ed25519 %s\n' "$port" "$kb" >>"$WS/known_hosts"
ws_edit '
l1 = c["hosts"]["lab1"]
c["hosts"]["bastion"] = dict(l1, port=int(args[0]))
c["hosts"]["inner"] = dict(l1, proxy_jump="bastion")
c.pop("groups", None)' "$port"
ws_add_action t.hi '{"risk": "L0", "command": "echo hi from $SSH_CONNECTION"}'

# LeakSanitizer cannot run under ptrace (the test build has ASan): leaks are checked elsewhere
assert_exit 0 env ASAN_OPTIONS=detect_leaks=0 timeout 120 strace -f -qq -e trace=epoll_ctl,close -o "$RX_TMP/trace" \
    "$REXEC_BIN" --workspace "$WS" run inner t.hi
assert_contains "$OUT" "hi from 127.0.0.1 "
grep -q "Accepted publickey" "$RX_TMP/bastion.log" || fail "the call did not go through the bastion"
grep -q "EPOLL_CTL_DEL" "$RX_TMP/trace" || fail "strace saw no epoll_ctl: the check proves nothing"
if grep -E 'epoll_ctl\(.*= -1 EBADF' "$RX_TMP/trace" >&2; then
    fail "epoll_ctl on a closed descriptor (above)"
fi
pass
