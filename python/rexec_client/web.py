"""rexec approvals web: a page for operators to decide pending approvals (docs/gate.md, "A web page
over ssh -L"). Standard library only: http.server's request handling on a Unix socket
(socketserver.UnixStreamServer), talking to `rexec serve` as the approver account this process
runs as.

    python3 -m rexec_client.web --listen unix:/run/rexec-web/web.sock --socket /run/rexec/rexec.sock

The socket is made 0600 (only this user can open it); operators reach it with
`ssh -L 8080:/run/rexec-web/web.sock controller` and open http://localhost:8080/.

What the page can be made to do, and by whom:
- Host and Origin must name the tunnel's end (localhost, 127.0.0.1 or [::1], any port): a page of
  another site (DNS rebinding, a form posted cross-site) is refused with 403.
- Each browser session has an HttpOnly, SameSite=Strict cookie; each page load gets a CSRF token
  bound to that session; every POST must carry one in X-CSRF-Token, which it uses up (the reply
  brings the next). A replayed POST is refused (403), and so is a decision on a challenge that is
  no longer pending (serve: 77).
- Content-Security-Policy default-src 'self' (no inline script: the script is /app.js),
  frame-ancestors 'none' and X-Frame-Options DENY, nosniff, no referrer, no caching.
- Everything shown comes from serve's redacted challenge objects, with invisible characters made
  visible; the HTML is escaped on the server and the script writes text with textContent only.
- Each decision goes to serve with "via": "web" (recorded with it) under this process's uid.
"""
import argparse
import html
import hmac
import http.server
import json
import os
import re
import secrets
import socket
import socketserver
import stat
import sys
import threading
import time

from ._proto import RexecError
from .approver import ID_RE, Approver, script_segments, visible

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web_static")
BODY_MAX = 16 * 1024
TEXT_MAX = 1024          # a comment or reason (serve's own limit)
SESSIONS_MAX = 256
TOKENS_PER_SESSION = 32
SESSION_TTL_S = 12 * 3600
STREAMS_MAX = 16         # live-update streams at once
THREADS_MAX = 64         # connections served at once
COOKIE = "rexec_web_session"
LOCAL = r"(?:localhost|127\.0\.0\.1|\[::1\])(?::[0-9]{1,5})?"
HOST_RE = re.compile(r"^%s$" % LOCAL)
ORIGIN_RE = re.compile(r"^http://(%s)$" % LOCAL)

SECURITY_HEADERS = (
    ("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'self'; "
                                "frame-ancestors 'none'"),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
)


class Sessions:
    """Browser sessions (a random id in a cookie) and the CSRF tokens issued to each: bounded,
    expiring, compared in constant time. A token is used up by the POST that carries it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._s = {}  # id -> {"at": created, "tokens": [token, ...]}

    def _expire(self, now):
        for sid in [k for k, v in self._s.items() if now - v["at"] > SESSION_TTL_S]:
            del self._s[sid]
        while len(self._s) >= SESSIONS_MAX:  # the oldest goes
            del self._s[min(self._s, key=lambda k: self._s[k]["at"])]

    def find(self, sid):
        with self._lock:
            for k, v in self._s.items():
                if sid and hmac.compare_digest(k, sid) and time.time() - v["at"] <= SESSION_TTL_S:
                    return k
        return None

    def new(self):
        with self._lock:
            self._expire(time.time())
            sid = secrets.token_urlsafe(32)
            self._s[sid] = {"at": time.time(), "tokens": []}
            return sid

    def issue(self, sid):
        with self._lock:
            s = self._s.get(sid)
            if s is None:
                return None
            tok = secrets.token_urlsafe(32)
            s["tokens"] = (s["tokens"] + [tok])[-TOKENS_PER_SESSION:]
            return tok

    def take(self, sid, token):
        """1 when token is one of sid's unused tokens (it is used up now)."""
        with self._lock:
            s = self._s.get(sid)
            if s is None or not token:
                return False
            for t in s["tokens"]:
                if hmac.compare_digest(t, token):
                    s["tokens"].remove(t)
                    return True
            return False


# ---- what the page shows ---------------------------------------------------------------------
def challenge_view(c):
    """A challenge object of serve as the page shows it: every string visible(), the script cut
    into highlighted pieces, only the fields the page uses (no code, no secret: serve sends none)."""
    params = c.get("params") if isinstance(c.get("params"), dict) else {}
    secret_names = [s for s in (c.get("secrets") or []) if isinstance(s, str)]
    scripts = c.get("scripts") if isinstance(c.get("scripts"), dict) else None
    req = c.get("requester") if isinstance(c.get("requester"), dict) else None
    stdin = c.get("stdin") if isinstance(c.get("stdin"), dict) else None
    return {
        "challenge_id": visible(c.get("challenge_id")),
        "state": visible(c.get("state")),
        "hosts": [visible(h) for h in (c.get("hosts") or [])],
        "action": visible(c.get("action")),
        "risk": visible(c.get("risk")),
        "reason": visible(c.get("reason")),
        "requester": ("%s (uid %s)" % (visible(req.get("user")), visible(req.get("uid")))
                      if req else "outside serve"),
        "request_id": visible(c.get("request_id")),
        "created": visible(c.get("created")),
        "expires": visible(c.get("expires")),
        "stdin": ("%s bytes, sha256 %s" % (visible(stdin.get("bytes")), visible(stdin.get("sha256")))
                  if stdin else "none"),
        "params": [[visible(k), visible(v)] for k, v in sorted(params.items())],
        "secrets": [visible(s) for s in secret_names],
        "script": script_segments(c.get("script"), params, secret_names),
        "scripts": ([[visible(h), script_segments(t, params, secret_names)]
                     for h, t in sorted(scripts.items())] if scripts else []),
    }


def esc(s):
    return html.escape(s, quote=True)


def render_segments(segs):
    out = []
    for g in segs:
        if g["kind"] == "text":
            out.append(esc(g["text"]))
        else:
            out.append('<mark class="%s" title="%s %s">%s</mark>' % (
                g["kind"], "parameter" if g["kind"] == "param" else "secret", esc(g["name"] or ""),
                esc(g["text"])))
    return "".join(out)


def render_challenge(v):
    """The server's HTML of one challenge (the first paint; app.js redraws the same markup from
    /api/approvals with textContent)."""
    rows = "".join("<tr><th>%s</th><td>%s</td></tr>" % (esc(k), esc(val)) for k, val in (
        ("hosts", ", ".join(v["hosts"])), ("risk", v["risk"]), ("reason", v["reason"]),
        ("requester", v["requester"]), ("request", v["request_id"]), ("created", v["created"]),
        ("expires", v["expires"]), ("stdin", v["stdin"]),
        ("secrets", ", ".join(v["secrets"]) + " (by name; values never shown)" if v["secrets"]
         else "none")))
    params = "".join('<tr><th><mark class="param">%s</mark></th><td>%s</td></tr>' % (esc(k), esc(val))
                     for k, val in v["params"]) or '<tr><td colspan="2">none</td></tr>'
    cid = esc(v["challenge_id"])
    return (
        '<section class="challenge" data-id="%s"><h2><span class="action">%s</span> on '
        '<span class="hosts">%s</span> <span class="risk risk-%s">%s</span></h2>'
        '<p class="cid">%s</p><table class="facts">%s</table>'
        '<h3>Script</h3><pre class="script">%s</pre><h3>Parameters</h3>'
        '<table class="params">%s</table>'
        '<form class="decide" data-id="%s"><label>Comment or reason '
        '<input name="text" maxlength="1024" autocomplete="off"></label> '
        '<button type="submit" name="decision" value="approve" class="approve">Approve</button> '
        '<button type="submit" name="decision" value="deny" class="deny">Deny</button></form>'
        '</section>' % (cid, esc(v["action"]), esc(", ".join(v["hosts"])), esc(v["risk"]),
                        esc(v["risk"]), cid, rows, render_segments(v["script"]), params, cid))


def render_page(views, token, error=None):
    body = "".join(render_challenge(v) for v in views) or '<p class="empty">No pending approvals.</p>'
    note = '<p class="error">%s</p>' % esc(error) if error else ""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="rexec-csrf" content="%s"><title>rexec approvals</title>'
        '<link rel="stylesheet" href="/app.css"><script src="/app.js" defer></script></head>'
        '<body><header><h1>rexec approvals</h1><span id="live" class="live">loading</span></header>'
        '<p id="status" class="status" role="status"></p>%s<main id="list">%s</main>'
        '</body></html>' % (esc(token), note, body)).encode()


# ---- HTTP ------------------------------------------------------------------------------------
class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "rexec-approvals-web"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 60  # a connection idle this long is closed

    # The peer of a Unix socket has no address; the tunnel's end is all there is.
    def address_string(self):
        return "local"

    def log_message(self, fmt, *args):
        if self.server.quiet:
            return
        sys.stderr.write("rexec approvals web: %s\n" % visible(fmt % args))

    def _send(self, code, body=b"", ctype="text/plain; charset=utf-8", headers=()):
        self.send_response(code)
        for k, v in SECURITY_HEADERS + tuple(headers):
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code, obj, headers=()):
        self._send(code, json.dumps(obj).encode(), "application/json", headers)

    def _refuse(self, code, why):
        self.close_connection = True
        self._json(code, {"ok": False, "error": why})

    def _local(self):
        """The request came through the tunnel to this page, not from another site."""
        host = self.headers.get("Host", "")
        if not HOST_RE.match(host):
            return "Host is not the local tunnel (localhost, 127.0.0.1 or [::1])"
        origin = self.headers.get("Origin")
        if origin is not None and (not ORIGIN_RE.match(origin) or origin != "http://" + host):
            return "Origin is not this page"
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site not in ("same-origin", "none"):
            return "request from another site"
        return None

    def _session(self):
        raw = self.headers.get("Cookie", "")
        for part in raw.split(";"):
            k, _, v = part.strip().partition("=")
            if k == COOKIE:
                return self.server.sessions.find(v)
        return None

    def do_GET(self):
        why = self._local()
        if why:
            return self._refuse(403, why)
        path = self.path.split("?", 1)[0]
        if path == "/":
            return self._page()
        if path in ("/app.js", "/app.css"):
            return self._static(path[1:])
        if path == "/api/approvals":
            if self._session() is None:
                return self._refuse(403, "no session: load the page first")
            return self._list()
        if path == "/events":
            if self._session() is None:
                return self._refuse(403, "no session: load the page first")
            return self._events()
        return self._refuse(404, "not found")

    do_HEAD = do_GET

    def _page(self):
        sid = self._session()
        headers = []
        if sid is None:
            sid = self.server.sessions.new()
            headers.append(("Set-Cookie", "%s=%s; Path=/; HttpOnly; SameSite=Strict" % (COOKIE, sid)))
        token = self.server.sessions.issue(sid)
        views, error = [], None
        try:
            views = [challenge_view(c) for c in self.server.approver.approvals()]
        except RexecError as e:
            error = "rexec serve: %s" % visible(e.message)
        self._send(200, render_page(views, token, error), "text/html; charset=utf-8", headers)

    def _static(self, name):
        ctype = "text/javascript; charset=utf-8" if name.endswith(".js") else "text/css; charset=utf-8"
        with open(os.path.join(STATIC, name), "rb") as f:
            self._send(200, f.read(), ctype)

    def _list(self):
        try:
            views = [challenge_view(c) for c in self.server.approver.approvals()]
        except RexecError as e:
            return self._json(502, {"ok": False, "error": visible(e.message)})
        self._json(200, {"ok": True, "approvals": views})

    def _events(self):
        """Server-sent events: "change" whenever serve's watch reports one (the page then fetches
        the list again), a comment line every 15 s otherwise (a gone browser is seen then)."""
        if not self.server.streams.acquire(blocking=False):
            return self._refuse(503, "too many live pages open")
        try:
            self.send_response(200)
            for k, v in SECURITY_HEADERS:
                self.send_header(k, v)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self.wfile.write(b"retry: 2000\n\n")
            self.wfile.flush()
            for ev in self.server.approver.watch(idle_s=15):
                if self.server.stopping.is_set():
                    break
                if ev is None:
                    self.wfile.write(b": idle\n\n")
                else:
                    kind = ev.get("event") if ev.get("event") in (
                        "approval_pending", "approval_decided", "approval_expired") else "change"
                    self.wfile.write(("event: change\ndata: %s\n\n" % kind).encode())
                self.wfile.flush()
        except (OSError, RexecError):
            pass  # the browser left, or serve did: EventSource reconnects
        finally:
            self.server.streams.release()

    def do_POST(self):
        # The body is read first (it is small or refused), so a refusal never leaves the client
        # writing into a closed connection.
        try:
            n = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._refuse(411, "Content-Length required")
        if n < 0 or n > BODY_MAX:
            return self._refuse(413, "request body over %d bytes" % BODY_MAX)
        raw = self.rfile.read(n)
        why = self._local()
        if why:
            return self._refuse(403, why)
        if self.headers.get("Origin") is None:
            return self._refuse(403, "POST without Origin")
        sid = self._session()
        if sid is None:
            return self._refuse(403, "no session: load the page first")
        if not self.server.sessions.take(sid, self.headers.get("X-CSRF-Token", "")):
            return self._refuse(403, "missing, unknown or used CSRF token: reload the page")
        token = self.server.sessions.issue(sid)  # the next POST's
        path = self.path.split("?", 1)[0]
        if path not in ("/api/approve", "/api/deny"):
            return self._json(404, {"ok": False, "error": "not found", "csrf": token})
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            return self._json(415, {"ok": False, "error": "application/json expected", "csrf": token})
        try:
            body = json.loads(raw)
        except ValueError:
            return self._json(400, {"ok": False, "error": "the body is not JSON", "csrf": token})
        self._decide(path[5:], body, token)

    def _decide(self, op, body, token):
        cid = body.get("challenge_id") if isinstance(body, dict) else None
        text = body.get("text", "") if isinstance(body, dict) else None
        if not isinstance(cid, str) or not ID_RE.match(cid):
            return self._json(400, {"ok": False, "error": "challenge_id: ch- and 16 hex digits",
                                    "csrf": token})
        if not isinstance(text, str) or len(text.encode()) > TEXT_MAX:
            return self._json(400, {"ok": False, "csrf": token,
                                    "error": "comment: a string of at most %d bytes" % TEXT_MAX})
        try:
            if op == "approve":
                r = self.server.approver.approve(cid, text or None)
                msg = "approved %s for %s" % (cid, ", ".join(visible(h) for h in r.get("hosts") or []))
            else:
                r = self.server.approver.deny(cid, text or None)
                msg = "denied %s" % cid
        except RexecError as e:
            return self._json(409 if e.exit_status == 77 else 502,
                              {"ok": False, "error": visible(e.message), "csrf": token})
        self._json(200, {"ok": True, "message": msg, "csrf": token})


class WebServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, path, approver, quiet=False):
        self.path = path
        self.approver = approver
        self.sessions = Sessions()
        self.streams = threading.BoundedSemaphore(STREAMS_MAX)
        self.threads = threading.BoundedSemaphore(THREADS_MAX)
        self.stopping = threading.Event()
        self.quiet = quiet
        super().__init__(path, Handler)

    def server_bind(self):
        # 0600 from the start: no moment where another user could connect.
        old = os.umask(0o177)
        try:
            super().server_bind()
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    def process_request(self, request, client_address):
        if not self.threads.acquire(blocking=False):
            self.shutdown_request(request)  # full: the browser retries
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.threads.release()


def clear_stale(path):
    """A socket file left by a server that died is removed; a live one, or anything that is not
    a socket, is refused."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise RexecError("--listen: the path exists and is not a socket", 64)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        os.unlink(path)
        return
    finally:
        s.close()
    raise RexecError("--listen: a server already listens on this socket", 64)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="rexec approvals web", description=__doc__.splitlines()[0])
    ap.add_argument("--listen", required=True, metavar="unix:PATH")
    ap.add_argument("--socket", default=os.environ.get("REXEC_SOCKET"), metavar="PATH",
                    help="rexec serve's socket (default $REXEC_SOCKET)")
    ap.add_argument("--quiet", action="store_true", help="no line per request on stderr")
    a = ap.parse_args(argv)
    if not a.listen.startswith("unix:") or len(a.listen) <= 5:
        print("rexec: approvals web: --listen takes unix:PATH (reach it with ssh -L)", file=sys.stderr)
        return 64
    if not a.socket:
        print("rexec: approvals web: no serve socket: --socket PATH or $REXEC_SOCKET", file=sys.stderr)
        return 64
    path = a.listen[5:]
    try:
        clear_stale(path)
        srv = WebServer(path, Approver(a.socket, via="web"), quiet=a.quiet)
    except RexecError as e:
        print("rexec: approvals web: %s" % e.message, file=sys.stderr)
        return e.exit_status
    except OSError as e:
        print("rexec: approvals web: --listen: %s" % (e.strerror or e), file=sys.stderr)
        return 74

    def stop(*_):
        srv.stopping.set()
        threading.Thread(target=srv.shutdown, daemon=True).start()

    import signal
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("rexec approvals web: listening on unix:%s (ssh -L 8080:%s HOST, then "
          "http://localhost:8080/)" % (visible(path), visible(path)), file=sys.stderr, flush=True)
    try:
        srv.serve_forever(poll_interval=0.5)
    finally:
        srv.server_close()
        try:
            os.unlink(path)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
