#!/usr/bin/env python3
"""2,000 sequential calls on one runner (issue #10's goal): `rexec serve` on a one-host lab, one
client connection sending sys.uname call after call. Every --every calls it samples serve's RSS
and open fds and the processes the lab's sshd has started (`scripts/lab ps`): the runner must be
the same one throughout (the same runner pid), the processes on the VM between calls only the
runner's, and nothing left once serve has stopped.

Run by `scripts/bench --runner-soak [--calls N]`, which starts the lab; not a test.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def vm_procs(lab_script, lab_dir):
    out = subprocess.run([lab_script, "--dir", lab_dir, "ps"], capture_output=True, text=True)
    return [l for l in out.stdout.splitlines() if l.strip()]


def runner_pids(procs):
    """The runners' own shells (`bash -c 'LC_ALL=C IFS= read -r -N ...'`; their parent is sshd's
    session process, not a runner)."""
    pids = set()
    for line in procs:
        pid, _, cmd = line.partition(" ")
        if re.match(r"-?bash -c LC_ALL=C IFS= read -r -N [0-9]+ __rx_s ", cmd.strip()):
            pids.add(int(pid))
    tops = set()
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if ppid not in pids:
            tops.add(p)
    return tops


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rexec", required=True)
    ap.add_argument("--lab", required=True)
    ap.add_argument("--lab-script", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--every", type=int, default=200)
    a = ap.parse_args()
    ws = os.path.join(a.lab, "workspace")
    tmp = tempfile.mkdtemp(prefix="rexec-runner-soak.")
    sock = os.path.join(tmp, "serve.sock")
    serve = subprocess.Popen([a.rexec, "--workspace", ws, "serve", "--socket", sock,
                              "--idle-timeout", "0", "--log", "off"], stderr=subprocess.DEVNULL)
    for _ in range(500):
        if os.path.exists(sock):
            break
        time.sleep(0.01)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    f = s.makefile("rb")

    def call(i):
        s.sendall((json.dumps({"op": "run", "id": i, "targets": "lab1",
                               "action": "sys.uname"}) + "\n").encode())
        ok = False
        while True:
            o = json.loads(f.readline())
            if o.get("type") == "result":
                ok = o.get("exit_code") == 0 and "Linux" in (o.get("stdout") or "")
            if o.get("type") == "done":
                return ok and o.get("exit_status") == 0

    samples, bad, lat, runners = [], 0, [], set()
    call(0)                                   # the connection and its first runner
    for i in range(1, a.calls + 1):
        t = time.perf_counter()
        bad += not call(i)
        lat.append((time.perf_counter() - t) * 1000)
        if i % a.every == 0 or i == 1:
            procs = vm_procs(a.lab_script, a.lab)
            runners |= runner_pids(procs)
            samples.append((i, rss_kib(serve.pid), fds(serve.pid), len(procs)))
    s.close()
    serve.terminate()
    serve.wait()
    left = []
    for _ in range(100):                      # the VM side ends once the channel is closed
        left = vm_procs(a.lab_script, a.lab)
        if not left:
            break
        time.sleep(0.05)

    print("runner soak: %d sequential calls of sys.uname through serve on one connection"
          % a.calls)
    print("  calls not ok: %d; median %.1f ms, p99 %.1f ms" % (
        bad, statistics.median(lat), sorted(lat)[int(len(lat) * 0.99) - 1]))
    print("  %8s %10s %6s %12s" % ("call", "RSS KiB", "fds", "VM procs"))
    for i, rss, nfd, np in samples:
        print("  %8d %10d %6d %12d" % (i, rss, nfd, np))
    print("  runners seen (pids of their bash -s): %s" % (sorted(runners) or "none"))
    counts = [np for _, _, _, np in samples]
    print("  VM processes between calls (the runner and its slots): %d to %d"
          % (min(counts), max(counts)))
    print("  VM processes left after serve stopped: %d%s" % (
        len(left), "" if not left else " " + "; ".join(left[:5])))
    first, last = samples[0], samples[-1]
    print("  RSS %d -> %d KiB (%+d), fds %d -> %d" % (first[1], last[1], last[1] - first[1],
                                                       first[2], last[2]))
    return 0 if bad == 0 and not left and len(runners) == 1 and last[2] == first[2] else 1


if __name__ == "__main__":
    sys.exit(main())
