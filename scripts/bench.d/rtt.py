#!/usr/bin/python3
"""Round trips per warm call (run by `scripts/bench --rtt`, which builds rexec and starts a lab).

The kernel here has no netem, so a relay on 127.0.0.1 stands between the client and lab1's sshd
and holds every chunk it forwards for D ms, in each direction (a chunk keeps its order; a
direction's chunks are released at arrival + D, so bandwidth is not throttled). A call that
needs k round trips then takes about k * 2D longer: the slope of the median call latency
against the added round-trip time 2D is the number of round trips per call.

Measured for a warm call through `rexec serve` (one client connection, runners on and off),
`ssh -S ctl` (ControlMaster, warm) and asyncssh on an open connection, all running `uname -a`
on the relayed host, interleaved. Prints the medians per delay and each method's slope (least
squares over the delays). Only 127.0.0.1.
"""
import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (Lab, ServeClient, Async, run)


class Relay:
    """127.0.0.1:<port> -> 127.0.0.1:<target>, each direction delayed by self.delay seconds."""

    def __init__(self, target):
        self.target, self.delay = target, 0.0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        threading.Thread(target=self._main, daemon=True).start()
        self.ready.wait(10)

    def _main(self):
        asyncio.set_event_loop(self.loop)
        srv = self.loop.run_until_complete(asyncio.start_server(self._conn, "127.0.0.1", 0))
        self.port = srv.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _pipe(self, r, w):
        q = asyncio.Queue()

        async def sender():
            while True:
                due, data = await q.get()
                if data is None:
                    break
                pause = due - self.loop.time()
                if pause > 0:
                    await asyncio.sleep(pause)
                w.write(data)
                await w.drain()
            w.close()

        task = self.loop.create_task(sender())
        while True:
            data = await r.read(65536)
            await q.put((self.loop.time() + self.delay, data or None))
            if not data:
                break
        await task

    async def _conn(self, cr, cw):
        sr, sw = await asyncio.open_connection("127.0.0.1", self.target)
        await asyncio.gather(self._pipe(cr, sw), self._pipe(sr, cw), return_exceptions=True)


def slope(xs, ys):
    mx, my = statistics.mean(xs), statistics.mean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def relayed_workspace(lab, port, tmp, runner):
    """A copy of the lab's workspace whose lab1 goes through the relay (its host key pinned for
    [127.0.0.1]:port as well)."""
    ws = os.path.join(tmp, "ws-%s" % ("runner" if runner else "norunner"))
    shutil.copytree(lab.ws, ws, symlinks=True)
    path = os.path.join(ws, "rexec.json")
    conf = json.load(open(path))
    conf["hosts"]["lab1"]["port"] = port
    conf["hosts"]["lab1"]["runner"] = runner
    with open(path, "w") as f:
        json.dump(conf, f)
    orig = "[127.0.0.1]:%d " % lab.port["lab1"]
    lines = [l for l in open(os.path.join(ws, "known_hosts")) if l.startswith(orig)]
    with open(os.path.join(ws, "known_hosts"), "a") as f:
        for l in lines:
            f.write("[127.0.0.1]:%d %s" % (port, l[len(orig):]))
    return ws


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rexec", required=True)
    ap.add_argument("--lab", required=True)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--delays", default="0,5,10,20", help="one-way delays in ms")
    a = ap.parse_args()
    lab = bench.Lab(a.lab)
    relay = Relay(lab.port["lab1"])
    tmp = tempfile.mkdtemp(prefix="rexec-rtt.")
    ws_on = relayed_workspace(lab, relay.port, tmp, True)
    ws_off = relayed_workspace(lab, relay.port, tmp, False)
    lab.known_hosts = os.path.join(ws_on, "known_hosts")
    lab.port = dict(lab.port, lab1=relay.port)
    procs, sc = [], {}
    ctl = os.path.join(tmp, "ctl")
    asy = bench.Async(lab)
    try:
        for name, ws in (("on", ws_on), ("off", ws_off)):
            sock = os.path.join(tmp, "serve-%s.sock" % name)
            procs.append(subprocess.Popen([a.rexec, "--workspace", ws, "serve", "--socket", sock,
                                           "--idle-timeout", "0"], stderr=subprocess.DEVNULL))
            deadline = time.time() + 20
            while name not in sc:
                try:
                    sc[name] = bench.ServeClient(sock)
                except OSError:
                    if time.time() > deadline or procs[-1].poll() is not None:
                        sys.exit("bench: rexec serve did not start")
                    time.sleep(0.02)
        tgt = lab.user + "@127.0.0.1"
        subprocess.run(lab.ssh_base(relay.port, ["-M", "-S", ctl, "-f", "-N"]) + [tgt],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        asy.open(["lab1"])
        methods = [
            ("rexec serve, one client connection (warm, runners)",
             lambda: sc["on"].run("lab1", "sys.uname", 1)),
            ("rexec serve, one client connection (warm, \"runner\": false)",
             lambda: sc["off"].run("lab1", "sys.uname", 1)),
            ("ssh -S ctl (ControlMaster, warm)",
             lambda: bench.run(lab.ssh_base(relay.port, ["-S", ctl]) + [tgt, "uname -a"])),
            ("asyncssh, one open connection", lambda: asy.warm(["lab1"], "uname -a")),
        ]
        delays = [float(d) for d in a.delays.split(",")]
        med = {m[0]: [] for m in methods}
        print("load average before: %s" % open("/proc/loadavg").read().strip())
        for d in delays:
            relay.delay = d / 1000.0
            for _, fn in methods:  # warm-up at this delay
                fn()
            times = {m[0]: [] for m in methods}
            for _ in range(a.calls):
                for name, fn in methods:
                    times[name].append(bench.timed(fn) * 1000)
            print("one-way delay %4.0f ms (added round trip %4.0f ms):" % (d, 2 * d))
            for name, _ in methods:
                m = statistics.median(times[name])
                med[name].append(m)
                print("  %-62s median %7.1f ms" % (name, m))
        print("load average after: %s" % open("/proc/loadavg").read().strip())
        rtts = [2 * d for d in delays]
        print("\nround trips per warm call (slope of the median latency against the added "
              "round-trip time, %d calls per delay):" % a.calls)
        for name, _ in methods:
            print("  %-62s %5.2f" % (name, slope(rtts, med[name])))
    finally:
        subprocess.run(["ssh", "-S", ctl, "-O", "exit", "x"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        for p in procs:
            p.terminate()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
