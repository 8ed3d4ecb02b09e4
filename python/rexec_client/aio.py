"""The asyncio client: one connection per call, any number of calls at once on one loop."""
import asyncio

from ._files import Sink, open_put
from ._proto import (CANCEL_ID, Collector, RexecCallError, RexecError, approval_request,
                     call_request, cancel_line, decode, encode, socket_path, stdin_lines, streamed,
                     strip, unreachable)

LINE_LIMIT = 64 * 1024 * 1024  # a result line holds up to two capped streams, as JSON


class AsyncCall:
    """One request in flight: `async for m in call.events()`, `await call.wait()`,
    `await call.cancel()`. Cancelling the task that waits also cancels the remote commands."""

    def __init__(self, reader, writer):
        self._reader, self._writer = reader, writer
        self._collector = Collector()
        self._over = False
        self._uploader = None
        self._cancelled = False

    def upload(self, stdin):
        """Sends a streamed stdin in a task of its own while the replies are read; it stops when
        the request is over. A file object is read in the loop's thread: use a regular file."""
        async def send():
            try:
                for line in stdin_lines(stdin, lambda: self._collector.stdin_bytes):
                    if self._over or self._cancelled:
                        return
                    self._writer.write(line)
                    await self._writer.drain()
            except (OSError, RuntimeError):
                pass
        self._uploader = asyncio.ensure_future(send())

    async def cancel(self):
        if self._over:
            return
        self._cancelled = True
        if self._uploader is not None and not self._uploader.done():
            self._uploader.cancel()  # write() takes a whole line: cancel lands between two
        try:
            self._writer.write(cancel_line())
            await self._writer.drain()
        except (OSError, RuntimeError):
            pass

    async def events(self):
        try:
            while not self._over:
                line = await self._reader.readline()
                if not line:
                    break
                m = decode(line)
                if m.get("id") == CANCEL_ID:
                    continue
                if self._collector.add(m):
                    self._over = True
                yield m
        except asyncio.CancelledError:
            await self.cancel()  # the remote commands stop; their outcome is still audited
            raise
        finally:
            self.close()

    async def wait(self, on_output=None, raise_on_error=False):
        async for m in self.events():
            if on_output and m.get("type") == "output":
                r = on_output(m.get("host"), m.get("stream"), m["bytes"])
                if asyncio.iscoroutine(r):
                    await r
        return self._collector.finish(raise_on_error)

    def close(self):
        self._over = True
        if self._uploader is not None and not self._uploader.done():
            self._uploader.cancel()
        self._writer.close()


class AsyncClient:
    """AsyncClient("/path/to.sock") (default $REXEC_SOCKET). The same methods as Client, as
    coroutines; stream() is an async generator."""

    def __init__(self, socket_path_=None):
        self.socket_path = socket_path(socket_path_)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return None

    async def _connect(self):
        try:
            return await asyncio.open_unix_connection(self.socket_path, limit=LINE_LIMIT)
        except OSError as e:
            raise RexecError(unreachable(e), 255)

    async def start(self, op, targets, action=None, params=None, **kw):
        reader, writer = await self._connect()
        writer.write(encode(call_request(op, targets, action, params, **kw)))
        try:
            await writer.drain()
        except OSError as e:
            writer.close()
            raise RexecError("rexec serve: %s" % (e.strerror or type(e).__name__), 255)
        call = AsyncCall(reader, writer)
        if streamed(kw.get("stdin")):
            call.upload(kw["stdin"])
        return call

    async def run(self, targets, action, params=None, on_output=None, raise_on_error=False, **kw):
        kw.setdefault("stream", on_output is not None)
        call = await self.start("run", targets, action, params, **kw)
        return await call.wait(on_output, raise_on_error)

    async def put(self, targets, action, local_path, params=None, raise_on_error=False, **kw):
        """Client.put as a coroutine (the file is read in the event loop's thread)."""
        f, params = open_put(local_path, params)
        with f:
            return await self.run(targets, action, params, raise_on_error=raise_on_error,
                                  stdin=f, **kw)

    async def get(self, host, action, local_path, params=None, **kw):
        """Client.get as a coroutine."""
        raise_on_error = kw.pop("raise_on_error", False)
        sink = Sink(local_path)
        try:
            result = await self.run(host, action, params, on_output=sink.on_output, **kw)
        except BaseException:
            sink.abort()
            raise
        r = sink.finish(result)
        if raise_on_error and result.get("exit_status"):
            raise RexecCallError(result)
        return r

    async def eval(self, targets, action, params=None, raise_on_error=False, **kw):
        kw["stream"] = False
        call = await self.start("eval", targets, action, params, **kw)
        return await call.wait(None, raise_on_error)

    async def check(self, targets, raise_on_error=False):
        call = await self.start("check", targets)
        return await call.wait(None, raise_on_error)

    async def stream(self, targets, action, params=None, **kw):
        kw["stream"] = True
        call = await self.start("run", targets, action, params, **kw)
        async for m in call.events():
            yield m

    async def _simple(self, op):
        reader, writer = await self._connect()
        writer.write(encode({"op": op, "id": 1}))
        await writer.drain()
        return await AsyncCall(reader, writer).wait()

    async def ping(self):
        return await self._simple("ping")

    async def hosts(self):
        return (await self._simple("hosts"))["hosts"]

    async def actions(self):
        return (await self._simple("actions"))["actions"]

    async def groups(self):
        return (await self._simple("groups"))["groups"]

    async def reload(self):
        return await self._simple("reload")

    async def metrics(self):
        """serve's metrics as Prometheus text (docs/metrics.md)."""
        return (await self._simple("metrics"))["text"]

    # ---- approvers (serve.clients verbs approvals, approve, deny) ----------------------------

    async def _approval(self, op, challenge_id=None, note=None):
        reader, writer = await self._connect()
        writer.write(encode(approval_request(op, challenge_id, note)))
        await writer.drain()
        return await AsyncCall(reader, writer).wait()

    async def approvals(self, challenge_id=None):
        return (await self._approval("approvals", challenge_id))["approvals"]

    async def approve(self, challenge_id, comment=None):
        return await self._approval("approve", challenge_id, comment)

    async def deny(self, challenge_id, reason=None):
        return await self._approval("deny", challenge_id, reason)

    async def watch(self):
        """An async generator of approval events (as Client.watch)."""
        reader, writer = await self._connect()
        writer.write(encode(approval_request("watch")))
        await writer.drain()
        async for m in AsyncCall(reader, writer).events():
            if m.get("type") == "error":
                raise RexecError(m.get("error") or "error", m.get("exit_status", 70), m)
            if m.get("type") == "event":
                yield strip(m)
