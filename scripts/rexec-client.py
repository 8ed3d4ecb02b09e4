#!/usr/bin/env python3
"""Run one rexec action through a running `rexec serve` (docs/serve-protocol.md).

Standard library only. The remote stdout/stderr are copied to ours as they arrive (or, with
--json, each host's result object is printed as one line); the exit status is the one
`rexec run` would have. Ctrl-C asks serve to stop the remote commands; a second one leaves.
"""
import argparse, base64, json, os, signal, socket, sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", help="a host, h1,h2 or @group")
    ap.add_argument("action", help="a catalog action")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--stdin", metavar="FILE", help="the command's stdin (- for ours)")
    ap.add_argument("--grant", metavar="ID", help="a grant from `rexec approve`")
    ap.add_argument("--timeout", type=float, metavar="S", help="shorten the action's timeout")
    ap.add_argument("--json", action="store_true", help="print the result objects, not the streams")
    ap.add_argument("--socket", default=os.environ.get("REXEC_SOCKET"),
                    help="the serve socket (default $REXEC_SOCKET)")
    a = ap.parse_args()
    if not a.socket:
        ap.error("--socket PATH or $REXEC_SOCKET is required")
    if any("=" not in p for p in a.param):
        ap.error("--param wants NAME=VALUE")
    req = {"op": "run", "id": 1, "targets": a.targets, "action": a.action,
           "params": dict(p.split("=", 1) for p in a.param), "stream": not a.json}
    if a.stdin:
        data = sys.stdin.buffer.read() if a.stdin == "-" else open(a.stdin, "rb").read()
        req["stdin_base64"] = base64.b64encode(data).decode()
    if a.grant:
        req["grant_id"] = a.grant
    if a.timeout:
        req["timeout_s"] = a.timeout

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(a.socket)
    except OSError as e:
        print(f"rexec-client: cannot reach rexec serve at {a.socket}: {e}", file=sys.stderr)
        return 255
    sock.sendall(json.dumps(req).encode() + b"\n")

    def on_sigint(signum, frame):  # first Ctrl-C: cancel request 1; second: leave
        if on_sigint.sent:
            sys.exit(130)
        on_sigint.sent = True
        sock.sendall(b'{"op": "cancel", "id": 2, "target": 1}\n')
    on_sigint.sent = False
    signal.signal(signal.SIGINT, on_sigint)

    for line in sock.makefile("rb"):
        m = json.loads(line)
        if m["type"] == "output":
            raw = m["data"].encode() if m["data"] is not None else base64.b64decode(m["data_base64"])
            out = sys.stdout if m["stream"] == "stdout" else sys.stderr
            out.buffer.write(raw)
            out.flush()
        elif m["type"] == "result":
            if a.json:
                print(json.dumps(m), flush=True)
            elif m["error"]:
                print(f"rexec: {m['error']}", file=sys.stderr)
        elif m["type"] in ("done", "error"):
            if m["type"] == "error":
                print(f"rexec: {m['error']}", file=sys.stderr)
            return 130 if on_sigint.sent and m["exit_status"] < 130 else m["exit_status"]
    print("rexec-client: rexec serve closed the connection", file=sys.stderr)
    return 255


if __name__ == "__main__":
    sys.exit(main())
