#!/usr/bin/env bash
# Host unavailable is 255 and says nothing about the command: a closed port, a host key that
# does not match (and then nothing runs), a key the server does not accept.
tid="run: host unavailable"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
p1=$(lab_port lab1)
p2=$(lab_port lab2)
marker=$RX_TMP/ran
ws_add_action t.touch '{"risk": "L0", "command": "touch {path}", "params": {"path": {"type": "path"}}}'

# A closed port on loopback: find one nobody listens on.
closed=$("$RX_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
ws_edit 'c["hosts"]["closed"] = dict(c["hosts"]["lab1"], port=int(args[0]))' "$closed"
assert_exit 255 rx run closed t.touch --param "path=$marker"
assert_contains "$ERR" "closed"
assert_contains "$ERR" "refused"
[[ ! -e $marker ]] || fail "something ran on a closed port"

# Host key mismatch: known_hosts pins lab2's key for lab1's address.
cp "$WS/known_hosts" "$RX_TMP/known_hosts.good"
key2=$(grep "^\[127.0.0.1\]:$p2 " "$WS/known_hosts" | cut -d' ' -f2-)
grep -v "^\[127.0.0.1\]:$p1 " "$RX_TMP/known_hosts.good" >"$WS/known_hosts"
echo "[127.0.0.1]:$p1 $key2" >>"$WS/known_hosts"
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "HOST KEY MISMATCH"
[[ ! -e $marker ]] || fail "the command ran despite a host key mismatch"

# strict and not in known_hosts at all
grep -v "^\[127.0.0.1\]:$p1 " "$RX_TMP/known_hosts.good" >"$WS/known_hosts"
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "is not in"
[[ ! -e $marker ]] || fail "the command ran on an unknown host key"

# accept-new: trusts on first use and pins it, so the next run checks against it.
ws_edit 'c["hosts"]["lab1"]["host_key"] = "accept-new"'
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
[[ -e $marker ]] || fail "accept-new did not run"
grep -q "^\[127.0.0.1\]:$p1 ssh-ed25519 " "$WS/known_hosts" || fail "accept-new did not pin the key"
rm -f "$marker"

# accept-new where the key cannot be recorded (known_hosts a dangling symbolic link, which
# rexec never follows): refused before authentication, saying why; nothing runs.
cp "$WS/known_hosts" "$RX_TMP/known_hosts.pinned"
rm "$WS/known_hosts"
ln -s "$RX_TMP/nowhere" "$WS/known_hosts"
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "cannot record the new host key SHA256:"
assert_contains "$ERR" "in $WS/known_hosts: it is a symbolic link"
[[ ! -e $marker && ! -e $RX_TMP/nowhere ]] || fail "accept-new ran (or wrote through the link) without recording the key"
rm "$WS/known_hosts"
cp "$RX_TMP/known_hosts.pinned" "$WS/known_hosts"

# A pinned fingerprint that is not the server's.
fp2=$(ssh-keygen -lf <(echo "$key2") | awk '{print $2}')
ws_edit 'c["hosts"]["lab1"]["host_key"] = args[0]' "$fp2"
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "HOST KEY MISMATCH"
[[ ! -e $marker ]] || fail "the command ran despite a pinned fingerprint mismatch"
fp1=$(ssh-keygen -lf <(grep "^\[127.0.0.1\]:$p1 " "$RX_TMP/known_hosts.good" | cut -d' ' -f2-) | awk '{print $2}')
ws_edit 'c["hosts"]["lab1"]["host_key"] = args[0]' "$fp1"
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
[[ -e $marker ]] || fail "the right pinned fingerprint did not run"

# A key the server does not know.
ssh-keygen -q -t ed25519 -N '' -f "$WS/keys/other" >/dev/null
ws_edit 'c["hosts"]["lab2"]["key"] = "keys/other"'
assert_exit 255 rx run lab2 t.touch --param "path=$marker.2"
assert_contains "$ERR" "authentication"
[[ ! -e $marker.2 ]] || fail "ran without authentication"
pass
