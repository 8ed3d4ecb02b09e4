"""rexec-client: run one rexec action through a running `rexec serve` (docs/serve-protocol.md).

The remote stdout/stderr are copied to ours as they arrive (or, with --json, each host's result
object is printed as one line); the exit status is the one `rexec run` would have. Ctrl-C asks
serve to stop the remote commands; a second one leaves.
"""
import argparse
import json
import os
import signal
import sys

from ._proto import RexecError, mask
from .sync import Client


class _Parser(argparse.ArgumentParser):
    """argparse, whose messages quote the argument at fault ("invalid float value: '...'"): the
    caller's own words long enough to be a secret are masked, and a usage error exits 64 like
    rexec's."""

    def __init__(self, argv, **kw):
        super().__init__(**kw)
        self._argv = argv

    def error(self, message):
        self.print_usage(sys.stderr)
        words = set(self._argv)
        for w in self._argv:  # --opt=VALUE and NAME=VALUE: the value too
            words.update(w.split("=", 1))
        print("%s: error: %s" % (self.prog, mask(message, words)), file=sys.stderr)
        sys.exit(64)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = _Parser(argv, prog="rexec-client", description=__doc__.splitlines()[0])
    ap.add_argument("targets", help="a host, h1,h2 or @group")
    ap.add_argument("action", help="a catalog action")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--stdin", metavar="FILE", help="the command's stdin (- for ours)")
    ap.add_argument("--grant", metavar="ID", help="a grant from `rexec approve`")
    ap.add_argument("--timeout", type=float, metavar="S", help="shorten the action's timeout")
    ap.add_argument("--json", action="store_true", help="print the result objects, not the streams")
    ap.add_argument("--socket", default=os.environ.get("REXEC_SOCKET"),
                    help="the serve socket (default $REXEC_SOCKET)")
    a = ap.parse_args(argv)
    if not a.socket:
        ap.error("--socket PATH or $REXEC_SOCKET is required")
    if any("=" not in p for p in a.param):
        ap.error("--param wants NAME=VALUE")
    stdin = None  # a file object: streamed to serve in pieces, never read whole
    if a.stdin:
        try:
            stdin = sys.stdin.buffer if a.stdin == "-" else open(a.stdin, "rb")
        except OSError as e:
            print("rexec-client: --stdin %s: %s" % (mask(a.stdin, [a.stdin]), e.strerror),
                  file=sys.stderr)
            return 65
    try:
        call = Client(a.socket).start("run", a.targets, a.action,
                                      dict(p.split("=", 1) for p in a.param), stdin=stdin,
                                      grant_id=a.grant, timeout_s=a.timeout, stream=not a.json)
    except RexecError as e:
        print("rexec-client: %s" % e, file=sys.stderr)
        return e.exit_status

    cancelled = []

    def on_sigint(signum, frame):  # first Ctrl-C: cancel; second: leave
        if cancelled:
            sys.exit(130)
        cancelled.append(1)
        call.cancel()
    signal.signal(signal.SIGINT, on_sigint)

    # Whole lines per host and stream: with several hosts, their output arrives in pieces that
    # would otherwise interleave mid-line. A partial line is written when its call ends.
    partial = {}

    def write(stream, data):
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.buffer.write(data)
        out.flush()

    def on_output(host, stream, data):
        buf = partial.get((host, stream), b"") + data
        cut = buf.rfind(b"\n") + 1
        if cut:
            write(stream, buf[:cut])
        partial[(host, stream)] = buf[cut:]

    def flush_host(host):
        for (h, stream), rest in list(partial.items()):
            if h == host and rest:
                write(stream, rest)
                partial[(h, stream)] = b""

    try:
        for m in call.events():
            if m["type"] == "output":
                on_output(m.get("host"), m["stream"], m["bytes"])
            elif m["type"] == "result":
                flush_host(m.get("host"))
                if a.json:
                    print(json.dumps(m), flush=True)
                elif m.get("error"):
                    print("rexec: %s" % m["error"], file=sys.stderr)
        for host in {h for h, _ in partial}:
            flush_host(host)
        status = call.wait()["exit_status"]
    except RexecError as e:
        print("rexec: %s" % e, file=sys.stderr)
        status = e.exit_status
    return 130 if cancelled and status < 130 else status


if __name__ == "__main__":
    sys.exit(main())
