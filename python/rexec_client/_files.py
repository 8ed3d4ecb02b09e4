"""Files in and out through serve (docs/python-client.md, "Files: put and get"), shared by the
blocking and the asyncio client. The client reads and writes the local file itself: serve never
opens a path a client names. A put's file is hashed here (its SHA-256 and size are the put
action's content_sha256 and content_size, which the VM checks) and streamed as the call's
stdin; a get's output goes to a temporary file next to the local one, renamed onto it only
when the call succeeded with all of it."""
import hashlib
import os
import tempfile

from ._proto import RexecError

SINK_EXIT = 73  # the local file cannot be written (docs/exit-codes.md)


def put_params(local_path, params=None):
    """params plus content_sha256 and content_size of the file at local_path."""
    h, size = hashlib.sha256(), 0
    with open(local_path, "rb") as f:
        while True:
            piece = f.read(1 << 20)
            if not piece:
                break
            h.update(piece)
            size += len(piece)
    out = dict(params or {})
    out.update({"content_sha256": h.hexdigest(), "content_size": str(size)})
    return out


class Sink:
    """The stdout of one call into local_path: on_output for Call.wait, then finish(result)."""

    def __init__(self, local_path):
        self.path = os.fspath(local_path)
        if os.path.isdir(self.path):
            raise RexecError("the local file is a directory", SINK_EXIT)
        try:
            fd, self.tmp = tempfile.mkstemp(prefix=".rexec-out.", dir=os.path.dirname(self.path) or ".")
        except OSError as e:
            raise RexecError("cannot create a file next to the local file: %s" % e.strerror, SINK_EXIT)
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        self.f = os.fdopen(fd, "wb")
        self.written = 0
        self.error = None

    def on_output(self, host, stream, data):
        if stream != "stdout" or self.error:
            return
        try:
            self.f.write(data)
            self.written += len(data)
        except OSError as e:
            self.error = e.strerror or str(e)

    def finish(self, result):
        """Renames the file into place when the call succeeded whole; else removes it. Returns
        the call's one result dict; raises RexecError (73) when the local file failed."""
        r = (result.get("results") or [{}])[0]
        # stdout_bytes counts what the stream produced, past max_output_bytes too
        whole = result.get("exit_status") == 0 and self.written == r.get("stdout_bytes")
        try:
            if self.error is None and whole:
                self.f.flush()
                os.fsync(self.f.fileno())
                self.f.close()
                os.replace(self.tmp, self.path)
                return r
        except OSError as e:
            self.error = e.strerror or str(e)
        self.abort()
        if self.error is not None:
            raise RexecError("the local file could not be written: %s" % self.error, SINK_EXIT, r)
        if result.get("exit_status") == 0:
            raise RexecError("the output was not whole (past max_output_bytes?): the local file "
                             "was left as it was", SINK_EXIT, r)
        return r

    def abort(self):
        try:
            self.f.close()
        except OSError:
            pass
        try:
            os.unlink(self.tmp)
        except OSError:
            pass
