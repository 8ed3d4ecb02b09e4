#!/usr/bin/env bash
# known_hosts markers, which libssh2 does not read: a server key marked @revoked is refused
# before authentication (exit 255, the file and line named, nothing runs, sshd sees no login
# attempt); a host whose only match is a @cert-authority line is reported as unsupported.
tid="interop: known_hosts @revoked and @cert-authority"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
p1=$(lab_port lab1)
marker=$RX_TMP/ran
ws_add_action t.touch '{"risk": "L0", "command": "touch {path}", "params": {"path": {"type": "path"}}}'
read -r _ key _ <"$LAB_DIR/hosts/lab1/ssh_host_ed25519_key.pub"
cp "$WS/known_hosts" "$RX_TMP/kh.good"
fp=$(ssh-keygen -lf "$LAB_DIR/hosts/lab1/ssh_host_ed25519_key.pub" | awk '{print $2}')

# @revoked for the server's own key, with a wildcard pattern, after the plain line that pins it
# (which alone would accept it): refused, line 3 named.
{ cat "$RX_TMP/kh.good"; echo "# revoked below"; echo "@revoked * ssh-ed25519 $key"; } >"$WS/known_hosts"
logins_before=$(grep -c "Accepted publickey" "$(lab_log lab1)" || true)
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "REVOKED HOST KEY: $fp of 127.0.0.1 port $p1 is marked @revoked in $WS/known_hosts line 3; refusing to connect"
[[ ! -e $marker ]] || fail "ran on a revoked host key"
assert_eq "$logins_before" "$(grep -c "Accepted publickey" "$(lab_log lab1)" || true)" "logins after a revoked key"
# OpenSSH agrees that it is revoked (the test's reference).
assert_exit 255 lab_ssh lab1 -o LogLevel=INFO true
grep -qi "revoked" "$ERR" || fail "ssh does not see the key as revoked: $(cat "$ERR")"

# Also with a hashed host name (as ssh-keygen -H hashes names: HMAC-SHA1 keyed by a salt), and
# with accept-new.
hashed=$("$RX_PYTHON" -c 'import base64, hmac, hashlib, os, sys
salt = os.urandom(20); h = hmac.new(salt, sys.argv[1].encode(), hashlib.sha1).digest()
print("|1|%s|%s" % (base64.b64encode(salt).decode(), base64.b64encode(h).decode()))' "[127.0.0.1]:$p1")
printf '@revoked %s ssh-ed25519 %s\n' "$hashed" "$key" >"$RX_TMP/rev"
{ cat "$RX_TMP/kh.good"; cat "$RX_TMP/rev"; } >"$WS/known_hosts"
ws_edit 'c["hosts"]["lab1"]["host_key"] = "accept-new"'
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "is marked @revoked in $WS/known_hosts line 2"
[[ ! -e $marker ]] || fail "ran on a revoked (hashed) host key"

# A @revoked line for another key, or excluded by a negated pattern, does not stop the host.
other=$(ssh-keygen -q -t ed25519 -N '' -f "$RX_TMP/o" </dev/null >/dev/null; cut -d' ' -f2 "$RX_TMP/o.pub")
{ echo "@revoked * ssh-ed25519 $other"; echo "@revoked *,![127.0.0.1]:$p1 ssh-ed25519 $key"; cat "$RX_TMP/kh.good"; } >"$WS/known_hosts"
ws_edit 'c["hosts"]["lab1"]["host_key"] = "strict"'
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
[[ -e $marker ]] || fail "a revocation of other keys stopped the host"
rm -f "$marker"

# The only match is a @cert-authority line: unsupported, said so, line named.
{ echo "@cert-authority [127.0.0.1]:* ssh-ed25519 $other"; } >"$WS/known_hosts"
assert_exit 255 rx run lab1 t.touch --param "path=$marker"
assert_contains "$ERR" "the only match in $WS/known_hosts is the @cert-authority line 1, and host certificates are not supported by rexec"
[[ ! -e $marker ]] || fail "ran on a @cert-authority line"
# With the host's own key pinned as well, the plain line decides.
cat "$RX_TMP/kh.good" >>"$WS/known_hosts"
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
[[ -e $marker ]] || fail "a @cert-authority line stopped a pinned host"
rm -f "$marker"

# Lines libssh2 cannot parse (an unknown key type) no longer make the whole file unreadable.
{ echo "[127.0.0.1]:$p1 sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t"; cat "$RX_TMP/kh.good"; } >"$WS/known_hosts"
assert_exit 0 rx run lab1 t.touch --param "path=$marker"
[[ -e $marker ]] || fail "an unparsable line broke known_hosts"
pass
