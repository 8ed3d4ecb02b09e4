#!/usr/bin/python3
"""serve's memory and descriptors per call (run by scripts/bench.d/serve_mem.sh, which builds
rexec and starts a lab).

One serve, one client connection. Completed calls: --warm calls, then VmRSS and open fds of the
serve process, then --calls more (--inflight at a time), then both again: growth per 1,000
calls. Cancelled while queued: lab2 has one channel ("max_channels": 1, "max_connections": 1,
"runner": false) held by a long call; --batch calls are queued behind it, serve's fds counted
while they wait (fds held per queued call), then cancelled; after --warm of those, RSS growth
per 1,000 cancelled calls over --calls more. Linux /proc only.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

from benchlib import ServeClient


def status(pid):
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir("/proc/%d/fd" % pid))


class Client(ServeClient):
    def send(self, o):
        self.s.sendall((json.dumps(o) + "\n").encode())

    def until(self, pred):
        while True:
            line = self.f.readline()
            if not line:
                sys.exit("serve_mem: serve closed the connection")
            o = json.loads(line)
            if pred(o):
                return o

    def runs(self, n, host, action, inflight):
        """n calls, inflight at a time; each must end with exit status 0."""
        sent = done = 0
        while done < n:
            while sent < n and sent - done < inflight:
                self.n += 1
                self.send({"op": "run", "id": self.n, "targets": host, "action": action})
                sent += 1
            o = self.until(lambda o: o["type"] in ("done", "error"))
            if o["type"] == "error" or o["exit_status"] != 0:
                sys.exit("serve_mem: call failed: %s" % o)
            done += 1


def completed(c, pid, warm, calls, inflight):
    c.runs(warm, "lab1", "mem.true", inflight)
    rss0, fd0 = status(pid)
    t = time.monotonic()
    c.runs(calls, "lab1", "mem.true", inflight)
    rss1, fd1 = status(pid)
    print("completed calls: %d after %d warm-up (%d in flight), %.1f s: VmRSS %d -> %d KiB "
          "(%+.1f KiB per 1,000 calls), fds %d -> %d" %
          (calls, warm, inflight, time.monotonic() - t, rss0, rss1,
           (rss1 - rss0) * 1000.0 / calls, fd0, fd1), flush=True)


def queued_round(c, pid, batch):
    """batch calls queued behind the long one, counted, cancelled; returns fds held per call."""
    ids = []
    base = status(pid)[1]
    for _ in range(batch):
        c.n += 1
        ids.append(c.n)
        c.send({"op": "run", "id": c.n, "targets": "lab2", "action": "mem.true"})
    for _ in ids:
        c.until(lambda o: o["type"] == "accepted")
    # an accepted call has reached the pool's queue (rexec_call_start ran) once its intent
    # record is on disk: a ping after the batch comes back after those records' callbacks
    c.send({"op": "ping", "id": "p"})
    c.until(lambda o: o["type"] == "pong")
    held = status(pid)[1] - base
    for i in ids:
        c.send({"op": "cancel", "id": "c%d" % i, "target": i})
    left = set(ids)
    while left:
        o = c.until(lambda o: o["type"] == "done")
        left.discard(o["id"])
    return held / batch


def cancelled(c, pid, warm, calls, batch):
    c.n += 1
    c.send({"op": "run", "id": "long", "targets": "lab2", "action": "mem.long"})
    c.until(lambda o: o["type"] == "accepted" and o["id"] == "long")
    fds = [queued_round(c, pid, batch) for _ in range(max(1, warm // batch))]
    rss0, fd0 = status(pid)
    for _ in range(max(1, calls // batch)):
        fds.append(queued_round(c, pid, batch))
    rss1, fd1 = status(pid)
    n = max(1, calls // batch) * batch
    print("cancelled while queued: %d after %d warm-up, %d queued at a time: VmRSS %d -> %d KiB "
          "(%+.1f KiB per 1,000 calls), fds %d -> %d; fds held per queued call %.2f (max %.2f)" %
          (n, warm, batch, rss0, rss1, (rss1 - rss0) * 1000.0 / n, fd0, fd1,
           sum(fds) / len(fds), max(fds)), flush=True)
    c.send({"op": "cancel", "id": "cl", "target": "long"})
    c.until(lambda o: o["type"] == "done" and o["id"] == "long")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rexec", required=True)
    ap.add_argument("--lab", required=True)
    ap.add_argument("--warm", type=int, default=500)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--serve-wrapper", default="", help="e.g. 'heaptrack -o FILE'")
    a = ap.parse_args()
    ws = os.path.join(a.lab, "workspace")
    p = os.path.join(ws, "rexec.json")
    cf = json.load(open(p))
    cf["actions"]["mem.true"] = {"risk": "L0", "command": "true"}
    cf["actions"]["mem.long"] = {"risk": "L0", "command": "sleep 3000", "timeout_s": 3600}
    cf["hosts"]["lab2"].update({"runner": False, "max_channels": 1, "max_connections": 1})
    json.dump(cf, open(p, "w"), indent=1)
    sock = os.path.join(a.lab, "mem.sock")
    cmd = a.serve_wrapper.split() + [a.rexec, "--workspace", ws, "serve", "--socket", sock,
                                     "--log", "off"]
    srv = subprocess.Popen(cmd, stderr=open(os.path.join(a.lab, "serve_mem.err"), "w"))
    pid = None
    try:
        for _ in range(3000):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        c = Client(sock)
        c.send({"op": "ping", "id": "pid"})
        pid = c.until(lambda o: o["type"] == "pong")["pid"]
        completed(c, pid, a.warm, a.calls, a.inflight)
        cancelled(c, pid, a.warm, a.calls, a.batch)
    finally:
        # serve itself, not a wrapper's shell (heaptrack's would leave serve running)
        if pid:
            os.kill(pid, signal.SIGTERM)
        else:
            srv.terminate()
        srv.wait()


if __name__ == "__main__":
    main()
