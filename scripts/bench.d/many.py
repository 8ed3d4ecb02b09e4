#!/usr/bin/env python3
"""Many hosts on one controller (issue #13 item 5, issue #34): a workspace of N host entries spread
over the lab's sshds (N / lab hosts entries on each port, every entry its own pooled connection),
one `rexec serve`, and the fan-out of sys.uname to all N: cold (the first request opens every
connection), then warm; against asyncssh on N open connections in one process. Prints each
round's time (and serve's CPU time in it), the ratios of the same run, serve's RSS before and
after the connections, its RSS per warm connection and its open fds.
serve starts a host's runner after the host's first call; the warm rounds begin once every
runner is up (serve's rexec_runners gauge, polled with {"op": "metrics"}), as asyncssh's begin
once its connections are open; how long that took is printed with the cold round.

The lab's sshds, runners and commands share the controller's CPUs: the workspace's
limits.connect_timeout_s is raised (--connect-timeout, default 120 s) so that a burst of 1,000+
handshakes or runner starts on a 2-CPU machine is measured, not cut at the 10 s default.
asyncssh waits as long as it takes (its login timeout is 2 minutes).

A run removes its workspace (N hosts x (rounds + 1) evidence directories of 4 files) at its
end and leaves the time in STAMP; a run that starts less than AGE_S (370 s) after that waits
until then before its first round, and says so. On ext4 without a journal (this machine kind)
a new file skips every inode freed in the last 60 s (360 s while its inode-table block is dirty,
and a new inode in that block dirties it again), reading each: right after a run removed
~56,000 files, serve's evidence files took 3-5 times its CPU for the next run's rounds; waiting
180 s after a sync, or dropping the caches, was not enough (docs/PERFORMANCE.md).

Run by `scripts/bench --many [--hosts-n N]`, which starts the lab; not a test. Traffic goes to
127.0.0.1 only.
"""
import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")
import asyncssh  # noqa: E402


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def cpu_s(pid):
    """utime + stime of pid, in seconds"""
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


# when the last run removed its workspace (see above)
STAMP = os.path.join(tempfile.gettempdir(), ".rexec-bench-many.removed")
AGE_S = 370


def wait_for_removal_age():
    try:
        with open(STAMP) as f:
            left = float(f.read().split()[0]) + AGE_S - time.time()
    except (OSError, ValueError, IndexError):
        return
    if 0 < left <= AGE_S:
        print("  waiting %.0f s: the last run removed its workspace %.0f s ago, and until %d s "
              "have passed new files on ext4 without a journal skip the inodes it freed, slowly "
              "(docs/PERFORMANCE.md, \"Many hosts and one shared /tmp\")"
              % (left, AGE_S - left, AGE_S), flush=True)
        time.sleep(left)


def remove_workspace(tmp):
    shutil.rmtree(tmp, ignore_errors=True)
    with open(STAMP, "w") as f:
        f.write("%.3f\n" % time.time())


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Serve:
    def __init__(self, rexec, ws, tmp):
        self.sock = os.path.join(tmp, "serve.sock")
        self.err = open(os.path.join(tmp, "serve.err"), "w+")
        self.p = subprocess.Popen([rexec, "--workspace", ws, "serve", "--socket", self.sock,
                                   "--idle-timeout", "0", "--log", "off"],
                                  stderr=self.err)
        for _ in range(3000):
            if os.path.exists(self.sock) or self.p.poll() is not None:
                break
            time.sleep(0.01)
        if not os.path.exists(self.sock):
            self.err.seek(0)
            sys.exit("many: serve did not start: %s" % self.err.read()[-2000:])
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(self.sock)
        self.f = self.s.makefile("rb")
        self.n = 0
        self.errors = {}

    def fan(self, n_hosts):
        self.n += 1
        self.s.sendall((json.dumps({"op": "run", "id": self.n, "targets": "@many",
                                    "action": "sys.uname"}) + "\n").encode())
        ok = 0
        while True:
            o = json.loads(self.f.readline())
            if o.get("type") == "result" and o.get("exit_code") == 0:
                ok += 1
            elif o.get("type") == "result":
                why = "%s: %s" % (o.get("exit_status"), (o.get("error") or "")[:120])
                why = why.replace(o.get("host") or "?", "HOST")
                self.errors[why] = self.errors.get(why, 0) + 1
            if o.get("type") == "done":
                return ok

    def runners(self):
        """serve's rexec_runners gauge, by state ({"op": "metrics"}, docs/metrics.md)"""
        self.n += 1
        self.s.sendall((json.dumps({"op": "metrics", "id": self.n}) + "\n").encode())
        while True:
            o = json.loads(self.f.readline())
            if "text" in o:
                break
        by = {}
        for line in o["text"].splitlines():
            if line.startswith('rexec_runners{state="'):
                state, value = line[len('rexec_runners{state="'):].split('"}')
                by[state] = int(float(value))
        return by

    def wait_runners(self, n_hosts, limit_s):
        """Waits until every host's runner is up (serve starts one after a host's first call:
        docs/remote-contract.md), as asyncssh's figures start once its connections are open.
        Returns the seconds it took and the last counts."""
        t = time.perf_counter()
        while True:
            by = self.runners()
            if by.get("idle", 0) + by.get("busy", 0) >= n_hosts and not by.get("starting"):
                break
            if time.perf_counter() - t > limit_s:
                break
            time.sleep(0.5)
        return time.perf_counter() - t, by

    def stop(self):
        self.s.close()
        self.p.terminate()
        self.p.wait()


async def asy_open(ports, user, key, kh):
    # asyncssh does not retry a connection sshd dropped (MaxStartups, or a burst right after
    # serve's connections went): 100 handshakes at a time, each tried up to 5 times. Only the
    # rounds on the open connections are compared.
    sem = asyncio.Semaphore(100)

    async def one(p):
        async with sem:
            for k in range(5):
                try:
                    return await asyncssh.connect("127.0.0.1", port=p, username=user,
                                                  client_keys=[key], known_hosts=kh,
                                                  agent_path=None, config=None)
                except (OSError, asyncssh.Error):
                    if k == 4:
                        raise
                    await asyncio.sleep(0.5 * (k + 1))
    return await asyncio.gather(*(one(p) for p in ports))


async def asy_fan(conns, errors):
    rs = await asyncio.gather(*(c.run("uname -a", check=True) for c in conns),
                              return_exceptions=True)
    for r in rs:
        if isinstance(r, BaseException):
            why = "%s: %s" % (type(r).__name__, str(r)[:100])
            errors[why] = errors.get(why, 0) + 1
    return sum(not isinstance(r, BaseException) and "Linux" in r.stdout for r in rs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rexec", required=True)
    ap.add_argument("--lab", required=True)
    ap.add_argument("--hosts-n", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--parallel", type=int, default=0, help="limits.parallel (default: N)")
    ap.add_argument("--connect-timeout", type=float, default=120,
                    help="limits.connect_timeout_s (default 120: the lab shares the CPUs)")
    a = ap.parse_args()
    src_ws = os.path.join(a.lab, "workspace")
    tmp = tempfile.mkdtemp(prefix="rexec-many.")
    ws = os.path.join(tmp, "ws")
    shutil.copytree(src_ws, ws, symlinks=True)
    conf = json.load(open(os.path.join(ws, "rexec.json")))
    lab_hosts = [conf["hosts"][h] for h in sorted(conf["hosts"], key=lambda h: int(h[3:]))]
    hosts = {}
    for i in range(a.hosts_n):
        h = dict(lab_hosts[i % len(lab_hosts)])
        hosts["m%d" % (i + 1)] = h
    conf["hosts"] = hosts
    conf["groups"] = {"many": sorted(hosts, key=lambda h: int(h[1:]))}
    # limits.parallel is at most 4096: beyond it the hosts go in a rolling window
    a.parallel = a.parallel or min(a.hosts_n, 4096)
    conf.setdefault("limits", {})["parallel"] = a.parallel
    conf["limits"]["connect_timeout_s"] = a.connect_timeout
    with open(os.path.join(ws, "rexec.json"), "w") as f:
        json.dump(conf, f)
    ports = [hosts[h]["port"] for h in conf["groups"]["many"]]
    h0 = lab_hosts[0]
    key = os.path.join(ws, h0["key"])
    kh = os.path.join(ws, "known_hosts")

    print("many hosts: %d host entries over %d lab sshds (127.0.0.1), sys.uname, %d warm rounds, "
          "limits.parallel %d, connect_timeout_s %g" % (a.hosts_n, len(lab_hosts), a.rounds,
                                                        a.parallel, a.connect_timeout),
          flush=True)
    wait_for_removal_age()
    sv = Serve(a.rexec, ws, tmp)
    rss0, fd0 = status_kib(sv.p.pid, "VmRSS"), fds(sv.p.pid)
    t, c0, l0 = time.perf_counter(), cpu_s(sv.p.pid), load()
    ok = sv.fan(a.hosts_n)
    cold = time.perf_counter() - t
    print("  serve cold: %.2f s, %d ok, serve CPU %.2f s (load %s -> %s)"
          % (cold, ok, cpu_s(sv.p.pid) - c0, l0, load()), flush=True)
    rss1, fd1 = status_kib(sv.p.pid, "VmRSS"), fds(sv.p.pid)
    l0 = load()
    took, by = sv.wait_runners(a.hosts_n, 600)
    print("  runners up (started by serve after each host's first call) %.1f s after the cold round: %s "
          "(load %s -> %s)" % (took, ", ".join("%s %d" % kv for kv in sorted(by.items())), l0, load()),
          flush=True)
    warm, warm_ok = [], []
    for i in range(a.rounds):
        t, c0, l0 = time.perf_counter(), cpu_s(sv.p.pid), load()
        ok_w = sv.fan(a.hosts_n)
        warm.append(time.perf_counter() - t)
        warm_ok.append(ok_w)
        print("  serve warm round %d: %.2f s, %d ok, serve CPU %.2f s (load %s -> %s)"
              % (i + 1, warm[-1], ok_w, cpu_s(sv.p.pid) - c0, l0, load()), flush=True)
    rss2, hwm, fd2 = status_kib(sv.p.pid, "VmRSS"), status_kib(sv.p.pid, "VmHWM"), fds(sv.p.pid)
    sv.stop()
    for why, k in sorted(sv.errors.items(), key=lambda x: -x[1])[:8]:
        print("  failed %d time(s): %s" % (k, why))

    loop = asyncio.new_event_loop()
    t = time.perf_counter()
    conns = loop.run_until_complete(asy_open(ports, h0["user"], key, kh))
    asy_connect = time.perf_counter() - t
    print("  asyncssh connect: %.2f s" % asy_connect, flush=True)
    aw, asy_errors = [], {}
    for i in range(a.rounds):
        t, l0 = time.perf_counter(), load()
        n_ok = loop.run_until_complete(asy_fan(conns, asy_errors))
        aw.append(time.perf_counter() - t)
        print("  asyncssh round %d: %.2f s, %d ok (load %s -> %s)" % (i + 1, aw[-1], n_ok, l0,
                                                                      load()), flush=True)
    for why, k in sorted(asy_errors.items(), key=lambda x: -x[1])[:8]:
        print("  asyncssh failed %d time(s): %s" % (k, why))
    for c in conns:
        c.close()
    loop.close()
    remove_workspace(tmp)

    med_w, med_a = statistics.median(warm), statistics.median(aw)
    print("  per round, serve warm / asyncssh: %s" % ", ".join(
        "%.2f" % (w / x) for w, x in zip(warm, aw)))
    print("  rexec serve, cold fan-out (opens %d connections): %.0f ms, %d ok"
          % (a.hosts_n, cold * 1000, ok))
    print("  rexec serve, warm fan-out: median %.0f ms (min %.0f)" % (med_w * 1000,
                                                                     min(warm) * 1000))
    print("  asyncssh, %d open connections: median %.0f ms (min %.0f); connecting them took %.0f ms"
          % (a.hosts_n, med_a * 1000, min(aw) * 1000, asy_connect * 1000))
    print("  warm ratio rexec/asyncssh: %.2f" % (med_w / med_a))
    print("  serve RSS: %d KiB idle, %d KiB with %d warm connections, %d KiB after the warm "
          "rounds (peak %d): %.0f KiB per connection" % (
              rss0, rss1, a.hosts_n, rss2, hwm, (rss2 - rss0) / a.hosts_n))
    print("  serve fds: %d idle, %d with the connections, %d after the rounds" % (fd0, fd1, fd2))
    return 0 if ok == a.hosts_n and all(k == a.hosts_n for k in warm_ok) else 1


if __name__ == "__main__":
    sys.exit(main())
