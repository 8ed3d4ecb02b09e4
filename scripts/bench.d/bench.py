#!/usr/bin/python3
"""Calls and fan-out benchmark for rexec (run by scripts/bench, which builds rexec and starts a lab).

Measures, in one run and interleaved (one call of each method in turn, so a change of load hits
every method alike):

  (a) per-call latency of a trivial action on lab1: rexec cold (a process per call), rexec warm
      through `rexec serve` (the CLI client per call, and one persistent client connection sending
      request after request, as an orchestrator does), ssh with a ControlMaster (`ssh -S ctl`), ssh
      per call, asyncssh on one open connection, asyncssh connecting per call;
  (b) fan-out of the same action to every host of the lab: rexec cold, rexec through serve (CLI
      and persistent client), parallel-ssh (plain and with a ControlMaster per host), asyncssh
      connecting to all hosts (set-up included) and on open connections.

Prints median and p90 for each, ratios against the peers, and the machine. Only 127.0.0.1.
"""
import argparse
import asyncio
import json
import os
import platform
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import warnings

warnings.filterwarnings("ignore")  # asyncssh's cryptography deprecation notices
t_import = time.perf_counter()
import asyncssh  # noqa: E402  (Debian: python3-asyncssh)
from benchlib import ServeClient, count_syncs, cpu_seconds  # noqa: E402

T_IMPORT_ASYNCSSH = time.perf_counter() - t_import


# ---- the lab ---------------------------------------------------------------------------------

class Lab:
    def __init__(self, lab_dir):
        self.dir = lab_dir
        self.ws = os.path.join(lab_dir, "workspace")
        with open(os.path.join(self.ws, "rexec.json")) as f:
            self.conf = json.load(f)
        self.hosts = sorted(self.conf["hosts"], key=lambda h: int(h[3:]))
        self.port = {h: self.conf["hosts"][h]["port"] for h in self.hosts}
        self.user = self.conf["hosts"]["lab1"]["user"]
        self.key = os.path.join(self.ws, "keys", "id_ed25519")
        self.known_hosts = os.path.join(self.ws, "known_hosts")

    def ssh_opts(self):
        """OpenSSH options: the workspace's key and known_hosts, nothing from ~/.ssh."""
        return ["-i", self.key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "IdentityAgent=none", "-o", "UserKnownHostsFile=" + self.known_hosts,
                "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
                "-o", "LogLevel=ERROR"]

    def ssh_base(self, port, extra=()):
        return ["ssh", "-F", "/dev/null", "-p", str(port), *self.ssh_opts(), *extra]


def run(argv, want=0, **kw):
    """Runs argv, output discarded except stdout returned; checks the exit status."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if p.returncode != want:
        sys.exit("bench: %s exited %d, expected %d:\n%s" % (
            shlex.join(argv), p.returncode, want, p.stderr.decode(errors="replace")[-2000:]))
    return p.stdout


def wrapper_script(root, command):
    """The script rexec sends for a call (src/shell/render.c: header, cwd, command, remote/wrapper.sh,
    the call line), to run it through ssh: the remote side's cost without rexec's controller."""
    nonce = os.urandom(16).hex()
    with open(os.path.join(root, "remote", "wrapper.sh"), "rb") as f:
        body = f.read()
    # stripped as scripts/embed.cmake does for the binary: comment lines, indentation, blank lines
    body = re.sub(rb"^[ \t]*#[^\n]*\n", b"", body, count=1)
    body = re.sub(rb"\n[ \t]*#[^\n]*", b"", body)
    body = re.sub(rb"\n[ \t]+", b"\n", body)
    body = re.sub(rb"\n\n+", b"\n", body)
    head = ("# rexec bench\n__rx_nonce=%s __rx_timeout=60.000 __rx_timeout_us=60000000 "
            "__rx_kill_after=2.000 __rx_stdin_len=-1 __rx_min_rank=0 __rx_max_rank=3\n"
            "__rx_cwd=''\n__rx_cmd=%s\n" % (nonce, shlex.quote(command)))
    return head.encode() + body + b"__rx_main; exit\n"


def one_read(script):
    """The command rexec's channel runs for a script (src/shell/boot.c): bash takes the script in
    one read, then runs it (docs/remote-contract.md, "The script in one read")."""
    return ("bash -c 'LC_ALL=C IFS= read -r -N %d __rx_s || exit 255; "
            "eval \"unset __rx_s; $__rx_s\"'" % len(script))


def run_wrapper(argv, script):
    """argv (an ssh running one_read(script)) fed the script; its stdin stays open until the call is over,
    as rexec's channel does (EOF there means "cancel" to the wrapper)."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdin.write(script)
    p.stdin.flush()
    out = p.stdout.read()
    err = p.stderr.read()
    rc = p.wait()
    p.stdin.close()
    if rc != 0 or b"Linux" not in out or b":end cmd 0 " not in err:
        sys.exit("bench: the wrapper through ssh failed (%d): %r %r" % (rc, out[:200], err[-300:]))




def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# ---- asyncssh ----------------------------------------------------------------------------------

class Async:
    def __init__(self, lab):
        self.lab = lab
        self.loop = asyncio.new_event_loop()
        self.conns = {}

    def _connect(self, host):
        return asyncssh.connect("127.0.0.1", port=self.lab.port[host], username=self.lab.user,
                                client_keys=[self.lab.key], known_hosts=self.lab.known_hosts,
                                agent_path=None, config=None)

    async def _run(self, conn, cmd):
        r = await conn.run(cmd, check=True)
        if "Linux" not in r.stdout:
            raise RuntimeError("asyncssh: unexpected output %r" % r.stdout)

    async def _cold(self, hosts, cmd):
        async def one(h):
            async with self._connect(h) as conn:
                await self._run(conn, cmd)
        await asyncio.gather(*(one(h) for h in hosts))

    async def _open(self, hosts):
        conns = await asyncio.gather(*(self._connect(h) for h in hosts))
        self.conns.update(zip(hosts, conns))

    async def _warm(self, hosts, cmd):
        await asyncio.gather(*(self._run(self.conns[h], cmd) for h in hosts))

    async def _script(self, conn, script):
        """rexec's wrapper script, run as rexec's channel runs it (one_read), its stdin left open."""
        proc = await conn.create_process(one_read(script), encoding=None)
        proc.stdin.write(script)
        r = await proc.wait()
        proc.stdin.write_eof()
        if r.exit_status != 0 or b"Linux" not in r.stdout or b":end cmd 0 " not in r.stderr:
            raise RuntimeError("asyncssh wrapper: %r %r" % (r.stdout[:200], r.stderr[-200:]))

    async def _warm_script(self, hosts, script_fn):
        await asyncio.gather(*(self._script(self.conns[h], script_fn()) for h in hosts))

    def warm_script(self, hosts, script_fn):
        self.loop.run_until_complete(self._warm_script(hosts, script_fn))

    async def _close(self):
        for c in self.conns.values():
            c.close()
            await c.wait_closed()

    def cold(self, hosts, cmd):
        self.loop.run_until_complete(self._cold(hosts, cmd))

    def open(self, hosts):
        self.loop.run_until_complete(self._open(hosts))

    def warm(self, hosts, cmd):
        self.loop.run_until_complete(self._warm(hosts, cmd))

    def close(self):
        self.loop.run_until_complete(self._close())
        self.loop.close()


# ---- statistics and the table --------------------------------------------------------------------

def pct(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def fmt_ms(x):
    return "%.1f" % (x * 1000) if x < 10 else "%.0f" % (x * 1000)


def table(title, rows, samples, order):
    out = ["%s" % title, "  %-52s %9s %9s %9s" % ("", "median", "p90", "min"),]
    for key, label in rows:
        xs = samples[key]
        out.append("  %-52s %7s ms %6s ms %6s ms" % (label, fmt_ms(pct(xs, 50)), fmt_ms(pct(xs, 90)),
                                                 fmt_ms(min(xs))))
    return "\n".join(out)


def md_table(rows, samples):
    out = ["| method | median | p90 | min |", "| --- | ---: | ---: | ---: |"]
    for key, label in rows:
        xs = samples[key]
        out.append("| %s | %s ms | %s ms | %s ms |" % (label, fmt_ms(pct(xs, 50)), fmt_ms(pct(xs, 90)),
                                                   fmt_ms(min(xs))))
    return "\n".join(out)


def ratios(samples, ours, peers, labels):
    out = []
    for o in ours:
        for p in peers:
            r = pct(samples[p], 50) / pct(samples[o], 50)
            word = "faster" if r >= 1 else "SLOWER"
            out.append("  %s vs %s: %.2fx %s (median %s vs %s ms)" % (
                labels[o], labels[p], r if r >= 1 else 1 / r, word,
                fmt_ms(pct(samples[o], 50)), fmt_ms(pct(samples[p], 50))))
    return "\n".join(out)


# ---- main --------------------------------------------------------------------------------------

def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    ver = lambda argv: subprocess.run(argv, capture_output=True, text=True).stdout.strip()  # noqa
    pkgs = ver(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", "libssh2-1", "libuv1",
                "openssh-server", "pssh", "python3-asyncssh"])
    return {"nproc": os.cpu_count(), "cpu": model, "load": load, "kernel": platform.release(),
            "packages": pkgs.replace("\n", "; ")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rexec", required=True)
    ap.add_argument("--lab", required=True)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--markdown")
    ap.add_argument("--src", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    a = ap.parse_args()
    lab = Lab(a.lab)
    rexec = [a.rexec, "--workspace", lab.ws]
    tmp = tempfile.mkdtemp(prefix="rexec-bench.")
    sock = os.path.join(tmp, "serve.sock")
    ctl = os.path.join(tmp, "ctl-lab1")
    cm_dir = os.path.join(tmp, "cm")
    os.mkdir(cm_dir)
    action, cmd = "sys.uname", "uname -a"
    hosts = lab.hosts
    info = machine()
    print("machine: %d CPUs, %s, kernel %s, load average %s" % (
        info["nproc"], info["cpu"], info["kernel"], info["load"]))
    print("versions: %s" % info["packages"])

    serve = subprocess.Popen(rexec + ["serve", "--socket", sock, "--idle-timeout", "0"],
                             stderr=subprocess.DEVNULL)
    # "before": the same workspace with "runner": false on every host (a channel per call)
    ws_off = os.path.join(tmp, "ws-norunner")
    shutil.copytree(lab.ws, ws_off, symlinks=True)
    conf_off = json.load(open(os.path.join(ws_off, "rexec.json")))
    for h in conf_off["hosts"].values():
        h["runner"] = False
    with open(os.path.join(ws_off, "rexec.json"), "w") as f:
        json.dump(conf_off, f)
    sock_off = os.path.join(tmp, "serve-norunner.sock")
    serve_off = subprocess.Popen([a.rexec, "--workspace", ws_off, "serve", "--socket", sock_off,
                                  "--idle-timeout", "0"], stderr=subprocess.DEVNULL)
    masters = []
    asy = Async(lab)
    try:
        deadline = time.time() + 20
        while not (os.path.exists(sock) and os.path.exists(sock_off)):
            if time.time() > deadline or serve.poll() is not None or serve_off.poll() is not None:
                sys.exit("bench: rexec serve did not start")
            time.sleep(0.02)
        sc = ServeClient(sock)
        sc_off = ServeClient(sock_off)
        # the ControlMaster for lab1: started first, as a user of `ssh -S` would
        # (-f: it stays in the background holding whatever stdout it had, so not a pipe)
        subprocess.run(lab.ssh_base(lab.port["lab1"], ["-M", "-S", ctl, "-f", "-N"])
                       + [lab.user + "@127.0.0.1"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        masters.append(ctl)
        asy.open(["lab1"])
        p1 = lab.port["lab1"]
        tgt = lab.user + "@127.0.0.1"
        # rexec's wrapper runs the command under unshare (a PID namespace) + timeout + bash -c
        # (remote/wrapper.sh): the same chain through the ControlMaster separates that part of
        # the remote cost from the transport.
        userns = "" if os.geteuid() == 0 else "--user --map-current-user "
        chain = ("unshare %s--pid --fork --kill-child -- timeout --kill-after=2 60 "
                 "bash -c 'uname -a'" % userns)
        single = [
            ("rexec_cold", "rexec run (a process and a connection per call)",
             lambda: run(rexec + ["run", "lab1", action])),
            ("rexec_serve_cli", "rexec --socket run (CLI client per call, warm)",
             lambda: run(rexec + ["--socket", sock, "run", "lab1", action])),
            ("rexec_serve_conn", "rexec serve, one client connection (warm, runners)",
             lambda: sc.run("lab1", action, 1)),
            ("rexec_serve_norunner", "rexec serve, one client connection (warm, \"runner\": false)",
             lambda: sc_off.run("lab1", action, 1)),
            ("rexec_start", "rexec --version (process start: the front, then rexec-full)",
             lambda: run([a.rexec, "--version"])),
            ("ssh_cm", "ssh -S ctl (ControlMaster, warm)",
             lambda: run(lab.ssh_base(p1, ["-S", ctl]) + [tgt, cmd])),
            ("ssh_cm_chain", "ssh -S ctl, rexec's remote process chain",
             lambda: run(lab.ssh_base(p1, ["-S", ctl]) + [tgt, chain])),
            ("ssh_cm_wrapper", "ssh -S ctl, rexec's wrapper script",
             lambda: (lambda sc: run_wrapper(lab.ssh_base(p1, ["-S", ctl]) + [tgt, one_read(sc)],
                                             sc))(wrapper_script(a.src, cmd))),
            ("ssh_cold", "ssh (a connection per call)",
             lambda: run(lab.ssh_base(p1, ["-o", "ControlMaster=no", "-o", "ControlPath=none"])
                         + [tgt, cmd])),
            ("asyncssh_warm", "asyncssh, one open connection",
             lambda: asy.warm(["lab1"], cmd)),
            ("asyncssh_cold", "asyncssh, a connection per call (in-process)",
             lambda: asy.cold(["lab1"], cmd)),
            ("asyncssh_wrapper", "asyncssh, one open connection, rexec's wrapper script",
             lambda: asy.warm_script(["lab1"], lambda: wrapper_script(a.src, cmd))),
        ]
        s1 = {k: [] for k, _, _ in single}
        for _ in range(3):                      # warm-up, not counted
            for _, _, fn in single:
                fn()
        serve_cpu = 0.0
        client_cpu = {"rexec_serve_cli": 0.0, "rexec_start": 0.0, "ssh_cm": 0.0}
        for _ in range(a.calls):
            for k, _, fn in single:
                c0 = cpu_seconds(serve.pid) if k.startswith("rexec_serve") else 0
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                s1[k].append(timed(fn))
                if k in client_cpu:         # the client process's own CPU (user + system)
                    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    client_cpu[k] += (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
                if k.startswith("rexec_serve"):
                    serve_cpu += cpu_seconds(serve.pid) - c0

        serve_fn = dict((k, fn) for k, _, fn in single)["rexec_serve_conn"]
        syncs = count_syncs(serve.pid, serve_fn, 20, tmp)
        fan_syncs = None
        load_a = machine()["load"]
        # (b) fan-out to every host
        hostfile = os.path.join(tmp, "pssh-hosts")
        with open(hostfile, "w") as f:
            for h in hosts:
                f.write("%s@127.0.0.1:%d\n" % (lab.user, lab.port[h]))
        x_common = " ".join(shlex.quote(w) for w in lab.ssh_opts())
        pssh = ["parallel-ssh", "-h", hostfile, "-p", str(len(hosts)), "-t", "120",
                "-x", "-F /dev/null " + x_common]
        pssh_cold = pssh[:-1] + [pssh[-1] + " -o ControlMaster=no -o ControlPath=none", cmd]
        pssh_cm = pssh[:-1] + [pssh[-1] + " -o ControlMaster=auto -o ControlPersist=600"
                               " -o ControlPath=" + cm_dir + "/%p", cmd]
        asy.open([h for h in hosts if h != "lab1"])
        n = len(hosts)
        fan = [
            ("f_rexec_cold", "rexec run @all (a process, %d connections)" % n,
             lambda: run(rexec + ["run", "@all", action])),
            ("f_rexec_serve_cli", "rexec --socket run @all (CLI client, warm)",
             lambda: run(rexec + ["--socket", sock, "run", "@all", action])),
            ("f_rexec_serve_conn", "rexec serve, one client connection (warm, runners)",
             lambda: sc.run("@all", action, n)),
            ("f_rexec_serve_norunner", "rexec serve, one client connection (warm, no runners)",
             lambda: sc_off.run("@all", action, n)),
            ("f_pssh_cold", "parallel-ssh -p %d (%d connections)" % (n, n),
             lambda: run(pssh_cold)),
            ("f_pssh_cm", "parallel-ssh -p %d, ControlMaster per host (warm)" % n,
             lambda: run(pssh_cm)),
            ("f_asyncssh_cold", "asyncssh, connect all + run (in-process)",
             lambda: asy.cold(hosts, cmd)),
            ("f_asyncssh_warm", "asyncssh, %d open connections" % n,
             lambda: asy.warm(hosts, cmd)),
            ("f_asyncssh_wrapper", "asyncssh, %d open connections, rexec's wrapper script" % n,
             lambda: asy.warm_script(hosts, lambda: wrapper_script(a.src, cmd))),
        ]
        s2 = {k: [] for k, _, _ in fan}
        for _, _, fn in fan:                    # warm-up (and the ControlMasters start)
            fn()
        for _ in range(a.rounds):
            for k, _, fn in fan:
                s2[k].append(timed(fn))
        # concurrent calls share their audit appends (group commit): syncs per call in a fan-out
        fan_syncs = count_syncs(serve.pid, lambda: sc.run("@all", action, n), 3, tmp)
        if fan_syncs:
            fan_syncs = tuple(x / n for x in fan_syncs)
    finally:
        asy.close()
        for c in masters:
            subprocess.run(lab.ssh_base(0, ["-S", c, "-O", "exit"]) + ["x"], capture_output=True)
        for c in os.listdir(cm_dir):
            subprocess.run(lab.ssh_base(0, ["-S", os.path.join(cm_dir, c), "-O", "exit"]) + ["x"],
                           capture_output=True)
        for sv in (serve, serve_off):
            sv.terminate()
            sv.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    info_after = machine()["load"]
    labels = {k: l for k, l, _ in single + fan}
    rows1 = [(k, l) for k, l, _ in single]
    rows2 = [(k, l) for k, l, _ in fan]
    t1 = "(a) per-call latency, %s on lab1, %d calls each" % (action, a.calls)
    t2 = "(b) fan-out, %s on %d hosts, %d rounds each" % (action, n, a.rounds)
    print()
    print(table(t1, rows1, s1, None))
    print(ratios(s1, ["rexec_serve_conn", "rexec_serve_norunner", "rexec_serve_cli", "rexec_cold"],
                 ["ssh_cm", "ssh_cold", "asyncssh_warm"], labels))
    print()
    print(table(t2, rows2, s2, None))
    print(ratios(s2, ["f_rexec_serve_conn", "f_rexec_serve_norunner", "f_rexec_serve_cli", "f_rexec_cold"],
                 ["f_pssh_cold", "f_pssh_cm", "f_asyncssh_cold", "f_asyncssh_warm"], labels))
    print()
    cpu_line = ("rexec serve's own CPU time per warm call (user+sys): %.1f ms"
                % (serve_cpu / (2 * a.calls) * 1000))
    print(cpu_line)
    client_line = ("client processes' own CPU per call (user+sys): rexec --socket run %.1f ms, "
                   "rexec --version %.1f ms, ssh -S ctl %.1f ms" % tuple(
                       client_cpu[k] / a.calls * 1000
                       for k in ("rexec_serve_cli", "rexec_start", "ssh_cm")))
    print(client_line)
    sync_line = ("rexec serve's syncs per warm call (strace -c over 20 calls): %.1f fsync + "
                 "%.1f fdatasync" % syncs if syncs else "syncs per warm call: not counted (no strace)")
    if fan_syncs:
        sync_line += ("; in a fan-out to %d hosts (3 rounds): %.1f fsync + %.1f fdatasync a call"
                      % ((n,) + fan_syncs))
    print(sync_line)
    print("import asyncssh took %.0f ms (not in the asyncssh figures: they run in-process)"
          % (T_IMPORT_ASYNCSSH * 1000))
    print("load average after (a): %s; after (b): %s (a fan-out to %d hosts loads the machine "
          "itself: every host's sshd and commands run here)" % (load_a, info_after, n))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("Machine: %d CPUs, %s, kernel %s; load average %s before, %s after (a), "
                    "%s after (b).\nVersions: %s.\n\n" % (
                        info["nproc"], info["cpu"], info["kernel"], info["load"], load_a,
                        info_after, info["packages"]))
            f.write("**%s**\n\n%s\n\n" % (t1, md_table(rows1, s1)))
            f.write("**%s**\n\n%s\n\n" % (t2, md_table(rows2, s2)))
            f.write("%s; %s; %s; import asyncssh %.0f ms (not in its figures).\n\n"
                    % (cpu_line, client_line, sync_line, T_IMPORT_ASYNCSSH * 1000))
            f.write("```\n%s\n%s\n```\n" % (
                ratios(s1, ["rexec_serve_conn", "rexec_serve_norunner", "rexec_serve_cli", "rexec_cold"],
                       ["ssh_cm", "ssh_cold", "asyncssh_warm"], labels),
                ratios(s2, ["f_rexec_serve_conn", "f_rexec_serve_norunner", "f_rexec_serve_cli", "f_rexec_cold"],
                       ["f_pssh_cold", "f_pssh_cm", "f_asyncssh_cold", "f_asyncssh_warm"],
                       labels)))


if __name__ == "__main__":
    main()
