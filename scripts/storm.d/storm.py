#!/usr/bin/python3
"""The cancel/timeout storm's clients (run by scripts/storm, which builds rexec, starts a lab and
serve): issue #30's goal that an interrupted call is exact.

C clients, each on its own connection to serve, run N calls in all of the action storm.echo,
whose command prints its own value and appends it to a file on the VM (the run log) once it
starts. A random share (--interrupt, default 0.2) of the calls is interrupted: half by a tiny
`timeout_s`, half by a `cancel` sent after a random delay (0-8 ms) once serve accepted it.
Counted at the end, from the results and the run log:
  - wrong: a call whose stdout is not exactly its own value (another call's output, or its own
    twice), or any output of an interrupted call that is not its own value;
  - ran-not-run: a call whose result says executed false but whose value is in the run log;
  - twice: a value that is in the run log more than once;
  - missing / duplicate results: every call must end with exactly one result and one done.
Exit 1 when any of these is not 0.
"""
import argparse
import collections
import json
import os
import random
import socket
import threading
import time

DEADLINE_S = 120


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = collections.Counter()
        self.not_run = set()   # values of calls reported executed false
        self.notes = []

    def add(self, key, n=1):
        with self.lock:
            self.c[key] += n

    def note(self, msg):
        with self.lock:
            if len(self.notes) < 20:
                self.notes.append(msg)


def one_call(a, rnd, sock, f, value, stats):
    req = {"op": "run", "id": value, "targets": a.host, "action": "storm.echo",
           "params": {"v": value}}
    roll = rnd.random()
    how = "normal"
    if roll < a.interrupt / 2:
        how = "timeout"
        req["timeout_s"] = rnd.choice([0.001, 0.002, 0.005, 0.01])
    elif roll < a.interrupt:
        how = "cancel"
    sock.sendall(json.dumps(req).encode() + b"\n")
    results, dones, cancel_sent = [], 0, how != "cancel"
    while True:
        line = f.readline()
        if not line:
            raise ConnectionError("serve closed the connection")
        o = json.loads(line)
        if o.get("id") != value:
            if o.get("type") != "cancelled":
                stats.note("a line for another request on this connection: %s" % line[:200])
                stats.add("foreign_lines")
            continue
        t = o.get("type")
        if t == "accepted" and not cancel_sent:
            time.sleep(rnd.uniform(0, 0.008))
            sock.sendall(json.dumps({"op": "cancel", "id": "k" + value, "target": value})
                         .encode() + b"\n")
            cancel_sent = True
        elif t == "result":
            results.append(o)
        elif t in ("done", "error"):
            dones += 1
            break
    stats.add("calls")
    stats.add(how)
    if len(results) != 1:
        stats.add("missing_results" if not results else "duplicate_results")
        stats.note("%s (%s): %d results" % (value, how, len(results)))
        return
    r = results[0]
    out = r.get("stdout") or ""
    stats.add("status_%s" % r.get("exit_status"))
    stats.add("%s_status_%s" % (how, r.get("exit_status")))
    if r.get("exit_status") not in (0, 124, 130):
        stats.note("%s (%s): exit %s: %s" % (value, how, r.get("exit_status"),
                                                 (r.get("error") or "")[:160]))
    if not r.get("executed", True):
        with stats.lock:
            stats.not_run.add(value)
    if out not in ("", value + "\n"):
        stats.add("wrong")
        stats.note("%s (%s): stdout %r" % (value, how, out[:120]))
    elif how == "normal" and r.get("exit_status") == 0 and out != value + "\n":
        stats.add("wrong")
        stats.note("%s (normal, exit 0): stdout %r" % (value, out[:120]))


def client(idx, a, counts, stats):
    rnd = random.Random(a.seed * 1000 + idx)
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(a.socket)
    sock.settimeout(DEADLINE_S)
    f = sock.makefile("rb")
    for n in range(counts[idx]):
        value = "v%02d%06d%08x" % (idx, n, rnd.getrandbits(32))
        try:
            one_call(a, rnd, sock, f, value, stats)
        except socket.timeout:
            stats.add("hung")
            stats.note("%s: no done within %d s" % (value, DEADLINE_S))
            return
        except (ConnectionError, OSError, ValueError) as e:
            stats.add("lost")
            stats.note("%s: %s" % (value, e))
            return
    sock.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--host", default="lab1")
    p.add_argument("--calls", type=int, default=10000)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--interrupt", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runlog", required=True, help="the file storm.echo appends its value to")
    a = p.parse_args()
    counts = [a.calls // a.clients + (1 if i < a.calls % a.clients else 0)
              for i in range(a.clients)]
    stats = Stats()
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i, a, counts, stats))
               for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.time() - t0
    ran = collections.Counter()
    if os.path.exists(a.runlog):
        with open(a.runlog) as f:
            ran.update(line.strip() for line in f if line.strip())
    ran_not_run = sorted(v for v in stats.not_run if ran[v])
    twice = sorted(v for v, n in ran.items() if n > 1)
    c = stats.c
    print("storm: %d calls (%d normal, %d with a tiny timeout, %d cancelled) from %d clients "
          "in %.1f s, seed %d" % (c["calls"], c["normal"], c["timeout"], c["cancel"],
                                  a.clients, secs, a.seed))
    print("exit statuses: " + ", ".join("%s x%d" % (k[7:], v) for k, v in sorted(c.items())
                                        if k.startswith("status_")))
    for how in ("normal", "timeout", "cancel"):
        pre = how + "_status_"
        print("  %s calls: " % how + ", ".join("%s x%d" % (k[len(pre):], v)
                                               for k, v in sorted(c.items()) if k.startswith(pre)))
    print("reported not run: %d; ran although reported not run: %d; ran twice: %d" % (
        len(stats.not_run), len(ran_not_run), len(twice)))
    print("wrong outputs: %d; missing results: %d; duplicate results: %d; lost: %d; hung: %d; "
          "lines for another request: %d" % (c["wrong"], c["missing_results"],
                                              c["duplicate_results"], c["lost"], c["hung"],
                                              c["foreign_lines"]))
    for v in ran_not_run[:5]:
        stats.note("%s: reported not run, but it ran" % v)
    for v in twice[:5]:
        stats.note("%s: ran %d times" % (v, ran[v]))
    for n in stats.notes[:20]:
        print("  " + n)
    bad = (c["wrong"] + c["missing_results"] + c["duplicate_results"] + c["lost"] + c["hung"] +
           c["foreign_lines"] + len(ran_not_run) + len(twice))
    bad += a.calls - c["calls"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
