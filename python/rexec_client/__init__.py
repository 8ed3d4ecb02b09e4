"""rexec_client: talk to a running `rexec serve` (docs/serve-protocol.md) from Python.

Standard library only. Two APIs with the same methods:

    from rexec_client import Client, AsyncClient, RexecError

    c = Client("/run/user/1000/rexec.sock")          # or $REXEC_SOCKET
    r = c.run("lab1", "sys.echo", {"text": "hi"})     # {"exit_status": 0, "hosts": [...], "results": [...]}
    print(r["results"][0]["stdout"])

    async with AsyncClient() as ac:                   # asyncio: many calls at once
        rs = await asyncio.gather(*(ac.run("@lab", "sys.uname") for _ in range(10)))

Results are dicts (the `result` objects of the protocol, which are those of `rexec run --json`).
A request refused as a whole (unknown host or action, bad parameter, serve unreachable) raises
RexecError with .exit_status (the status `rexec run` would exit with). See docs/python-client.md.
"""
from ._proto import RexecError, RexecCallError
from .sync import Client, Call
from .aio import AsyncClient, AsyncCall

__all__ = ["Client", "Call", "AsyncClient", "AsyncCall", "RexecError", "RexecCallError"]
__version__ = "0.1.0"
