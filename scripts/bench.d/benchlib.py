"""What the benchmarks share (bench.py, serve_ab.py, serve_mem.py): a connection to rexec serve,
and what they measure of a process the same way, its CPU time and its syncs per call. Not a
benchmark itself."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time


def cpu_seconds(pid):
    """user + system CPU time of a process so far (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count_syncs(pid, fn, n, tmp):
    """serve's fsync and fdatasync calls per warm call, counted by `strace -c` over n calls
    (issue #10 item 5: every record is durable before it is acknowledged, and this is what that
    costs in syscalls). None without strace."""
    if shutil.which("strace") is None:
        return None
    out = os.path.join(tmp, "strace-syncs")
    p = subprocess.Popen(["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", out,
                          "-p", str(pid)], stderr=subprocess.DEVNULL)
    for _ in range(200):                        # attached once /proc says it is traced
        with open("/proc/%d/status" % pid) as f:
            if any(l.startswith("TracerPid:") and l.split()[1] != "0" for l in f):
                break
        time.sleep(0.01)
    for _ in range(n):
        fn()
    p.send_signal(signal.SIGINT)
    p.wait()
    counts = {}
    for line in open(out):
        parts = line.split()
        if len(parts) >= 5 and parts[-1] in ("fsync", "fdatasync"):
            counts[parts[-1]] = int(parts[3])
    return counts.get("fsync", 0) / n, counts.get("fdatasync", 0) / n


# ---- rexec serve, spoken directly --------------------------------------------------------------

class ServeClient:
    """One connection to rexec serve, request after request (an orchestrator's view)."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.n = 0

    def run(self, targets, action, expect_hosts):
        self.n += 1
        rid = self.n
        self.s.sendall((json.dumps({"op": "run", "id": rid, "targets": targets,
                                    "action": action}) + "\n").encode())
        results = 0
        while True:
            line = self.f.readline()
            if not line:
                sys.exit("bench: rexec serve closed the connection")
            o = json.loads(line)
            if o.get("id") != rid:
                continue
            if o["type"] == "result":
                if o.get("exit_code") != 0 or "Linux" not in (o.get("stdout") or ""):
                    sys.exit("bench: serve result not ok: %s" % line[:300])
                results += 1
            elif o["type"] == "done":
                if o["exit_status"] != 0 or results != expect_hosts:
                    sys.exit("bench: serve request not ok: %s (%d results)" % (line, results))
                return
            elif o["type"] == "error":
                sys.exit("bench: serve error: %s" % line)


def start_ab_serves(builds, ws, tmp, serves, clients, prepare=None):
    """For each (key, rexec binary) of builds: a copy of workspace ws in tmp (prepare(copy) may
    add to it), a `rexec serve` on a socket of its own, and a ServeClient on it, filled into
    serves (key: Popen) and clients (key: ServeClient) as they start, so that the caller's
    cleanup stops whatever did."""
    for k, binary in builds:
        w = os.path.join(tmp, "ws" + k)
        shutil.copytree(ws, w, symlinks=True)
        if prepare:
            prepare(w)
        sock = os.path.join(tmp, k + ".sock")
        serves[k] = subprocess.Popen([binary, "--workspace", w, "serve", "--socket", sock,
                                      "--idle-timeout", "0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(400):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        clients[k] = ServeClient(sock)


def stop_ab_serves(serves, tmp):
    """Stops what start_ab_serves started and removes tmp."""
    for p in serves.values():
        p.terminate()
        p.wait()
    shutil.rmtree(tmp, ignore_errors=True)
