#!/usr/bin/env bash
# The operators' web page (`rexec approvals web`, docs/gate.md "A web page over ssh -L"), as an
# operator uses it: the page runs as the approver user on a 0600 Unix socket, the operator reaches
# it through `ssh -L` (an sshd of the controller's own, logging in as the approver), and a headless
# Chromium driven through the DevTools protocol (tests/e2e/cdp.py) sees two held calls appear live,
# approves one with a comment (it runs) and denies the other with a reason (its caller gets 77).
# Then the page's refusals over its Unix socket: a foreign Host or Origin, a POST without a CSRF
# token, a replayed token, a decision on a challenge already decided; and its headers (CSP,
# X-Frame-Options, the cookie's HttpOnly and SameSite=Strict). Another user cannot open its socket.
# REXEC_WEB_SCREENSHOT=FILE also saves a screenshot of the page with one pending challenge.
# shellcheck disable=SC2016,SC2317 # JavaScript in single quotes; helpers run via poll_until
tid="approvals web: approve and deny in a browser over ssh -L"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
command -v chromium >/dev/null 2>&1 || skip "needs chromium (scripts/setup installs it)"
command -v sshd >/dev/null 2>&1 || command -v /usr/sbin/sshd >/dev/null 2>&1 || skip "needs sshd"
# shellcheck source=tests/e2e/approver_lib.sh
. "$REXEC_SRC/tests/e2e/approver_lib.sh"

approver_setup
# beta is a deployment that hands over a secret: the page names it and never shows its value
ws_add_action web.deploy '{"risk": "L2", "state_changing": true, "secrets": ["DEMO_TOKEN"],
  "params": {"unit": {"type": "string", "pattern": "^[a-z]+$"}},
  "command": "deploy --token \"$DEMO_TOKEN\" --unit {unit}"}'
# a note whose text is anything: what the page shows of it must be what runs, visibly
ws_add_action t.note '{"risk": "L2", "state_changing": true, "params": {"unit": {"type": "string"}},
  "command": "echo {unit}"}'
serve_reload
TOKEN=$(cat "$WS/secrets/demo_token")

# ---- the page, as the approver, on a socket only it can open ------------------------------------
WEBDIR=$RX_TMP/web
mkdir -m 0711 "$WEBDIR"
chown "$APPROVER" "$WEBDIR"
WEBSOCK=$WEBDIR/web.sock
# setpriv itself in the background (not a function's subshell), so $! is the page's pid
setpriv --reuid="$APPROVER" --regid="$APPROVER" --init-groups env HOME=/ \
    "$REXEC_BIN" approvals web --listen "unix:$WEBSOCK" --socket "$SOCK" >/dev/null 2>"$RX_TMP/web.err" &
EXTRA_PIDS+=($!)
poll_until 30 test -S "$WEBSOCK" || { _rx_show "web's stderr" "$RX_TMP/web.err"; fail "no web socket"; }
assert_eq "600 $APPROVER" "$(stat -c '%a %U' "$WEBSOCK")" "the page's socket"
# a second page on the same socket, or on anything but a Unix socket, is refused (64)
assert_exit 64 as_approver "$REXEC_BIN" approvals web --listen "unix:$WEBSOCK" --socket "$SOCK"
assert_contains "$ERR" "already listens"
assert_exit 64 as_approver "$REXEC_BIN" approvals web --listen 127.0.0.1:8080 --socket "$SOCK"
assert_contains "$ERR" "unix:PATH"
RC=0
setpriv --reuid=nobody --regid=nogroup --clear-groups "$RX_PYTHON" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])' "$WEBSOCK" 2>"$ERR" || RC=$?
[[ $RC != 0 ]] || fail "another user could open the page's socket"
assert_contains "$ERR" "Permission denied"

# ---- the controller's sshd: the approver logs in with a key and forwards to the socket ---------
CTL=$RX_TMP/ctl
mkdir -m 0755 "$CTL"
cp "$WS/keys/id_ed25519.pub" "$CTL/authorized_keys"
chmod 0644 "$CTL/authorized_keys"
CTL_PORT=$(_rx_free_block 1)
sed -e "s|^Port .*|Port $CTL_PORT|" -e "s|^PidFile .*|PidFile $CTL/sshd.pid|" \
    -e "s|^AuthorizedKeysFile .*|AuthorizedKeysFile $CTL/authorized_keys|" \
    -e "s|^AllowUsers .*|AllowUsers $APPROVER|" \
    -e "s|^AllowStreamLocalForwarding .*|AllowStreamLocalForwarding local|" \
    -e "s|^AllowTcpForwarding .*|AllowTcpForwarding local|" \
    "$LAB_DIR/hosts/lab1/sshd_config" >"$CTL/sshd_config"
chmod 0600 "$CTL/sshd_config"
SSHD=$(command -v sshd || echo /usr/sbin/sshd)
(cd / && exec setsid "$SSHD" -D -f "$CTL/sshd_config" -E "$CTL/sshd.log") </dev/null >/dev/null 2>&1 &
EXTRA_PIDS+=($!)
poll_until 30 test -s "$CTL/sshd.pid" || { _rx_show "sshd log" "$CTL/sshd.log"; fail "controller sshd"; }
HTTP_PORT=$("$RX_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ssh -N -F /dev/null -p "$CTL_PORT" -i "$WS/keys/id_ed25519" -o BatchMode=yes \
    -o IdentitiesOnly=yes -o IdentityAgent=none -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ExitOnForwardFailure=yes \
    -L "127.0.0.1:$HTTP_PORT:$WEBSOCK" "$APPROVER@127.0.0.1" >/dev/null 2>"$RX_TMP/ssh.err" &
EXTRA_PIDS+=($!)
tunnel_up() {
    "$RX_PYTHON" -c '
import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/app.css" % sys.argv[1], timeout=5).read()' "$HTTP_PORT" 2>/dev/null
}
poll_until 60 tunnel_up || { _rx_show "ssh" "$RX_TMP/ssh.err"; _rx_show "sshd" "$CTL/sshd.log"; fail "no tunnel"; }
URL=http://localhost:$HTTP_PORT/

# ---- the browser -------------------------------------------------------------------------------
coproc CDP { exec "$RX_PYTHON" "$REXEC_SRC/tests/e2e/cdp.py" "$RX_TMP/chrome/profile" 2>"$RX_TMP/cdp.err"; }
EXTRA_PIDS+=("$CDP_PID")
cdp() {  # cdp COMMAND...: one command to the browser; its answer in CDP_OUT; fails on "err"
    printf '%s\n' "$*" >&"${CDP[1]}"
    IFS= read -r -t 180 CDP_OUT <&"${CDP[0]}" || { _rx_show cdp "$RX_TMP/cdp.err"; fail "browser: no answer to: $1"; }
    [[ $CDP_OUT == ok* ]] || { _rx_show cdp "$RX_TMP/cdp.err"; _rx_show "the page's server" "$RX_TMP/web.err"
                               page_said; fail "browser: $* -> $CDP_OUT"; }
    CDP_OUT=${CDP_OUT#ok }
}
page_said() {  # what the page's status line says, on stderr (when a step failed)
    local said
    printf '%s\n' 'eval document.getElementById("status").textContent' >&"${CDP[1]}"
    IFS= read -r -t 30 said <&"${CDP[0]}" && printf '  the page says: %s\n' "$said" >&2
}
decide_on_page() {  # decide_on_page ID approve|deny TEXT: type TEXT in ID's form, click the button
    cdp eval "(function(){var f=document.querySelector('form.decide[data-id=\"$1\"]'); f.elements.text.value='$3'; f.querySelector('button.$2').click(); return 1})()"
}
IFS= read -r -t 120 CDP_OUT <&"${CDP[0]}" || { _rx_show cdp "$RX_TMP/cdp.err"; fail "chromium did not start"; }
assert_eq "ok ready" "$CDP_OUT" "browser"

held_call alpha "$RX_TMP/call_a"
CID_A=$(challenge_of "$RX_TMP/call_a")
cdp open "$URL"
cdp wait 60 'document.querySelectorAll("section.challenge").length === 1'
cdp wait 60 'document.getElementById("live").textContent === "live"'
# a second call shows up without a reload (serve's watch, relayed as server-sent events)
held_call beta "$RX_TMP/call_b" web.deploy
CID_B=$(challenge_of "$RX_TMP/call_b")
cdp wait 60 'document.querySelectorAll("section.challenge").length === 2'
cdp eval "document.querySelector('section[data-id=\"$CID_A\"] pre.script mark.param').textContent"
assert_eq "\"'alpha'\"" "$CDP_OUT" "the parameter highlighted in the script"
cdp eval "document.querySelector('section[data-id=\"$CID_A\"] .facts').textContent"
assert_contains <(printf '%s' "$CDP_OUT") "state_changing"
assert_contains <(printf '%s' "$CDP_OUT") "root (uid 0)"
cdp eval "Array.from(document.querySelectorAll('section[data-id=\"$CID_B\"] pre.script mark.secret')).map(function (m) { return m.textContent; }).join(' ')"
assert_eq '"[SECRET:DEMO_TOKEN] $DEMO_TOKEN"' "$CDP_OUT" "the secret highlighted: its export line and its use, by name"
cdp eval 'document.documentElement.outerHTML'
printf '%s' "$CDP_OUT" >"$RX_TMP/page.html"
assert_contains "$RX_TMP/page.html" "DEMO_TOKEN"
assert_not_contains "$RX_TMP/page.html" "$TOKEN"
[[ -z ${REXEC_WEB_SCREENSHOT:-} ]] || cdp shot "$REXEC_WEB_SCREENSHOT"
assert_eq 0 "$(wc -l <"$RAN")" "runs before a decision"

# approve alpha with a comment: the held call runs
decide_on_page "$CID_A" approve "change 4411"
cdp wait 60 "document.getElementById('status').textContent.indexOf('approved $CID_A') === 0"
poll_until 60 done_status "$RX_TMP/call_a" >/dev/null || { _rx_show caller "$RX_TMP/call_a"; fail "alpha did not end"; }
assert_eq 0 "$(done_status "$RX_TMP/call_a")" "alpha's exit status"
assert_eq ALLOW_GRANT "$(result_field "$RX_TMP/call_a" reason)" "alpha's reason"
assert_eq alpha "$(cat "$RAN")" "what ran"

# deny beta with a reason: its caller gets 77 and the reason
decide_on_page "$CID_B" deny "not during the freeze"
cdp wait 60 "document.getElementById('status').textContent.indexOf('denied $CID_B') === 0"
poll_until 60 done_status "$RX_TMP/call_b" >/dev/null || { _rx_show caller "$RX_TMP/call_b"; fail "beta did not end"; }
assert_eq 77 "$(done_status "$RX_TMP/call_b")" "beta's exit status"
result_field "$RX_TMP/call_b" error >"$OUT"
assert_contains "$OUT" "not during the freeze"
assert_eq alpha "$(cat "$RAN")" "what ran"
cdp wait 60 'document.querySelectorAll("section.challenge").length === 0'
# recorded as the approver, through the web
assert_contains "$WS/audit/audit.log" '"via":"web"'
assert_contains "$WS/audit/audit.log" "change 4411"
assert_contains "$WS/audit/audit.log" "$APPROVER"

# a value with a right-to-left override and an escape sequence: shown escaped, never raw
held_call $'gam\u202ema\x1b[2J' "$RX_TMP/call_c" t.note
CID_C=$(challenge_of "$RX_TMP/call_c")
cdp wait 60 'document.querySelectorAll("section.challenge").length === 1'
cdp eval "document.querySelector('section[data-id=\"$CID_C\"] table.params td').textContent"
assert_eq '"gam\\u202ema\\x1b[2J"' "$CDP_OUT" "the value as the page shows it"
cdp eval 'document.body.innerHTML.indexOf("\u202e") === -1 && document.body.innerHTML.indexOf("\u001b") === -1'
assert_eq true "$CDP_OUT" "no raw control character on the page"
printf 'quit\n' >&"${CDP[1]}"
wait "$CDP_PID" || fail "the browser did not close cleanly"

# ---- refusals, straight to the page's socket ---------------------------------------------------
as_approver "$RX_PYTHON" - "$WEBSOCK" "$CID_A" "$CID_C" >"$OUT" 2>&1 <<'PY' || { cat "$OUT" >&2; fail "refusals"; }
import http.client, json, re, socket, sys
path, decided, pending = sys.argv[1:4]

class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)

def req(method, url, headers=None, body=None):
    c = Conn("localhost")
    h = {"Host": "localhost:8080"}
    h.update(headers or {})
    c.request(method, url, body=body, headers={k: v for k, v in h.items() if v is not None})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r, data

def check(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)
    print("ok", what)

r, page = req("GET", "/")
check(r.status == 200, "the page loads")
check(r.getheader("X-Frame-Options") == "DENY", "X-Frame-Options DENY")
check("default-src 'self'" in r.getheader("Content-Security-Policy"), "CSP default-src 'self'")
cookie = r.getheader("Set-Cookie")
check("HttpOnly" in cookie and "SameSite=Strict" in cookie, "cookie HttpOnly, SameSite=Strict")
check(b"<script>" not in page and b"<script src=\"/app.js\"" in page, "no inline script")
sid = cookie.split(";")[0]
token = re.search(rb'name="rexec-csrf" content="([^"]+)"', page).group(1).decode()
origin = "http://localhost:8080"
body = json.dumps({"challenge_id": pending, "text": "x"})
js = {"Content-Type": "application/json", "Cookie": sid, "Origin": origin}

r, _ = req("GET", "/", {"Host": "evil.example:8080"})
check(r.status == 403, "a foreign Host is refused (DNS rebinding)")
r, _ = req("GET", "/api/approvals", {"Host": "rexec.attacker.test", "Cookie": sid})
check(r.status == 403, "a foreign Host cannot read the list")
r, _ = req("POST", "/api/approve", dict(js), body)
check(r.status == 403, "a POST without a CSRF token is refused")
r, _ = req("POST", "/api/approve", dict(js, **{"X-CSRF-Token": token, "Origin": "http://evil.example"}), body)
check(r.status == 403, "a POST from a foreign Origin is refused")
r, _ = req("POST", "/api/approve", dict(js, **{"X-CSRF-Token": token, "Origin": None}), body)
check(r.status == 403, "a POST without Origin is refused")
r, _ = req("POST", "/api/approve", dict(js, **{"X-CSRF-Token": token, "Cookie": None}), body)
check(r.status == 403, "a POST without the session cookie is refused")
# the token is still unused: a decision on a challenge already decided is refused by serve
r, data = req("POST", "/api/approve", dict(js, **{"X-CSRF-Token": token}),
              json.dumps({"challenge_id": decided, "text": ""}))
check(r.status == 409 and not json.loads(data)["ok"], "a decided challenge cannot be decided again")
r, _ = req("POST", "/api/deny", dict(js, **{"X-CSRF-Token": token}), body)
check(r.status == 403, "a replayed token is refused")
# and the pending one is still pending
r, data = req("GET", "/api/approvals", {"Cookie": sid})
check([v["challenge_id"] for v in json.loads(data)["approvals"]] == [pending], "nothing was decided")
PY
assert_contains "$OUT" "ok a replayed token is refused"
assert_eq "" "$(done_status "$RX_TMP/call_c" || true)" "gamma still held"
pass
