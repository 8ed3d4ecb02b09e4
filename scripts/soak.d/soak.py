#!/usr/bin/python3
"""The soak's clients and faults (run by scripts/soak, which builds rexec, starts a lab and serve).

C clients, each on its own connection to serve, run a random mix of actions on random hosts for
the given time, each request with a deadline; a fault thread injects a fault every S seconds
(lab drop, lab freeze + thaw, the runners SIGKILLed, SIGHUP to serve). Prints calls done, calls
failed by exit status, wrong outputs, lost and hung requests, and serve's RSS / descriptors over
time. Exit 1 when a request was lost or hung or an output was wrong.
"""
import argparse
import collections
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time

DEADLINE_S = 120


def proc_rss_fds(pid):
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir("/proc/%d/fd" % pid))


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.done = 0
        self.by_status = collections.Counter()
        self.wrong = self.lost = self.hung = 0
        self.notes = []

    def add(self, **kw):
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)


def check_output(action, result, stdin):
    """A call that ended 0 must have printed exactly what its action prints."""
    out = result.get("stdout") or ""
    if action == "soak.mib":
        return result.get("stdout_bytes") == 1048576 and out == "x" * 1048576
    if action == "soak.stdin":
        return out.startswith(hashlib.sha256(stdin.encode()).hexdigest())
    if action == "soak.sleep":
        return out == "slept\n"
    if action == "soak.echo":
        return out == stdin + "\n"  # stdin holds the call's own value here
    return out.startswith("Linux ")


def client(idx, a, stop, stats):
    rnd = random.Random(idx)
    sock = f = None
    n = 0
    while not stop.is_set():
        if sock is None:
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(a.socket)
            sock.settimeout(DEADLINE_S)
            f = sock.makefile("rb")
        action = rnd.choice(["soak.tiny", "soak.tiny", "soak.mib", "soak.stdin", "soak.sleep",
                             "soak.echo", "soak.echo"])
        host = "lab%d" % rnd.randint(1, a.hosts)
        rid = "c%d-%d" % (idx, n)
        req = {"op": "run", "id": rid, "targets": host, "action": action}
        stdin = ""
        if action == "soak.stdin":
            stdin = "".join(rnd.choice("abcdef\n") for _ in range(rnd.randint(0, 4096)))
            req["stdin"] = stdin
        interrupt = None
        if action == "soak.echo":  # the cancel storm: a fifth stopped at a random moment
            stdin = "v%x" % rnd.getrandbits(48)
            req["params"] = {"v": stdin}
            roll = rnd.random()
            if roll < 0.1:
                req["timeout_s"] = rnd.choice([0.001, 0.005, 0.02])
                interrupt = "timeout"
            elif roll < 0.2:
                interrupt = "cancel"
        n += 1
        try:
            sock.sendall(json.dumps(req).encode() + b"\n")
            result = None
            while True:
                line = f.readline()
                if not line:
                    raise ConnectionError("serve closed the connection")
                r = json.loads(line)
                if r.get("type") == "accepted" and interrupt == "cancel" and r.get("id") == rid:
                    time.sleep(rnd.uniform(0, 0.008))
                    sock.sendall(json.dumps({"op": "cancel", "id": "k" + rid,
                                             "target": rid}).encode() + b"\n")
                elif r.get("type") == "result":
                    result = r
                elif r.get("type") in ("done", "error"):
                    break
            if interrupt and result and (result.get("stdout") or "") not in ("", stdin + "\n"):
                stats.add(wrong=1)
                with stats.lock:
                    stats.notes.append("wrong output of an interrupted call: %r" %
                                       (result.get("stdout") or "")[:80])
            status = result["exit_status"] if result else r.get("exit_status")
            stats.add(done=1)
            with stats.lock:
                stats.by_status[status] += 1
            if status == 0 and result and not check_output(action, result, stdin):
                stats.add(wrong=1)
                with stats.lock:
                    stats.notes.append("wrong output: %s on %s" % (action, host))
        except socket.timeout:
            stats.add(hung=1)
            with stats.lock:
                stats.notes.append("hung: %s on %s (no done within %d s)" % (action, host, DEADLINE_S))
            sock.close()
            sock = None
        except (ConnectionError, OSError, ValueError) as e:
            stats.add(lost=1)
            with stats.lock:
                stats.notes.append("lost: %s on %s: %s" % (action, host, e))
            if sock:
                sock.close()
            sock = None
    if sock:
        sock.close()


def lab(a, *args):
    return subprocess.run([a.lab_cmd, "--dir", a.lab] + list(args), capture_output=True, text=True)


def faults(a, stop, log):
    kinds = ["drop", "freeze", "kill-runners", "reload"]
    k = 0
    while not stop.wait(a.fault_every):
        kind = kinds[k % len(kinds)]
        host = "lab%d" % (k % a.hosts + 1)
        k += 1
        t = time.strftime("%H:%M:%S")
        if kind == "drop":
            lab(a, "drop", host)
        elif kind == "freeze":
            lab(a, "freeze", host)
            stop.wait(5)
            lab(a, "thaw", host)
        elif kind == "kill-runners":
            ps = lab(a, "ps", r"^bash -c LC_ALL=C IFS= read -r -N [0-9]+ __rx_s ").stdout.split("\n")
            for line in ps:
                if line.strip():
                    try:
                        os.kill(int(line.split()[0]), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
            host = "all"
        else:
            os.kill(a.serve_pid, signal.SIGHUP)
            host = "serve"
        log.append("%s %s %s" % (t, kind, host))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--serve-pid", type=int, required=True)
    p.add_argument("--lab", required=True)
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=int, default=600)
    p.add_argument("--fault-every", type=float, default=30)
    a = p.parse_args()
    a.lab_cmd = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lab")
    stats, stop, fault_log = Stats(), threading.Event(), []
    threads = [threading.Thread(target=client, args=(i, a, stop, stats)) for i in range(a.clients)]
    for t in threads:
        t.start()
    time.sleep(min(20, a.seconds / 10))             # warm-up: connections and runners up
    start = proc_rss_fds(a.serve_pid)
    samples = [(0, start)]
    ft = threading.Thread(target=faults, args=(a, stop, fault_log))
    ft.start()
    t0 = time.time()
    while time.time() - t0 < a.seconds:
        time.sleep(min(60, a.seconds / 10))
        samples.append((int(time.time() - t0), proc_rss_fds(a.serve_pid)))
    stop.set()
    for t in threads:
        t.join(DEADLINE_S + 10)
    ft.join(30)
    end = samples[-1][1]                           # the last sample with the clients still on
    after = proc_rss_fds(a.serve_pid)
    failed = sum(v for k, v in stats.by_status.items() if k != 0)
    print("clients: %d, %d s, a fault every %g s (%d faults: %s)" % (
        a.clients, a.seconds, a.fault_every, len(fault_log),
        ", ".join(sorted("%s x%d" % kv for kv in collections.Counter(
            l.split()[1] for l in fault_log).items()))))
    print("calls done: %d, ok: %d, failed: %d (by exit status: %s)" % (
        stats.done, stats.by_status.get(0, 0), failed,
        ", ".join("%s x%d" % (k, v) for k, v in sorted(stats.by_status.items()) if k != 0) or "none"))
    print("wrong outputs: %d, lost: %d, hung: %d" % (stats.wrong, stats.lost, stats.hung))
    print("serve RSS: %d KiB after warm-up, %d KiB at the end; descriptors: %d -> %d "
          "(%d KiB and %d descriptors once the clients had left)" % (
              start[0], end[0], start[1], end[1], after[0], after[1]))
    print("serve RSS over time (s: KiB/fds): " + ", ".join(
        "%d: %d/%d" % (s, r, fds) for s, (r, fds) in samples))
    for n in stats.notes[:20]:
        print("  " + n)
    return 1 if stats.lost or stats.hung or stats.wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
