"""Files in and out through serve (docs/python-client.md, "Files: put and get"), shared by the
blocking and the asyncio client. The client reads and writes the local file itself: serve never
opens a path a client names. A put's file is read once, streamed as the call's stdin with its
size (the put action's content_size); serve's call hashes it as it sends it and the VM checks
that hash (the result's put_sha256) before the rename. A get's output goes to a temporary file
next to the local one, renamed onto it only when the call succeeded with all of it."""
import os
import stat
import tempfile

from ._proto import RexecError

SINK_EXIT = 73  # the local file cannot be written (docs/exit-codes.md)


def open_put(local_path, params=None):
    """(the file at local_path opened for reading, params plus its content_size). Only a regular
    file (opened without blocking: a FIFO's open would wait for a writer); a caller's
    content_sha256 stays in params (the VM then also requires the hash to equal it)."""
    try:
        fd = os.open(local_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise RexecError("the local file cannot be opened: %s" % e.strerror, 65)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RexecError("the local file is not a regular file", 65)
    os.set_blocking(fd, True)
    out = dict(params or {})
    out["content_size"] = str(st.st_size)
    return os.fdopen(fd, "rb"), out


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
