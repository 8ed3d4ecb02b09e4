"""What the operator's front ends (`rexec approvals watch`, `rexec approvals web`) share: a client
of serve's approval ops (docs/serve-protocol.md, "Approvals") and the one rule for showing text a
person must read exactly.

Standard library only. The approver is the Unix user this process runs as: serve checks it with
SO_PEERCRED, and no code or token is sent for it."""
import json
import re
import socket
import unicodedata

from ._proto import RexecError, approval_request, connect_unix

# ---- showing text: every character a person cannot see becomes an escape ------------------------
# The same rule as the terminal prompt (src/base/unicode_vis.c, generated from unicodedata by
# scripts/gen/invisible.py): controls, format characters (bidi controls, zero-width characters,
# tags), separators, every space but U+0020, private use, unassigned, variation selectors, the
# combining grapheme joiner, fillers and blanks; and a combining mark with no base to sit on.
_HIDDEN_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Zs", "Cn", "Co", "Cs"}
_EXTRA = set(range(0xFE00, 0xFE10)) | set(range(0xE0100, 0xE01F0)) | set(range(0x180B, 0x1810))
_EXTRA |= set(range(0xE0000, 0xE0080))
_EXTRA |= {0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x17B4, 0x17B5, 0x2800, 0x061C, 0x00AD}


def hidden(cp):
    if cp == 0x20:
        return False
    return unicodedata.category(chr(cp)) in _HIDDEN_CATEGORIES or cp in _EXTRA


def visible(s):
    """s with every invisible character escaped (\\n, \\x1b, \\u202e, \\U000e0041), as the approval
    prompt shows it. Not a string (None, a number): its JSON text."""
    if not isinstance(s, str):
        return "" if s is None else json.dumps(s)
    out, base = [], False
    for ch in s:
        cp = ord(ch)
        if ch in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
            base = False
        elif hidden(cp) or (unicodedata.category(ch) in ("Mn", "Me") and not base):
            out.append("\\x%02x" % cp if cp < 0x80 else "\\u%04x" % cp if cp <= 0xFFFF
                       else "\\U%08x" % cp)
            base = False
        else:
            out.append(ch)
            base = ch != " "
    return "".join(out)


_SECRET = re.compile(r"\[(?:SECRET|REDACTED):[A-Za-z0-9_.-]{1,128}\]|\$\{?[A-Z_][A-Z0-9_]*\}?")


def script_segments(script, params, secrets):
    """The rendered command cut into pieces for highlighting: [{"kind": "text"|"param"|"secret",
    "text": shown, "name": parameter or secret name}]. A parameter's value is found as the quoted
    word the renderer made of it ('value'); a secret as [SECRET:NAME], [REDACTED:NAME] or $NAME
    for one of the action's secrets. Every text is visible()."""
    script = script if isinstance(script, str) else ""
    marks = []  # (start, end, kind, name)
    for name, value in sorted((params or {}).items()):
        if not isinstance(value, str) or value == "":
            continue
        quoted = "'" + value.replace("'", "'\\''") + "'"
        for needle in (quoted, value):
            for m in re.finditer(re.escape(needle), script):
                marks.append((m.start(), m.end(), "param", name))
            if any(k[3] == name for k in marks):
                break
    names = set(secrets or [])
    for m in _SECRET.finditer(script):
        word = m.group(0)
        name = word.strip("[]${}").split(":")[-1]
        if word.startswith("[") or name in names:
            marks.append((m.start(), m.end(), "secret", name))
    marks.sort(key=lambda k: (k[0], -(k[1] - k[0])))
    segs, at = [], 0
    for start, end, kind, name in marks:
        if start < at:
            continue  # overlaps one taken already
        if start > at:
            segs.append({"kind": "text", "text": visible(script[at:start]), "name": None})
        segs.append({"kind": kind, "text": visible(script[start:end]), "name": visible(name)})
        at = end
    if at < len(script) or not segs:
        segs.append({"kind": "text", "text": visible(script[at:]), "name": None})
    return segs


# ---- serve's approval ops --------------------------------------------------------------------
LINE_MAX = 16 << 20  # a reply line longer than this is refused (an approvals list is far smaller)
ID_RE = re.compile(r"^ch-[0-9a-f]{16}$")


def _read_line(f):
    line = f.readline(LINE_MAX + 1)
    if len(line) > LINE_MAX:
        raise RexecError("rexec serve: reply longer than %d bytes" % LINE_MAX, 74)
    return line


class Approver:
    """Serve's approval ops, one short connection per request (watch keeps its own)."""

    def __init__(self, socket_path, timeout=30.0, via=None):
        self.socket_path = socket_path
        self.timeout = timeout
        self.via = via  # "web": recorded with each decision this front end makes

    def _connect(self, timeout):
        return connect_unix(self.socket_path, timeout)

    @staticmethod
    def _send(s, req):
        """Sends one request line. serve refuses a peer it does not admit with an error line and
        closes at once, so the send may fail (EPIPE) with the reason already here to read."""
        try:
            s.sendall((json.dumps(req) + "\n").encode())
        except (BrokenPipeError, ConnectionResetError):
            f = s.makefile("rb")
            for _ in range(8):
                try:
                    line = _read_line(f)
                except OSError:
                    break
                if not line:
                    break
                m = json.loads(line)
                if m.get("type") == "error":
                    raise RexecError(m.get("error") or "refused", m.get("exit_status") or 1, m)
            raise

    def request(self, req, want):
        """Sends one request; returns its reply of type want, or raises RexecError with serve's
        message and exit status."""
        s = self._connect(self.timeout)
        try:
            self._send(s, req)
            f = s.makefile("rb")
            while True:
                line = _read_line(f)
                if not line:
                    raise RexecError("rexec serve closed the connection", 255)
                m = json.loads(line)
                if m.get("type") == "error":
                    raise RexecError(m.get("error") or "refused", m.get("exit_status") or 1, m)
                if m.get("type") == want:
                    return m
        except OSError as e:
            raise RexecError("rexec serve: %s" % (e.strerror or type(e).__name__), 255)
        finally:
            s.close()

    def approvals(self, challenge_id=None):
        return self.request(approval_request("approvals", challenge_id), "approvals").get(
            "approvals") or []

    def _decision(self, op, challenge_id, text):
        req = approval_request(op, challenge_id, text or None)
        if self.via:
            req["via"] = self.via
        return self.request(req, "approved" if op == "approve" else "denied")

    def approve(self, challenge_id, comment=None):
        return self._decision("approve", challenge_id, comment)

    def deny(self, challenge_id, reason=None):
        return self._decision("deny", challenge_id, reason)

    def watch(self, idle_s=None):
        """Yields serve's "watching" reply, then its watch events (dicts with "event") as they
        come; None every idle_s seconds without one (so the caller can notice it has to stop).
        Ends when serve closes."""
        s = self._connect(self.timeout)
        buf = b""
        try:
            self._send(s, approval_request("watch"))
            s.settimeout(idle_s)
            while True:
                while b"\n" not in buf:
                    if len(buf) > LINE_MAX:
                        raise RexecError("rexec serve: reply longer than %d bytes" % LINE_MAX, 74)
                    try:
                        piece = s.recv(65536)
                    except socket.timeout:
                        yield None
                        continue
                    if not piece:
                        return
                    buf += piece
                line, buf = buf.split(b"\n", 1)
                if not line.strip():
                    continue
                m = json.loads(line)
                if m.get("type") == "error":
                    raise RexecError(m.get("error") or "refused", m.get("exit_status") or 1, m)
                if m.get("type") in ("watching", "event"):
                    yield m
        except OSError as e:
            raise RexecError("rexec serve: %s" % (e.strerror or type(e).__name__), 255)
        finally:
            s.close()
