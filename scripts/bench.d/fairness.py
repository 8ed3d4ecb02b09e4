#!/usr/bin/python3
"""Fairness on serve's loop (run by scripts/bench.d/fairness.sh, which builds rexec and starts a
lab): how long a `ping` takes on one serve connection while another connection streams a big
stdout ("stream": true) from a host.

One serve; connection A runs `head -c N /dev/zero` (the flood) and reads its output lines as
fast as it can, in a process of its own; connection B sends pings one after the other and times
each round trip, first with nothing else running (idle), then while the flood streams. Printed:
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


def one_ping(s, f, i):
    t = time.perf_counter()
    s.sendall(b'{"op":"ping","id":%d}\n' % i)
    line = f.readline()
    dt = time.perf_counter() - t
    if b'"pong"' not in line:
        sys.exit("fairness: not a pong: %r" % line[:200])
    return dt * 1000


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


def measure(path, host, mib, idle_pings):
    warm(path, host)
    s, f = ping_client(path)
    show("ping, idle", [one_ping(s, f, i) for i in range(idle_pings)])
    flood = subprocess.Popen([sys.executable, "-c", FLOOD, path, host, str(mib << 20)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # the flood's "accepted" line: from then on its call is on its way
    flood.stderr.readline()
    v, at = [], []
    i = 0
    t0 = time.perf_counter()
    while flood.poll() is None:
        at.append(time.perf_counter() - t0)
        v.append(one_ping(s, f, i))
        i += 1
    if os.environ.get("FAIR_DEBUG"):
        worst = sorted(range(len(v)), key=lambda k: -v[k])[:8]
        print("  worst:", ", ".join("%.1f ms at %.3f s" % (v[k], at[k]) for k in worst),
              "of %.3f s" % (time.perf_counter() - t0))
    out, err = flood.communicate()
    if flood.returncode != 0:
        sys.exit("fairness: flood failed: %s" % err.decode()[-500:])
    r = json.loads(out)
    if r["exit_status"] != 0:
        sys.exit("fairness: flood exit status %s" % r["exit_status"])
    # the first pings may predate the first output bytes: all are counted, none left out
    show("ping while %d MiB stream" % mib, v,
         "   (flood %.0f MiB/s)" % (mib / r["seconds"]))
    s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rexec", required=True)
    ap.add_argument("--lab", required=True)
    ap.add_argument("--mib", type=int, default=300)
    ap.add_argument("--idle-pings", type=int, default=2000)
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
            measure(sock, host, a.mib, a.idle_pings)
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    main()
