#!/usr/bin/python3
"""Fairness on serve's loop (run by scripts/bench.d/fairness.sh, which builds rexec and starts a
lab): how long a `ping` takes on one serve connection while another connection streams a big
stdout ("stream": true) from a host.

One serve; connection A runs `head -c N /dev/zero` (the flood) and reads its output lines as
fast as it can, in a process of its own; connection B sends a ping every millisecond (open loop, from a
thread) and times each one's round trip, first with nothing else running (idle), then while the
flood streams. Printed:
p50 / p99 / max of the round trips, how many, and the flood's throughput. Per host mode: with
runners (the default) and with "runner": false (one channel per call, src/ssh/exec.c).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

FLOOD = r"""
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall((json.dumps({"op": "run", "id": "flood", "targets": sys.argv[2], "action": "fair.flood",
                       "params": {"n": sys.argv[3]}, "stream": True}) + "\n").encode())
f = s.makefile("rb", buffering=1 << 20)
t0 = time.monotonic()
for line in f:
    if len(line) < 4096 and b'"type":"done"' in line:
        o = json.loads(line)
        print(json.dumps({"seconds": time.monotonic() - t0, "exit_status": o["exit_status"]}))
        sys.exit(0)
    if len(line) < 4096 and b'"type":"accepted"' in line:
        print("accepted", file=sys.stderr, flush=True)
sys.exit("flood: serve closed the connection")
"""


def ping_client(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s, s.makefile("rb")


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def show(label, v, extra=""):
    print("  %-34s n=%6d  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms%s" %
          (label, len(v), statistics.median(v), pct(v, 99), max(v), extra), flush=True)


def warm(path, host):
    """One small call first: the connection (key exchange, authentication: milliseconds of
    computing on the loop) and the runner are up before anything is timed."""
    s, f = ping_client(path)
    s.sendall((json.dumps({"op": "run", "id": "warm", "targets": host, "action": "fair.flood",
                           "params": {"n": "1"}}) + "\n").encode())
    for line in f:
        o = json.loads(line)
        if o["type"] == "done":
            if o["exit_status"] != 0:
                sys.exit("fairness: warm-up call failed")
            break
    s.close()


class Pinger:
    """Open loop: a ping every `every` seconds whatever the answers, from a thread, each timed
    from its send to its pong. A closed loop (ping, wait, ping) would count one slow ping per
    stall and thousands of fast ones in between: the percentiles would hide the stalls."""

    def __init__(self, path, every):
        self.s, self.f = ping_client(path)
        self.every, self.sent, self.lat = every, {}, []
        self.stop = threading.Event()

    def _send(self):
        i, t = 0, time.perf_counter()
        while not self.stop.is_set():
            self.sent[i] = time.perf_counter()
            self.s.sendall(b'{"op":"ping","id":%d}\n' % i)
            i += 1
            t += self.every
            pause = t - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        self.s.sendall(b'{"op":"ping","id":"last"}\n')

    def run_while(self, busy):
        """Pings until busy() is false; returns the round trips in ms."""
        th = threading.Thread(target=self._send)
        th.start()
        try:
            while busy():
                line = self.f.readline()
                o = json.loads(line)
                if o["type"] != "pong":
                    sys.exit("fairness: not a pong: %r" % line[:200])
                self.lat.append((time.perf_counter() - self.sent[o["id"]]) * 1000)
        finally:
            self.stop.set()
            th.join()
        for line in self.f:  # the pongs still on their way, up to the last one
            o = json.loads(line)
            if o["id"] == "last":
                break
            self.lat.append((time.perf_counter() - self.sent[o["id"]]) * 1000)
        return self.lat


def measure(path, host, mib, idle_s, every):
    warm(path, host)
    t_end = time.monotonic() + idle_s
    show("ping, idle", Pinger(path, every).run_while(lambda: time.monotonic() < t_end))
    flood = subprocess.Popen([sys.executable, "-c", FLOOD, path, host, str(mib << 20)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # the flood's "accepted" line: from then on its call is on its way
    flood.stderr.readline()
    v = Pinger(path, every).run_while(lambda: flood.poll() is None)
    out, err = flood.communicate()
    if flood.returncode != 0:
        sys.exit("fairness: flood failed: %s" % err.decode()[-500:])
    r = json.loads(out)
    if r["exit_status"] != 0:
        sys.exit("fairness: flood exit status %s" % r["exit_status"])
    # the first pings may predate the first output bytes: all are counted, none left out
    show("ping while %d MiB stream" % mib, v, "   (flood %.0f MiB/s)" % (mib / r["seconds"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rexec", required=True)
    ap.add_argument("--lab", required=True)
    ap.add_argument("--mib", type=int, default=300)
    ap.add_argument("--idle-s", type=float, default=2.0, help="idle pings for this long")
    ap.add_argument("--every-ms", type=float, default=1.0, help="a ping every N ms")
    ap.add_argument("--modes", default="runner,exec")
    a = ap.parse_args()
    ws = os.path.join(a.lab, "workspace")
    p = os.path.join(ws, "rexec.json")
    c = json.load(open(p))
    c["actions"]["fair.flood"] = {
        "risk": "L0", "command": "head -c {n} /dev/zero", "max_output_bytes": 1 << 30,
        "params": {"n": {"type": "string", "pattern": "^[0-9]{1,12}$"}}}
    c["hosts"]["lab2"]["runner"] = False
    json.dump(c, open(p, "w"), indent=1)
    sock = os.path.join(a.lab, "fair.sock")
    srv = subprocess.Popen([a.rexec, "--workspace", ws, "serve", "--socket", sock, "--log", "off"],
                           stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        for mode in a.modes.split(","):
            host = "lab1" if mode == "runner" else "lab2"
            print("%s (%s):" % (host, "runners" if mode == "runner" else '"runner": false'))
            measure(sock, host, a.mib, a.idle_s, a.every_ms / 1000)
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    main()
