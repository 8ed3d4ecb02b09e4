#!/usr/bin/python3
"""VM CPU per warm call, two builds A/B, round by round (run by hand; see docs/PERFORMANCE.md).

  scripts/lab up --hosts 1 --base-port P; eval "$(scripts/lab env)"
  scripts/bench.d/vm_cpu.py --a build-base/rexec --b build-rel/rexec [--calls 200] [--rounds 6]

Starts one `rexec serve` per build, each on its own copy of the lab's workspace and socket, and
runs warm calls on lab1 through one of them at a time: for each action, rounds of --calls calls,
A B, B A, ... Between rounds it sums the CPU time (user + system, with that of reaped children)
of the lab's sshd listener and every process under it: sshd's session processes, the runner,
its slots, the calls' shells and commands: everything the calls cost "on the VM". Prints, per
action, each side's CPU per call (median of its rounds), B/A, and the load before and after.
Actions: sys.uname (`uname -a`, oneshot) and sys.uname_nos (`uname -a; :`, not oneshot), added
to the copies of the workspace. Only loopback: the lab's sshd on 127.0.0.1.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

from benchlib import start_ab_serves, stop_ab_serves

TCK = os.sysconf("SC_CLK_TCK")


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def tree_cpu(root):
    """CPU seconds of root and all its live descendants, with their reaped children's."""
    kids, cpu = {}, {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append(int(p))
        cpu[int(p)] = sum(int(x) for x in fields[11:15])
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += cpu.get(p, 0)
        todo.extend(kids.get(p, []))
    return total / TCK


def lab_sshd():
    """The pid of lab1's sshd listener (`scripts/lab status`, $REXEC_LAB_DIR)."""
    out = subprocess.run([os.path.join(os.path.dirname(__file__), "..", "lab"), "status"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():  # "lab1   up    127.0.0.1:22220  pid 1234"
        w = line.split()
        if w and w[0] == "lab1" and "pid" in w:
            return int(w[w.index("pid") + 1])
    raise SystemExit("vm_cpu: no lab1 in `scripts/lab status`: %r" % out)


def add_action(ws):
    path = os.path.join(ws, "rexec.json")
    with open(path) as f:
        c = json.load(f)
    a = dict(c["actions"]["sys.uname"])
    a["command"] = "uname -a; :"
    c["actions"]["sys.uname_nos"] = a
    with open(path, "w") as f:
        json.dump(c, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=6)
    a = ap.parse_args()
    ws = os.environ.get("REXEC_WORKSPACE")
    if not ws:
        raise SystemExit('vm_cpu: set REXEC_WORKSPACE (eval "$(scripts/lab env)")')
    sshd = lab_sshd()
    tmp = tempfile.mkdtemp(prefix="rexec-vm-cpu.")
    serves, clients = {}, {}
    try:
        start_ab_serves((("A", a.a), ("B", a.b)), ws, tmp, serves, clients, add_action)
        l0 = load()
        for action in ("sys.uname", "sys.uname_nos"):
            per = {"A": [], "B": []}
            for k in clients:  # warm: connection, runner, slots in their steady state
                for _ in range(20):
                    clients[k].run("lab1", action, 1)
            for r in range(a.rounds):
                for k in (("A", "B") if r % 2 == 0 else ("B", "A")):
                    c0 = tree_cpu(sshd)
                    for _ in range(a.calls):
                        clients[k].run("lab1", action, 1)
                    per[k].append((tree_cpu(sshd) - c0) / a.calls * 1e3)
            m = {k: statistics.median(v) for k, v in per.items()}
            print("%s: VM CPU per call A %.3f ms, B %.3f ms, B/A %.3f (rounds A %s, B %s)" % (
                action, m["A"], m["B"], m["B"] / m["A"],
                " ".join("%.2f" % x for x in per["A"]), " ".join("%.2f" % x for x in per["B"])))
        print("load %s -> %s; %d rounds of %d calls each side" % (l0, load(), a.rounds, a.calls))
    finally:
        stop_ab_serves(serves, tmp)


if __name__ == "__main__":
    main()
