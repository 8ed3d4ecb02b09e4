#!/usr/bin/python3
"""Two builds of `rexec serve` A/B, call by call (run by hand; see docs/PERFORMANCE.md).

  scripts/lab up --hosts 1 --base-port P; eval "$(scripts/lab env)"
  scripts/bench.d/serve_ab.py --a build-base/rexec --b build-release/rexec [--calls 300] [--strace]
                              [--action sys.uname_nos]

Starts one `rexec serve` per build, each on its own copy of the lab's workspace ($REXEC_WORKSPACE)
and its own socket, opens one client connection to each and runs `sys.uname` (or --action
sys.uname_nos: `uname -a; :`, not oneshot, as vm_cpu.py adds it) on lab1 through them
alternately (A B, B A, ...), so both see the same moments of a shared machine. Prints the load
average before and after, each side's median and first quartile, B/A, and each serve's CPU time
per call (user + system, /proc). --strace also counts each serve's fsync and fdatasync calls per
call over 50 more calls. Only loopback: the lab's sshd on 127.0.0.1.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from benchlib import count_syncs, cpu_seconds, start_ab_serves, stop_ab_serves
from vm_cpu import add_action


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def syncs(pid, client, tmp, action, n=50):
    return count_syncs(pid, lambda: client.run("lab1", action, 1), n, tmp) or (0.0, 0.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--strace", action="store_true")
    ap.add_argument("--action", default="sys.uname", choices=("sys.uname", "sys.uname_nos"))
    a = ap.parse_args()
    ws = os.environ.get("REXEC_WORKSPACE")
    if not ws:
        raise SystemExit('serve_ab: set REXEC_WORKSPACE (eval "$(scripts/lab env)")')
    tmp = tempfile.mkdtemp(prefix="rexec-serve-ab.")
    serves, clients = {}, {}
    try:
        start_ab_serves((("A", a.a), ("B", a.b)), ws, tmp, serves, clients, add_action)
        for _ in range(20):  # warm: connections, runners, the spare evidence directory
            for k in clients:
                clients[k].run("lab1", a.action, 1)
        l0 = load()
        t = {"A": [], "B": []}
        c0 = {k: cpu_seconds(p.pid) for k, p in serves.items()}
        for i in range(a.calls):
            for k in (("A", "B") if i % 2 == 0 else ("B", "A")):
                s = time.perf_counter()
                clients[k].run("lab1", a.action, 1)
                t[k].append(time.perf_counter() - s)
        c1 = {k: cpu_seconds(p.pid) for k, p in serves.items()}
        med = {k: statistics.median(v) * 1e3 for k, v in t.items()}
        q1 = {k: statistics.quantiles(v, n=4)[0] * 1e3 for k, v in t.items()}
        print("%s: load %s -> %s; %d calls each; median A %.3f ms, B %.3f ms, B/A %.3f; "
              "p25 A %.3f, B %.3f; serve CPU per call A %.3f ms, B %.3f ms" % (
                  a.action, l0, load(), a.calls, med["A"], med["B"], med["B"] / med["A"], q1["A"], q1["B"],
                  (c1["A"] - c0["A"]) / a.calls * 1e3, (c1["B"] - c0["B"]) / a.calls * 1e3))
        if a.strace and shutil.which("strace"):
            for k in ("A", "B"):
                print("%s: %.2f fsync + %.2f fdatasync per call" % ((k,) + syncs(serves[k].pid,
                                                                          clients[k], tmp, a.action)))
    finally:
        stop_ab_serves(serves, tmp)


if __name__ == "__main__":
    main()
