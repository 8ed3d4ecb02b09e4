"""The protocol's requests and replies, shared by the sync and asyncio clients."""
import base64
import json
import os
import socket

# Final replies: the request is over once one of these arrives.
FINAL = ("done", "error", "pong", "list", "reloaded", "metrics", "approvals", "approved",
         "denied")
CANCEL_ID = "__cancel__"
# stdin up to INLINE_MAX rides in the request line; more, or a file object, is streamed in
# "stdin" lines of PIECE bytes (64 KiB as base64, under serve's 68 KiB line limit).
INLINE_MAX = 48 * 1024
PIECE = 48 * 1024
RAW_PIECE = 256 * 1024  # a raw piece, to a serve that takes them (at most 1 MiB)

# serve's request keys per op (docs/serve-protocol.md), as this client uses them: SENDS the keys
# its requests carry, NOT_SENT the keys of serve it never sends and why. Together they are every
# key of serve's table (`rexec __interface --serve`, src/config/request.c):
# tests/install/t_serve_interface.sh holds them against it, and against what the functions below
# really send. A new key of serve goes into one of the two.
_CALL = ("op", "id", "targets", "action", "params", "stream", "stdin_base64", "stdin_stream",
         "traceparent", "grant_id", "timeout_s", "rationale", "hypothesis_id",
         "parallel", "wait_approval_s")
# run only: a fan-out's batches, canary, failure threshold and retries (eval runs nothing)
_FANOUT = ("batch", "canary", "max_failures", "retry_unavailable")
SENDS = {
    "run": _CALL + _FANOUT,
    "eval": _CALL,
    "check": ("op", "id", "targets"),
    "cancel": ("op", "id", "target"),
    "stdin": ("op", "target", "data_base64", "bytes", "eof"),
    "ping": ("op", "id"),
    "hosts": ("op", "id"),
    "actions": ("op", "id"),
    "groups": ("op", "id"),
    "reload": ("op", "id"),
    "metrics": ("op", "id"),
    "approvals": ("op", "id", "challenge_id"),
    "approve": ("op", "id", "challenge_id", "comment", "via"),  # via: approver.py (the web page)
    "deny": ("op", "id", "challenge_id", "reason", "via"),
    "watch": ("op", "id"),
}
_CALL_NOT_SENT = {
    "host": "targets names the hosts (host is the --request document's)",
    "stdin": "stdin goes as stdin_base64, which carries any bytes",
}
NOT_SENT = {
    "run": _CALL_NOT_SENT,
    "eval": _CALL_NOT_SENT,
    "stdin": {"id": "a piece taken is not answered; the request's id is the target",
              "data": "pieces go as data_base64 or as raw bytes, which carry any bytes"},
}


class RexecError(Exception):
    """A request refused as a whole, or serve unreachable. exit_status is what `rexec run` would
    exit with (65 bad request, 78 unknown host/action, 255 serve unreachable, ...).

    The message is serve's own (serve redacts every workspace secret from it) or one the client
    wrote without any of the caller's arguments in it: the client knows no secret, so it never
    puts back what it was given (a target, an action, a parameter, a socket path), which could be
    one (docs/python-client.md, "Errors and secrets")."""

    def __init__(self, message, exit_status, reply=None):
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status
        self.reply = reply


class RexecCallError(RexecError):
    """raise_on_error=True and a call ended with a non-zero status: .result has every host's."""

    def __init__(self, result):
        bad = [r for r in result["results"] if r.get("exit_status")]
        msg = "; ".join("%s: %s" % (r.get("host"), r.get("error") or "exit %s" % r.get("exit_status"))
                        for r in bad) or "exit status %d" % result["exit_status"]
        super().__init__(msg, result["exit_status"], result)
        self.result = result


def unreachable(e):
    """The message for a socket that cannot be reached: the OS's reason, not the path (which the
    caller has as Client.socket_path)."""
    return "cannot reach rexec serve (the socket given): %s" % (
        getattr(e, "strerror", None) or type(e).__name__)


def connect_unix(path, timeout):
    """A connected socket to rexec serve at path; RexecError (255) naming why it cannot be."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
    except OSError as e:
        s.close()
        raise RexecError(unreachable(e), 255)
    return s


def mask(text, args):
    """text with every one of args (the caller's own words) that is long enough to be a secret
    (8 bytes or more: rexec refuses shorter secrets) replaced by [NOT SHOWN]."""
    for a in sorted({a for a in args if isinstance(a, str) and len(a.encode()) >= 8},
                    key=len, reverse=True):
        text = text.replace(a, "[NOT SHOWN]")
    return text


def socket_path(path):
    path = path or os.environ.get("REXEC_SOCKET")
    if not path:
        raise RexecError("no socket: pass socket_path or set $REXEC_SOCKET", 64)
    return path


def call_request(op, targets, action=None, params=None, *, stdin=None, grant_id=None,
                 timeout_s=None, rationale=None, hypothesis_id=None, parallel=None, stream=True,
                 traceparent=None, batch=None, canary=None, max_failures=None,
                 retry_unavailable=None, wait_approval_s=None):
    """The request object of a run, eval or check. batch and max_failures: an int N or a str
    "N" / "P%"; canary, retry_unavailable: ints; run only (eval runs nothing: not sent).
    wait_approval_s: eval takes it and never waits."""
    if op not in ("run", "eval", "check"):
        raise RexecError("op must be run, eval or check", 64)
    req = {"op": op, "id": 1, "targets": targets}
    if op == "check":
        return req
    req["action"] = action
    req["params"] = {str(k): str(v) for k, v in (params or {}).items()}
    req["stream"] = bool(stream)
    if streamed(stdin):
        req["stdin_stream"] = True
    elif stdin is not None:
        req["stdin_base64"] = base64.b64encode(as_bytes(stdin)).decode()
    for key, val in (("grant_id", grant_id), ("timeout_s", timeout_s), ("rationale", rationale),
                     ("hypothesis_id", hypothesis_id), ("parallel", parallel),
                     ("traceparent", traceparent), ("wait_approval_s", wait_approval_s)):
        if val is not None:
            req[key] = val
    for key, val in (("batch", batch), ("canary", canary), ("max_failures", max_failures),
                     ("retry_unavailable", retry_unavailable)):
        if val is not None and op == "run":
            req[key] = val
    return req


def approval_request(op, challenge_id=None, note=None):
    """The request object of approvals, approve, deny or watch (note: approve's comment,
    deny's reason)."""
    req = {"op": op, "id": 1}
    if challenge_id is not None:
        req["challenge_id"] = challenge_id
    if note is not None:
        req["comment" if op == "approve" else "reason"] = note
    return req


def as_bytes(stdin):
    return stdin.encode() if isinstance(stdin, str) else bytes(stdin)


def streamed(stdin):
    """Whether this stdin goes in "stdin" lines: a file object, or more than INLINE_MAX bytes."""
    if stdin is None:
        return False
    return hasattr(stdin, "read") or len(as_bytes(stdin)) > INLINE_MAX


def stdin_lines(stdin, raw=lambda: False):
    """The "stdin" lines of a streamed stdin, the "eof" line last (docs/serve-protocol.md): raw
    pieces ("bytes": N, then N bytes; RAW_PIECE at a time) once raw() is true (serve said
    "stdin_bytes" in its "accepted"), base64 lines of PIECE bytes before that or otherwise."""
    data = None if hasattr(stdin, "read") else as_bytes(stdin)
    off = 0
    while True:
        size = RAW_PIECE if raw() else PIECE
        if data is None:
            piece = stdin.read(size)
            piece = piece.encode() if isinstance(piece, str) else piece
        else:
            piece = data[off:off + size]
            off += len(piece)
        if not piece:
            break
        if size == RAW_PIECE:
            yield encode({"op": "stdin", "target": 1, "bytes": len(piece)}) + piece
        else:
            yield encode({"op": "stdin", "target": 1,
                          "data_base64": base64.b64encode(piece).decode()})
    yield encode({"op": "stdin", "target": 1, "eof": True})


def encode(obj):
    return json.dumps(obj).encode() + b"\n"


def cancel_line():
    return encode({"op": "cancel", "id": CANCEL_ID, "target": 1})


def decode(line):
    """One reply line as a dict; output replies get "bytes" (the chunk, decoded)."""
    m = json.loads(line)
    if m.get("type") == "output":
        d = m.get("data")
        m["bytes"] = d.encode() if d is not None else base64.b64decode(m.get("data_base64") or "")
    return m


class Collector:
    """Folds the replies of one request into its result dict."""

    def __init__(self):
        self.result = {"exit_status": None, "hosts": [], "results": []}
        self.final = None
        self.stdin_bytes = False  # serve takes raw stdin pieces (its "accepted" said so)

    def add(self, m):
        t = m.get("type")
        if t == "accepted":
            self.result["hosts"] = m.get("hosts", [])
            self.stdin_bytes = m.get("stdin_bytes") is True
        elif t in ("result", "check"):
            self.result["results"].append(strip(m))
        elif t == "done":
            self.result["exit_status"] = m.get("exit_status")
            if "stopped" in m:  # a run's failure threshold kept hosts from starting
                self.result["stopped"] = m["stopped"]
        elif t == "challenge":  # wait_approval_s: held for this challenge's decision
            self.result["challenge"] = strip(m)
        if t in FINAL:
            self.final = m
        return t in FINAL

    def finish(self, raise_on_error=False):
        m = self.final
        if m is None:
            raise RexecError("rexec serve closed the connection", 255)
        if m["type"] == "error":
            raise RexecError(m.get("error") or "error", m.get("exit_status", 70), m)
        if m["type"] != "done":
            return strip(m)
        if raise_on_error and self.result["exit_status"]:
            raise RexecCallError(self.result)
        return self.result


def strip(m):
    """A reply without the protocol's id and type."""
    return {k: v for k, v in m.items() if k not in ("id", "type")}
