#!/usr/bin/python3
"""Reloads under load (issue #30's goal, not a test; run by scripts/bench.d/reloads.sh): C clients
call sys.uname through one `rexec serve` while another connection sends N reloads, one after the
other (every 10th with a host entry changed, so that retired connections must close too).
Prints serve's fds, RSS and the established connections to the lab's sshd before the reloads
(after a warm-up) and after them, and the calls done and failed. Exit 1 when fds or connections
grew or a call failed."""
import argparse
import json
import os
import socket
import subprocess
import threading
import time


def conn(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(120)
    s.connect(path)
    return s, s.makefile("rb")


def fds_rss(pid):
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return len(os.listdir("/proc/%d/fd" % pid)), rss


def established(ports):
    out = subprocess.run(["ss", "-Htn", "state", "established"], capture_output=True,
                         text=True).stdout
    return sum(1 for l in out.splitlines() if any(l.split()[3].endswith(":%d" % p) for p in ports)
               if len(l.split()) > 3)


def client(path, stop, stats, idx):
    s, f = conn(path)
    n = 0
    while not stop.is_set():
        rid = "c%d-%d" % (idx, n)
        n += 1
        s.sendall((json.dumps({"op": "run", "id": rid, "targets": "lab%d" % (n % 2 + 1),
                               "action": "sys.uname"}) + "\n").encode())
        while True:
            o = json.loads(f.readline())
            if o.get("id") == rid and o.get("type") in ("done", "error"):
                break
        with stats["lock"]:
            stats["done"] += 1
            if o.get("exit_status") != 0:
                stats["failed"] += 1
    s.close()


def edit(ws, flip):
    path = os.path.join(ws, "rexec.json")
    c = json.load(open(path))
    c["hosts"]["lab2"]["max_channels"] = 5 if flip else 4
    tmp = path + ".tmp"
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(c, f, indent=2)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--serve-pid", type=int, required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--ports", required=True, help="the lab's sshd ports, comma-separated")
    p.add_argument("--reloads", type=int, default=1000)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--settle", type=float, default=5, help="seconds before the second count")
    a = p.parse_args()
    ports = [int(x) for x in a.ports.split(",")]
    stats = {"lock": threading.Lock(), "done": 0, "failed": 0}
    stop = threading.Event()
    threads = [threading.Thread(target=client, args=(a.socket, stop, stats, i))
               for i in range(a.clients)]
    for t in threads:
        t.start()
    while stats["done"] < 200:                      # warm-up: connections and runners up
        time.sleep(0.1)
    s, f = conn(a.socket)
    for i in range(10):                               # warm the reload path too
        s.sendall(b'{"op": "reload"}\n')
        json.loads(f.readline())
    fds0, rss0 = fds_rss(a.serve_pid)
    est0 = established(ports)
    done0 = stats["done"]
    t0 = time.time()
    bad = 0
    for i in range(a.reloads):
        if i % 10 == 0:
            edit(a.workspace, (i // 10) % 2)
        s.sendall(b'{"op": "reload"}\n')
        if json.loads(f.readline()).get("type") != "reloaded":
            bad += 1
    secs = time.time() - t0
    time.sleep(a.settle)                              # retired connections close once idle
    fds1, rss1 = fds_rss(a.serve_pid)
    est1 = established(ports)
    stop.set()
    for t in threads:
        t.join()
    print("reloads: %d in %.1f s under %d clients (%d refused); calls meanwhile: %d, failed: %d"
          % (a.reloads, secs, a.clients, bad, stats["done"] - done0, stats["failed"]))
    print("serve fds: %d -> %d; RSS: %d -> %d KiB; connections to the lab: %d -> %d"
          % (fds0, fds1, rss0, rss1, est0, est1))
    return 1 if fds1 > fds0 + 4 or est1 > est0 + 2 or stats["failed"] or bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
