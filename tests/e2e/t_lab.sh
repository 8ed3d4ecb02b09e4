#!/usr/bin/env bash
# The lab itself: sshd instances up, the workspace's key and known_hosts work, drop kills a
# connection (and only that host's), a taken port is refused, down leaves nothing behind.
# Run directly: REXEC_SRC=/path/to/src bash tests/e2e/t_lab.sh   (REXEC_BIN is not needed)
# shellcheck disable=SC2016,SC2317 # remote commands in single quotes; helpers run via wait_until
tid="lab: up, login, drop, down"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

command -v sshd >/dev/null 2>&1 || [[ -x /usr/sbin/sshd ]] || skip "sshd is not installed"

lab_start 2
p1=$(lab_port lab1)
p2=$(lab_port lab2)
assert_eq "$((p1 + 1))" "$p2" "port of lab2"

# --- both sshd are up
assert_exit 0 lab status
assert_contains "$OUT" "lab1   up    127.0.0.1:$p1"
assert_contains "$OUT" "lab2   up    127.0.0.1:$p2"

# --- the workspace
assert_eq 700 "$(stat -c %a "$WS")" "mode of the workspace"
assert_eq 700 "$(stat -c %a "$WS/keys")" "mode of keys/"
assert_eq 600 "$(stat -c %a "$WS/keys/id_ed25519")" "mode of the client key"
assert_eq 600 "$(stat -c %a "$WS/known_hosts")" "mode of known_hosts"
assert_eq 600 "$(stat -c %a "$WS/secrets/demo_token")" "mode of the demo token"
assert_eq 32 "$(wc -c <"$WS/secrets/demo_token")" "length of the demo token"
assert_eq 2 "$(grep -c "^\[127\.0\.0\.1\]:$p1 ssh-ed25519 \|^\[127\.0\.0\.1\]:$p2 ssh-ed25519 " "$WS/known_hosts")" \
    "known_hosts lines"
assert_eq "$p1" "$(ws_get 'c["hosts"]["lab1"]["port"]')" "rexec.json port of lab1"
assert_eq "$LAB_USER" "$(ws_get 'c["hosts"]["lab2"]["user"]')" "rexec.json user of lab2"
assert_eq '["lab1", "lab2"]' "$(ws_get 'c["groups"]["lab"]')" "rexec.json group lab"
assert_eq L2 "$(ws_get 'c["actions"]["svc.restart"]["risk"]')" "rexec.json svc.restart"
assert_exit 0 lab env
assert_contains "$OUT" "export REXEC_WORKSPACE=$WS"

# --- the key and the pinned host keys work, strictly, on each host; SHLVL comes from SetEnv
for h in lab1 lab2; do
    assert_exit 0 lab_ssh "$h" 'echo ok; echo "shlvl=$SHLVL"'
    assert_eq ok "$(head -n 1 "$OUT")" "ssh to $h"
    [[ $(sed -n 2p "$OUT") =~ ^shlvl=[12]$ ]] || fail "SHLVL on $h is not from SetEnv: $(sed -n 2p "$OUT")"
done
# a host key that is not the pinned one is refused: lab2's key under lab1's name
grep "^\[127\.0\.0\.1\]:$p2 " "$WS/known_hosts" | sed "s/^\[127\.0\.0\.1\]:$p2 /[127.0.0.1]:$p1 /" \
    >"$RX_TMP/wrong_known_hosts"
assert_exit 255 lab_ssh lab1 -o UserKnownHostsFile="$RX_TMP/wrong_known_hosts" true
assert_contains "$ERR" "HOST IDENTIFICATION HAS CHANGED"

# --- a taken port is refused clearly, with exit 4
assert_exit 4 "$RX_LAB" up --dir "$RX_TMP/other" --hosts 1 --base-port "$p2" --no-check
assert_contains "$ERR" "port $p2 (for lab1) is already in use"
"$RX_LAB" down --purge --dir "$RX_TMP/other" >/dev/null

# --- --vm-tmp D: the hosts' sessions get TMPDIR=D (sshd SetEnv), made 1777, and a relative or
# odd path is refused before anything starts
assert_exit 2 "$RX_LAB" up --dir "$RX_TMP/vt" --hosts 1 --base-port "$p2" --no-check --vm-tmp rel/dir
assert_contains "$ERR" "--vm-tmp must be an absolute path"
[[ ! -e $RX_TMP/vt ]] || fail "a refused --vm-tmp made the lab directory"
at_exit '"$RX_LAB" down --purge --dir "$RX_TMP/vt" >/dev/null 2>&1' # also when an assert fails
rx_lab_up_free "$RX_LAB" "$RX_TMP/vt" 1 "$RX_TMP/vt.out" --vm-tmp "$RX_TMP/vmtmp" \
    || { cat "$RX_TMP/vt.out" >&2; fail "lab up --vm-tmp"; }
vt_port=$base
assert_eq 1777 "$(stat -c %a "$RX_TMP/vmtmp")" "mode of a --vm-tmp the lab made"
ssh -i "$RX_TMP/vt/workspace/keys/id_ed25519" -o UserKnownHostsFile="$RX_TMP/vt/workspace/known_hosts" \
    -o StrictHostKeyChecking=yes -o BatchMode=yes -p "$vt_port" "$LAB_USER@127.0.0.1" 'echo "tmp=$TMPDIR"' \
    >"$OUT" 2>"$ERR" || { cat "$ERR" >&2; fail "ssh to the --vm-tmp lab"; }
assert_eq "tmp=$RX_TMP/vmtmp" "$(cat "$OUT")" "TMPDIR of a --vm-tmp lab's session"
"$RX_LAB" down --purge --dir "$RX_TMP/vt" >/dev/null

# --- drop lab1: its established connection dies, lab2's survives, the listener stays up
lab_ssh lab1 'exec sleep 30' >"$RX_TMP/c1.out" 2>&1 &
c1=$!
lab_ssh lab2 'exec sleep 31' >"$RX_TMP/c2.out" 2>&1 &
c2=$!
conns_at_least() { (( $(established_conns "$1") >= $2 )); }
conns_at_most() { (( $(established_conns "$1") <= $2 )); }
wait_until 10 conns_at_least "$p1" 1
wait_until 10 conns_at_least "$p2" 1
wait_until 10 remote_pgrep '^sleep 30$' >/dev/null
wait_until 10 remote_pgrep '^sleep 31$' >/dev/null

assert_exit 0 lab drop lab1
assert_contains "$OUT" "killed 1 connection(s) to lab1"
exited() { ! kill -0 "$1" 2>/dev/null; }
wait_until 10 exited "$c1"
rc=0; wait "$c1" || rc=$?
assert_eq 255 "$rc" "exit status of the ssh client whose connection was dropped"
wait_until 10 conns_at_most "$p1" 0
kill -0 "$c2" 2>/dev/null || fail "lab2's connection died with lab1's"
assert_eq 1 "$(established_conns "$p2")" "connections to lab2 after dropping lab1"
assert_exit 0 lab status
assert_exit 0 lab_ssh lab1 echo again
assert_eq again "$(cat "$OUT")" "ssh to lab1 after drop"
# drop kills sshd only, as a lost connection would: the remote command lives on (lab down ends it)
remote_pgrep '^sleep 30$' >/dev/null || fail "the remote command of the dropped connection is gone"

assert_exit 0 lab drop 2
wait_until 10 exited "$c2"
rc=0; wait "$c2" || rc=$?
assert_eq 255 "$rc" "exit status of the ssh client of lab2"
assert_exit 0 lab drop lab2
assert_contains "$OUT" "no connections to lab2"

# --- down: nothing listens, no sshd and no process started through the lab remains
listeners=$(ps -eo pid=,args= | awk -v d="$LAB_DIR/hosts/" '$2 ~ /sshd/ && index($0, d) { print $1 }')
[[ -n $listeners ]] || fail "cannot find the lab's sshd processes"
assert_exit 0 lab down
assert_contains "$OUT" "stopped 2 sshd"
for p in "$p1" "$p2"; do
    assert_eq "" "$(ss -Htln "( sport = :$p )")" "listeners on port $p after down"
done
left=$(ps -eo pid=,args= | awk -v d="$LAB_DIR/hosts/" '$2 ~ /sshd/ && index($0, d) { print $1 }')
assert_eq "" "$left" "sshd processes of the lab after down"
if lab ps >"$OUT"; then _rx_show "lab ps" "$OUT"; fail "processes started through the lab survived down"; fi
assert_exit 3 lab status
assert_contains "$OUT" "lab1   down"
[[ ! -e $LAB_DIR/hosts/lab1/sshd.pid ]] || fail "pidfile left after down"

# --- up again in the same directory: same client key and host keys, fresh workspace files
key_before=$(cat "$WS/keys/id_ed25519.pub")
kh_before=$(cut -d' ' -f2- "$WS/known_hosts")
assert_exit 0 lab up --hosts 2 --base-port "$LAB_BASE_PORT"
assert_eq "$key_before" "$(cat "$WS/keys/id_ed25519.pub")" "client key after up/down/up"
assert_eq "$kh_before" "$(cut -d' ' -f2- "$WS/known_hosts")" "host keys after up/down/up"
assert_exit 1 lab up --hosts 2 --base-port "$LAB_BASE_PORT"
assert_contains "$ERR" "already up"

# --- down --purge removes the directory
assert_exit 0 lab down --purge
[[ ! -e $LAB_DIR ]] || fail "$LAB_DIR still exists after down --purge"

pass
