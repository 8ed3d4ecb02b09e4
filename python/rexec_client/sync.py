"""The blocking client: one Unix-socket connection per call, so calls may run from many threads."""
import threading

from ._files import Sink, open_put
from ._proto import (CANCEL_ID, Collector, RexecCallError, RexecError, approval_request,
                     call_request, cancel_line, connect_unix, decode, encode, socket_path,
                     stdin_lines, streamed, strip)


class Call:
    """One request in flight. Iterate events() for its replies as they arrive (output chunks
    carry "bytes"), or wait() for the result dict; cancel() (from any thread) asks serve to stop
    the remote commands, whose results then arrive as usual."""

    def __init__(self, sock):
        self._sock = sock
        self._file = sock.makefile("rb")
        self._lock = threading.Lock()
        self._collector = Collector()
        self._over = False
        self._cancelled = False
        self._uploader = None

    def upload(self, stdin):
        """Sends a streamed stdin from a thread of its own while the replies are read; it stops
        when the request is over (serve ended it early, or it was cancelled)."""
        def send():
            try:
                for line in stdin_lines(stdin, lambda: self._collector.stdin_bytes):
                    with self._lock:  # whole lines only: a cancel goes between two of them
                        if self._over or self._cancelled:
                            return
                        self._sock.sendall(line)
            except (OSError, ValueError):
                pass  # serve gone (the reader reports it) or the socket closed under us
        self._uploader = threading.Thread(target=send, daemon=True)
        self._uploader.start()

    def cancel(self):
        with self._lock:
            self._cancelled = True
            if not self._over:
                try:
                    self._sock.sendall(cancel_line())
                except OSError:
                    pass

    def events(self):
        """The replies (dicts with "type": accepted, output, result, check, done, error, ...)."""
        try:
            while not self._over:
                line = self._file.readline()
                if not line:
                    break
                m = decode(line)
                if m.get("id") == CANCEL_ID:
                    continue
                if self._collector.add(m):
                    self._over = True
                yield m
        finally:
            self.close()

    def wait(self, on_output=None, raise_on_error=False):
        """Reads to the end; on_output(host, stream, bytes) sees the output as it arrives."""
        for m in self.events():
            if on_output and m.get("type") == "output":
                on_output(m.get("host"), m.get("stream"), m["bytes"])
        return self._collector.finish(raise_on_error)

    def close(self):
        with self._lock:
            self._over = True
            try:
                self._file.close()
                self._sock.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client:
    """Client("/path/to.sock") (default $REXEC_SOCKET); timeout (seconds, None = none) bounds each
    socket operation, not the call: a long action sends nothing for a long time."""

    def __init__(self, socket_path_=None, timeout=None):
        self.socket_path = socket_path(socket_path_)
        self.timeout = timeout

    def _connect(self):
        return connect_unix(self.socket_path, self.timeout)

    def start(self, op, targets, action=None, params=None, **kw):
        """Sends a run/eval/check and returns its Call (kw: stdin, grant_id, timeout_s,
        rationale, hypothesis_id, parallel, stream, traceparent; run: batch, canary,
        max_failures, retry_unavailable)."""
        s = self._connect()
        try:
            s.sendall(encode(call_request(op, targets, action, params, **kw)))
        except OSError as e:
            s.close()
            raise RexecError("rexec serve: %s" % (e.strerror or type(e).__name__), 255)
        call = Call(s)
        if streamed(kw.get("stdin")):
            call.upload(kw["stdin"])
        return call

    def run(self, targets, action, params=None, on_output=None, raise_on_error=False, **kw):
        """Runs action on targets; returns {"exit_status", "hosts", "results": [result, ...]}."""
        kw.setdefault("stream", on_output is not None)
        return self.start("run", targets, action, params, **kw).wait(on_output, raise_on_error)

    def put(self, targets, action, local_path, params=None, raise_on_error=False, **kw):
        """Sends the file at local_path with a put action (`rexec put`): its size goes as
        content_size, its bytes as the streamed stdin, read once. Returns run's dict (put_sha256:
        the hash of what was sent)."""
        f, params = open_put(local_path, params)
        with f:
            return self.run(targets, action, params, raise_on_error=raise_on_error, stdin=f, **kw)

    def get(self, host, action, local_path, params=None, **kw):
        """Fetches a file with a get action (`rexec get`) into local_path, written whole or not
        at all. Returns the host's result (stdout_bytes, stdout_sha256: the file's size and
        SHA-256); a failed call leaves local_path as it was (raise_on_error: RexecCallError)."""
        raise_on_error = kw.pop("raise_on_error", False)
        sink = Sink(local_path)
        try:
            result = self.run(host, action, params, on_output=sink.on_output, **kw)
        except BaseException:
            sink.abort()
            raise
        r = sink.finish(result)
        if raise_on_error and result.get("exit_status"):
            raise RexecCallError(result)
        return r

    def eval(self, targets, action, params=None, raise_on_error=False, **kw):
        """The gate's decision only; results have decision, reason and rendered."""
        kw["stream"] = False
        return self.start("eval", targets, action, params, **kw).wait(None, raise_on_error)

    def check(self, targets, raise_on_error=False):
        """Connects and probes each host; results have ok, facts (a dict), containment."""
        return self.start("check", targets).wait(None, raise_on_error)

    def stream(self, targets, action, params=None, **kw):
        """Yields the replies of a run as they arrive (output chunks with "bytes")."""
        kw["stream"] = True
        yield from self.start("run", targets, action, params, **kw).events()

    def _simple(self, op):
        s = self._connect()
        with Call(s) as c:
            s.sendall(encode({"op": op, "id": 1}))
            return c.wait()

    def ping(self):
        return self._simple("ping")

    def hosts(self):
        return self._simple("hosts")["hosts"]

    def actions(self):
        return self._simple("actions")["actions"]

    def groups(self):
        return self._simple("groups")["groups"]

    def reload(self):
        """Reloads rexec.json; RexecError (exit_status 78) when the new file does not load."""
        return self._simple("reload")

    def metrics(self):
        """serve's metrics as Prometheus text (docs/metrics.md)."""
        return self._simple("metrics")["text"]

    # ---- approvers (serve.clients verbs approvals, approve, deny) ----------------------------

    def _approval(self, op, challenge_id=None, note=None):
        s = self._connect()
        with Call(s) as c:
            s.sendall(encode(approval_request(op, challenge_id, note)))
            return c.wait()

    def approvals(self, challenge_id=None):
        """The pending challenges (a list of dicts), or the one named, whatever its state."""
        return self._approval("approvals", challenge_id)["approvals"]

    def approve(self, challenge_id, comment=None):
        """Approves a challenge as this process's user; RexecError 77 when refused."""
        return self._approval("approve", challenge_id, comment)

    def deny(self, challenge_id, reason=None):
        """Denies a challenge for good; a caller waiting on it ends with 77 and the reason."""
        return self._approval("deny", challenge_id, reason)

    def watch(self):
        """Yields approval events as they happen ({"event": "approval_pending", "challenge":
        {...}}, approval_decided, approval_expired), the pending ones first; until closed."""
        s = self._connect()
        with Call(s) as c:
            s.sendall(encode(approval_request("watch")))
            for m in c.events():
                if m.get("type") == "error":
                    raise RexecError(m.get("error") or "error", m.get("exit_status", 70), m)
                if m.get("type") == "event":
                    yield strip(m)
