"""Drives remote/runner.sh the way rexec does, without rexec: `bash -s` fed the runner's start
(what rx_render_runner_start sends), then call frames (what runner.c queues), the code of each
as rx_render_runner_code renders it. Used by tests/e2e/t_runner_frames.sh; standard library only.

    runner_frames.py SRC TMP SCENARIO MAX_RANK

TMP is the runners' TMPDIR (private to the test) and where commands leave their traces. Prints
one line per scenario result; exits 1 with the reason on the first wrong outcome.
"""
import os
import random
import secrets
import select
import subprocess
import sys
import time

SRC, TMP, SCENARIO, MAX_RANK = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
WAIT_S = 20  # bound on any one answer: a hang fails the test, it is never waited out


def die(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


class Runner:
    def __init__(self, wrap=(), **extra_env):
        self.rnonce = secrets.token_hex(16)
        env = dict(os.environ, TMPDIR=TMP, **extra_env)
        self.p = subprocess.Popen(list(wrap) + ["bash", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, start_new_session=True)
        self.buf = {1: b"", 2: b""}
        start = b"__rx_rnonce=%s __rx_max_rank=%d\n" % (self.rnonce.encode(), MAX_RANK)
        for f in ("wrapper.sh", "runner.sh"):
            with open(os.path.join(SRC, "remote", f), "rb") as fh:
                start += fh.read()
        self.send(start + b"__rx_runner; exit\n")
        hello = self.until(1, b"\n")
        want = b"\036rexec-runner:%s:ready " % self.rnonce.encode()
        if not hello.startswith(want):
            die("the runner did not start: %r" % hello)
        self.containment = hello[len(want):].strip().decode()

    def send(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def fill(self, deadline):
        fds = {self.p.stdout.fileno(): 1, self.p.stderr.fileno(): 2}
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select(list(fds), [], [], left)
        for fd in r:
            d = os.read(fd, 65536)
            if not d:
                raise EOFError("stream %d closed" % fds[fd])
            self.buf[fds[fd]] += d
        return True

    def until(self, stream, needle):
        """Everything on stream up to and including needle (bounded by WAIT_S)."""
        deadline = time.monotonic() + WAIT_S
        while needle not in self.buf[stream]:
            if not self.fill(deadline):
                die("no %r on stream %d within %d s; have %r" % (needle, stream, WAIT_S,
                                                                   self.buf[stream][-300:]))
        i = self.buf[stream].index(needle) + len(needle)
        out, self.buf[stream] = self.buf[stream][:i], self.buf[stream][i:]
        return out

    def call(self, command, kill=False, oneshot=False, code=None):
        """Runs one call (a oneshot frame: the header's fifth field "o"); returns (stdout, end
        fields) with the markers cut out; the end's "err" is what came on stderr before it
        (the acknowledgement cut out), "nonce" the call's nonce. code: the call's code, when
        not code_of(command)."""
        nonce = secrets.token_hex(16).encode()
        code = code or code_of(command)
        frame = head(nonce, code, oneshot) + code
        self.send(frame + (b"K\n" if kill else b""))
        mark = b"\036rexec:%s:end" % nonce
        out = self.until(1, mark + b"\n")[:-len(mark) - 1]
        end = self.end_line(mark)
        end["nonce"] = nonce
        end["err"] = end["err"].replace(b"\036rexec:%s:start\n" % nonce, b"")
        return out, end

    def end_line(self, mark):
        err = self.until(2, mark + b" ")[:-len(mark) - 1]
        fields = self.until(2, b"\n").decode().split()
        # phase rc timed_out containment killed started desync (an older runner: no desync)
        if len(fields) == 6:
            fields.append("0")
        if len(fields) != 7:
            die("end line: %r" % fields)
        end = dict(zip(("phase", "rc", "to", "cont", "killed", "started", "desync"), fields))
        end["err"] = err
        return end

    def close(self):
        """What the controller does to a runner it discards: EOF; the runner stops and goes."""
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.p.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            die("a runner given EOF did not exit within %d s" % WAIT_S)


def code_of(command):
    """A call's code as rx_render_runner_code renders it (no secrets, no cwd)."""
    return ("unset __rx_c\n"
            'if [ -n "$__rx_in" ]; then exec 0<"$__rx_in" || '
            '{ builtin echo stdin 1<>"$__rx_st"; exit 1; }; fi\n'
            'builtin echo ok 1<>"$__rx_st" || exit 1; unset __rx_st __rx_in\n'
            + command + "\n").encode()


def head(nonce, code, oneshot=False):
    """A call frame's header as runner.c writes it: padded with spaces to 96 bytes; a oneshot
    call's has a fifth field, "o"."""
    h = b"C %s 0 -1 %d%s" % (nonce, len(code), b" o" if oneshot else b"")
    return h + b" " * (95 - len(h)) + b"\n"


def trace(name):
    return os.path.join(TMP, "trace-" + name)


def check_own(r, tag, out, end):
    if end["desync"] != "0" or end["phase"] != "cmd" or out != tag.encode() + b"\n":
        die("call %s on a %s runner printed %r, ended %r" % (tag, r.containment, out, end))


def kill_then_calls(rounds, big, oneshot=False):
    """C immediately followed by K, then ordinary calls: each prints only its own value, and a
    stopped call's code never runs later (its trace exists only if its own end said started)."""
    r = Runner()
    pad = "#" * (100 * 1024) + "\n" if big else ""
    n = 0
    for i in range(rounds):
        t = trace("killed-%s-%d" % (r.rnonce, i))
        out, end = r.call(pad + "touch %s; echo KILLED-%d" % (t, i), kill=True, oneshot=oneshot)
        if end["desync"] != "0":
            die("a call stopped at once left the runner out of step: %r" % end)
        ran = os.path.exists(t)
        if ran and end["started"] != "1":
            die("the stopped call ran but its end says not started: %r" % end)
        for j in range(2):
            n += 1
            tag = "V%d" % n
            out, end = r.call("echo %s" % tag, oneshot=oneshot)
            check_own(r, tag, out, end)
            if os.path.exists(t) != ran:
                die("call %s ran the code of the call stopped before it" % tag)
    r.close()
    print("kill-then-calls rounds=%d big=%s oneshot=%s containment=%s: every call printed its "
          "own value" % (rounds, big, oneshot, r.containment))


def plant(where, oneshot=False):
    """A call's command writes into its runner's FIFOs what the runner never wrote there: later
    calls run their own code or end as desync (then the runner is discarded, as the
    controller does); the planted code never runs."""
    r = Runner()
    two_slots(r)
    r.call("echo warm", oneshot=oneshot)  # (with oneshot frames: the next calls run in forks)
    r.call("echo warm", oneshot=oneshot)
    d = "$(for d in \"$TMPDIR\"/.rexec-*/r.* \"$TMPDIR\"/.rexec-runner.*; do " \
        "read -r o _ <\"$d/owner\" && [ \"$o\" = %d ] && echo \"$d\"; done 2>/dev/null)" % r.p.pid
    # Where a command can write: the FIFOs by name (a runner whose slots hold them open has
    # removed the names: the writes then make plain files), and the slots' open FIFOs through
    # /proc/PID/fd (the slot's fds: 3 c<k>, 4 n<k>, 6 g<k>).
    slots = "for p in /proc/[0-9]*; do a=$(tr '\\0' ' ' <$p/cmdline 2>/dev/null); " \
            "case $a in \"bash $d/slot $d \"*) k=${a#\"bash $d/slot $d \"}; eval f${k%% *}=$p/fd;; " \
            "esac; done; [ -n \"$f0\" ] && [ -n \"$f1\" ] || exit 8"
    planted = trace("planted")
    fake, fake2, fake3 = (secrets.token_hex(16) for _ in range(3))
    body = "echo PLANTED; touch %s\n" % planted
    frame = "%s %d\\n%s" % (fake, len(body), body.replace("\n", "\\n"))
    # (a go-ahead or an "n" line with the frame's own made-up nonce would make a whole forged
    # call: docs/remote-contract.md says what a command of the same account can still do)
    def put(what, fd, name):
        return "for t in \"$d/%s0\" \"$d/%s1\" \"$f0/%d\" \"$f1/%d\"; do printf '%s' >\"$t\"; done" \
            % (name, name, fd, fd, what)
    writes = {
        "c": put(frame, 3, "c"),
        "n": put("n %s\\n" % fake2, 4, "n"),
        "g": put("%s\\n" % fake3, 6, "g"),
        "junk": put("garbage\\n", 4, "n") + "; " + put("xx", 3, "c"),
        # "ready" bytes on r<k> (a slot's descriptor above 9 that names it): a hint to the
        # runner, nothing of it runs
        "r": "for t in \"$f0\"/1? \"$f1\"/1?; do case $(readlink \"$t\") in */r[01]\\ *) "
             "printf %s >\"$t\";; esac; done" % ("." * 100),
    }
    cmd = "; ".join(v for k, v in writes.items() if where == "all" or k == where)
    out, end = r.call("d=%s; [ -n \"$d\" ] || exit 9; %s; %s; echo planted" % (d, slots, cmd))
    if end["phase"] != "cmd" or end["rc"] != "0":
        die("the planting call itself failed: %r %r" % (out, end))
    desyncs = 1 if end["desync"] != "0" else 0
    if desyncs:
        r.close()
        r = Runner()
    for n in range(6):
        tag = "P%d" % n
        out, end = r.call("echo %s" % tag, oneshot=oneshot)
        if b"PLANTED" in out or os.path.exists(planted):
            die("planted code ran (%s): %r %r" % (where, out, end))
        if end["desync"] != "0":
            if end["phase"] == "desync" and end["started"] != "0":
                die("a desync call says started: %r" % end)
            desyncs += 1
            r.close()
            r = Runner()
            continue
        check_own(r, tag, out, end)
    r.close()
    if os.path.exists(planted):
        die("planted code ran (%s)" % where)
    print("plant %s oneshot=%s containment=%s: planted code never ran; %d desync(s) discarded "
          "the runner" % (where, oneshot, r.containment, desyncs))


def mixed(n, oneshot=False):
    """Ordinary calls, calls killed at once and calls killed a moment later, in random order:
    every ordinary call prints its own value."""
    r = Runner()
    rnd = random.Random(int.from_bytes(os.urandom(4), "big"))
    for i in range(n):
        k = rnd.random()
        if k < 0.2:
            r.call("echo K%d" % i, kill=True, oneshot=oneshot)
        elif k < 0.3:
            nonce = secrets.token_hex(16).encode()
            code = (b'unset __rx_c\nbuiltin echo ok 1<>"$__rx_st"; unset __rx_st __rx_in\n'
                    b"echo L%d; exec sleep 5\n" % i)
            r.send(head(nonce, code, oneshot) + code)
            r.until(2, b"\036rexec:%s:start\n" % nonce)
            r.send(b"K\n")
            mark = b"\036rexec:%s:end" % nonce
            r.until(1, mark + b"\n")
            end = r.end_line(mark)
            if end["desync"] != "0":
                die("a kill after the start left the runner out of step: %r" % end)
        else:
            out, end = r.call("echo M%d" % i, oneshot=oneshot)
            check_own(r, "M%d" % i, out, end)
    r.close()
    print("mixed %d calls oneshot=%s containment=%s: every ordinary call printed its own value"
          % (n, oneshot, r.containment))


def slot_waiters(d, n=None):
    """What each slot of runner directory d has started in advance for its next call, once every
    slot waits for it (blocked in a read of n<k>, fd 4, which each reaches only after it started
    that and wrote its byte on r<k>: the runner then takes it for ready) and each such process
    is ready: {k: "bash"} (a fresh call's shell: its command line says so once it is exec'd) or
    "fork" (a fork of the slot: the slot's command line, blocked in a read of g<k>, fd 7). n:
    the number of slots to wait for (default: those there are). A read is told from
    /proc/PID/syscall, or where Yama keeps that to the process's ancestors, from its wchan (the
    only pipes these block in a read of are those)."""
    nr = {"x86_64": "0", "aarch64": "63"}.get(os.uname().machine)
    slot_cl = b"bash\0%s/slot\0" % d.encode()

    def blocked(p, fd):
        try:
            with open("/proc/%d/syscall" % p) as fh:
                sc = fh.read().split()
            if nr:
                return sc[:2] == [nr, hex(fd)]
        except OSError:
            pass
        try:
            with open("/proc/%d/wchan" % p) as fh:
                return fh.read().endswith("pipe_read")
        except OSError:
            return False

    def cmdline(p):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as fh:
                return fh.read()
        except OSError:
            return b""

    deadline = time.monotonic() + WAIT_S
    while True:
        procs = process_table(d)
        slots = list(slots_in(procs, d).values())
        kinds = {}
        ready = len(slots) == (n or len(slots) or 1) and all(blocked(p, 4) for p in slots)
        for p in slots if ready else []:
            try:
                with open("/proc/%d/task/%d/children" % (p, p)) as fh:
                    kids = [int(x) for x in fh.read().split()]
            except OSError:
                kids = []
            k = int(procs[p][1].split(b"\0")[3])
            for c in kids:
                cl = procs.get(c, (0, b""))[1]
                if cl.startswith(b"bash\0-c\0"):
                    kinds[k] = "bash"
                elif cl.startswith(slot_cl) and blocked(c, 7) and cmdline(c).startswith(slot_cl):
                    # (the command line read again: a fresh shell's, read before its exec, was
                    # the slot's, and it may block in its read of fd 7 by now)
                    kinds[k] = "fork"
                else:
                    ready = False
            ready = ready and k in kinds
        if ready:
            return kinds
        if time.monotonic() > deadline:
            die("the slots and what they started did not come to wait within %d s: %r"
                % (WAIT_S, procs))
        time.sleep(0.01)


def waiters(d):
    """What the slots of runner directory d have started in advance, once they wait: sorted."""
    return sorted(slot_waiters(d).values())


def ready_fifo(r, k, data=None):
    """Slot k's FIFO r<k> as the runner holds it (its fd 24 + k), opened through /proc as a
    command of the same account can: with data, writes it there (bytes the slot did not write);
    without, reads off the byte the slot wrote (all there is, at least one: a slot that waits
    for a call has written it)."""
    path = "/proc/%d/fd/%d" % (r.p.pid, 24 + k)
    if not os.readlink(path).startswith("%s/r%d" % (runner_dir(r), k)):
        die("the runner's fd %d is not its FIFO r%d: %s" % (24 + k, k, os.readlink(path)))
    fd = os.open(path, (os.O_WRONLY if data else os.O_RDONLY) | os.O_NONBLOCK)
    try:
        if data:
            os.write(fd, data)
            return data
        got = os.read(fd, 64)
        if not got:
            die("no byte on r%d from a slot that waits" % k)
        return got
    finally:
        os.close(fd)


def slot_code(command):
    """A call's code that prints first the slot it runs in ("slot0", "slot1": the name of its
    status FIFO s<k>, before the code unsets it)."""
    return ('unset __rx_c\nbuiltin echo ok 1<>"$__rx_st"; echo "slot${__rx_st: -1}"; '
            'unset __rx_st __rx_in\n%s\n' % command).encode()


def slot_call(r, k, tag, oneshot=False):
    """A call that must run in slot k and print tag."""
    out, end = r.call(None, oneshot=oneshot, code=slot_code("echo %s" % tag))
    if end["desync"] != "0" or end["phase"] != "cmd" or out != b"slot%d\n%s\n" % (k, tag.encode()):
        die("call %s (meant for slot %d) on a %s runner printed %r, ended %r"
            % (tag, k, r.containment, out, end))


def two_slots(r):
    """Brings slot 1 up: slot 0's byte read off before a call, so that the call finds slot 0
    busy and slot 1 not started (it runs in slot 0 and slot 1 starts), then the byte written
    back, once both slots wait."""
    d = runner_dir(r)
    slot_waiters(d, 1)
    ready_fifo(r, 0)
    slot_call(r, 0, "up")
    slot_waiters(d, 2)
    ready_fifo(r, 0, b".")


def one_slot(oneshot):
    """Calls spaced apart (each sent once its runner's slots wait for a call: what a slot
    reaches only after its last call's end, reap and next shell), some killed at once: every
    call runs in slot 0, prints its own value, and slot 1 never starts (one slot process)."""
    r = Runner()
    d = runner_dir(r)
    for i in range(24):
        slot_waiters(d)
        if i % 6 == 3:
            out, end = r.call(None, kill=True, oneshot=oneshot, code=slot_code("echo K%d" % i))
            if end["desync"] != "0" or out not in (b"", b"slot0\n", b"slot0\nK%d\n" % i):
                die("a call stopped at once printed %r, ended %r" % (out, end))
            continue
        slot_call(r, 0, "S%d" % i, oneshot=oneshot and i % 2 == 0)
    w = slot_waiters(d)
    if list(w) != [0]:
        die("after calls spaced apart the runner has slots %r, not slot 0 alone" % sorted(w))
    r.close()
    gone(d)
    print("one-slot oneshot=%s containment=%s: 20 calls spaced apart and 4 stopped ran in slot "
          "0, slot 1 never started" % (oneshot, r.containment))


def choose():
    """The runner's choice of a slot, each case made so through the bytes on r<k> (read off: the
    slot is taken for busy; written back: for ready): slot 0 when it is ready; when it is not,
    and slot 1 is not started, slot 0 (slot 1 starts); slot 1 when only it is ready; the slot
    that did not take the call before when neither is; a kill reaches the call's slot; forged
    bytes make no call run elsewhere; a slot that died starts again when it is handed a call."""
    r = Runner()
    d = runner_dir(r)
    two_slots(r)
    slot_waiters(d, 2)
    slot_call(r, 0, "ready0")              # slot 0 ready: slot 0
    slot_waiters(d, 2)
    ready_fifo(r, 0)
    slot_call(r, 1, "busy0", oneshot=True)  # slot 0 not ready, slot 1 ready: slot 1
    slot_waiters(d, 2)
    slot_call(r, 1, "lost0")               # slot 0's byte lost: it stays busy for the runner
    slot_waiters(d, 2)
    ready_fifo(r, 0, b".")
    slot_call(r, 0, "back0", oneshot=True)  # written back: ready again
    slot_waiters(d, 2)
    ready_fifo(r, 0)
    ready_fifo(r, 1)
    slot_call(r, 1, "neither")             # neither ready: not the slot of the call before
    slot_waiters(d, 2)
    ready_fifo(r, 1)
    slot_call(r, 0, "neither2")            # again: the other one
    slot_waiters(d, 2)
    ready_fifo(r, 0, b".")
    ready_fifo(r, 1, b"..")
    slot_call(r, 0, "both")                # both ready again: slot 0
    # a kill reaches the call's slot, here slot 1: its command goes, the end says killed
    slot_waiters(d, 2)
    ready_fifo(r, 0)
    t = trace("choose-kill-%s" % r.rnonce)
    nonce = secrets.token_hex(16).encode()
    code = slot_code("touch %s; exec sleep 600" % t)
    r.send(head(nonce, code) + code)
    wait_for_file(t, "the call meant for slot 1 did not start")
    r.send(b"K\n")
    mark = b"\036rexec:%s:end" % nonce
    out = r.until(1, mark + b"\n")[:-len(mark) - 1]
    end = r.end_line(mark)
    if out != b"slot1\n" or (end["killed"], end["phase"], end["desync"]) != ("1", "cmd", "0"):
        die("a call killed in slot 1 printed %r, ended %r" % (out, end))
    slot_waiters(d, 2)
    ready_fifo(r, 0, b".")
    # bytes forged on both FIFOs: calls still run in a slot that waits, each its own code
    ready_fifo(r, 0, b"." * 50)
    ready_fifo(r, 1, b"." * 50)
    for i in range(6):
        out, end = r.call(None, code=slot_code("echo F%d" % i))
        if end["desync"] != "0" or out not in (b"slot0\nF%d\n" % i, b"slot1\nF%d\n" % i):
            die("a call after forged bytes printed %r, ended %r" % (out, end))
    # slot 0 killed from outside while it waits: the next call handed to it starts it again
    # (once it is gone, and reaped by the runner: until then, it seems alive to the runner)
    slot_waiters(d, 2)
    old = slot_pids(d)
    with open("/proc/%d/stat" % old[0]) as fh:
        top = int(fh.read().rsplit(")", 1)[1].split()[1])  # its unshare, or the slot itself
    top = old[0] if top == r.p.pid else top
    os.kill(old[0], 9)
    deadline = time.monotonic() + WAIT_S
    while os.path.exists("/proc/%d" % top):
        if time.monotonic() > deadline:
            die("slot 0, killed, is still there")
        time.sleep(0.01)
    slot_call(r, 0, "again")
    if slot_pids(d).get(0) in (None, old[0]):
        die("slot 0 was not started again")
    r.close()
    gone(d)
    print("choose containment=%s: slot 0 when ready, else slot 1, else in turn; kill in slot 1; "
          "forged bytes; a slot started again" % r.containment)


def slot_pids(d):
    """{k: pid} of the slots (not their forks) of runner directory d."""
    return slots_in(process_table(d), d)


def process_table(d):
    """{pid: (ppid, command line)} of the processes naming runner directory d."""
    procs = {}
    for p in processes_of(d):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as fh:
                cl = fh.read()
            with open("/proc/%d/stat" % p) as fh:
                pp = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        procs[p] = (pp, cl)
    return procs


def slots_in(procs, d):
    """{k: pid} of the slots in process_table(d)'s procs: `bash DIR/slot DIR K ...` whose parent
    is not one (a fork of a slot has its command line)."""
    slot_cl = b"bash\0%s/slot\0" % d.encode()
    return {int(cl.split(b"\0")[3]): p for p, (pp, cl) in procs.items()
            if cl.startswith(slot_cl) and not procs.get(pp, (0, b""))[1].startswith(slot_cl)}


def wait_for_file(path, what):
    """Waits (bounded) until path exists: a command's trace that it started; dies saying what."""
    deadline = time.monotonic() + WAIT_S
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            die(what)
        time.sleep(0.01)


def gone(d):
    """Waits (bounded) until no process names runner directory d."""
    deadline = time.monotonic() + WAIT_S
    while processes_of(d):
        if time.monotonic() > deadline:
            die("processes of a runner that exited are still there: %r" % processes_of(d))
        time.sleep(0.05)


# What a command can see of the process it runs in: each runs once in a fresh call shell and once
# in a fork of its slot, and must see the same. (Output naming the command's own pid, which
# differs from process to process, is left out: /proc/<pid>/... paths, NSpid.)
FORK_PROBES = {
    "env": "exec env",
    "fds": "exec find /proc/self/fd/ -mindepth 1 -maxdepth 1 -printf '%f %l %m\\n'",
    "status": "exec grep -E '^(Uid|Gid|Groups|Sig(Blk|Ign|Cgt)|NoNewPrivs|Seccomp|Cap[A-Za-z]+"
              "|Cpus_allowed_list|Mems_allowed_list):' /proc/self/status",
    "cwd": "exec sh -c 'pwd; umask; ulimit -a; cat /proc/self/limits; trap; exec 2>&-; set'",
    "notfound": "exec no-such-command-rexec a b",
    "lines": "x=1\nexec no-such-command-rexec 'a b'",
    "enoexec": "exec %s" % os.path.join(TMP, "noshebang"),
}


def fork_norm(name, out):
    lines = out.split(b"\n")
    if name == "env":
        lines = sorted(l for l in lines if not l.startswith(b"_="))
    if name == "fds":
        lines = [l for l in lines if b" /proc/" not in l]
    if name == "cwd":  # sh's own PPID and $$ (its pid)
        lines = [l for l in lines if not l.startswith((b"PPID=", b"$="))]
    return b"\n".join(lines)


def fork():
    """Oneshot frames ("o"): once a slot has run one, what it starts in advance for the next
    call is a fork of itself, not a fresh bash (and again a fresh bash after another call, the
    fork killed for it); the command sees exactly what it sees in a fresh call shell (its
    environment, descriptors, process status, working directory, umask, limits, bash's messages
    when it is not found), never the nonce; kills before and during such a call."""
    with open(os.path.join(TMP, "noshebang"), "w") as fh:
        fh.write('echo "script $0 $# lvl=$SHLVL x=${x-unset} f=$(type -t __rx_slot)"\n')
    os.chmod(os.path.join(TMP, "noshebang"), 0o755)
    r = Runner()
    d = runner_dir(r)
    ns = r.containment == "pid-namespace"
    # Each call waits for the slots to wait (waiters): it finds slot 0 ready and runs there, so
    # what slot 0 started in advance after it is known (slot 1 never starts).
    waiters(d)
    r.call("exec true", oneshot=True)  # the slot's first call takes the shell it started
    waiters(d)
    for name, cmd in FORK_PROBES.items():
        res = {}
        for how in ("o", "o", "n", "n"):  # twice in a fork, then twice in a fresh shell
            out, end = r.call(cmd, oneshot=how == "o")
            if end["desync"] != "0" or end["killed"] != "0":
                die("probe %s (%s) ended %r" % (name, how, end))
            got = (fork_norm(name, out), end["err"], end["rc"], end["phase"])
            if end["nonce"] in out or end["nonce"] in end["err"]:
                die("probe %s (%s): the command saw the nonce" % (name, how))
            if res.setdefault(how, got) != got:
                die("probe %s (%s) differs between two calls:\n%r\n%r" % (name, how, res[how], got))
            w = slot_waiters(d)
            if ns and w != {0: "fork" if how == "o" else "bash"}:
                # after an "o" call a fork of the slot; after an "n" call a fresh bash as before
                die("after a%s call (%s) the slots have %r waiting" % (
                    " oneshot" if how == "o" else "n ordinary", name, w))
        if res["o"] != res["n"]:
            die("probe %s: a fork of the slot differs from a fresh shell:\nfork:  %r\nfresh: %r"
                % (name, res["o"], res["n"]))
        r.call("exec true", oneshot=True)
        waiters(d)
    # a kill while the oneshot command runs: it goes, the end says killed and started
    t = trace("forkkill-%s" % r.rnonce)
    nonce = secrets.token_hex(16).encode()
    code = code_of("exec sh -c 'touch %s; exec sleep 600'" % t)
    r.send(head(nonce, code, True) + code)
    wait_for_file(t, "the oneshot command did not start")
    r.send(b"K\n")
    mark = b"\036rexec:%s:end" % nonce
    r.until(1, mark + b"\n")
    end = r.end_line(mark)
    if (end["killed"], end["started"], end["phase"], end["desync"]) != ("1", "1", "cmd", "0"):
        die("a oneshot call killed while it ran ended %r" % end)
    for p in processes_of(d):
        with open("/proc/%d/cmdline" % p, "rb") as fh:
            if b"sleep" in fh.read():
                die("the killed oneshot command is still there after its end")
    for i in range(4):
        out, end = r.call("echo after%d" % i, oneshot=i % 2 == 0)
        check_own(r, "after%d" % i, out, end)
    r.close()
    print("fork containment=%s: %d probes the same in a fork and in a fresh shell; kill during a "
          "oneshot call" % (r.containment, len(FORK_PROBES)))


def fork_env():
    """A runner whose environment has what a fork of the slot would hide or a fresh bash would
    read at its start (a name the slot uses, REPLY, an exported __rx_*, BASH_ENV): its slots
    never fork, and oneshot calls see that environment as ordinary ones do."""
    benv = os.path.join(TMP, "bash_env")
    with open(benv, "w") as fh:
        fh.write("FROM_BASH_ENV=1; export FROM_BASH_ENV\n")
    for extra in ({"c": "seen-c", "REPLY": "seen-reply"}, {"__rx_x": "seen-rx"},
                  {"BASH_ENV": benv}):
        r = Runner(**extra)
        d = runner_dir(r)
        outs = []
        for i in range(6):
            out, end = r.call("exec env", oneshot=i != 5)
            check_env = [l for l in out.split(b"\n")
                         if not l.startswith((b"_=", b"c=", b"REPLY="))]
            outs.append(sorted(check_env))
            # (a name the slot has a local of is no one's business: a fresh call's shell gets
            # the slot's value, as it always did; what matters is that no fork changes it)
            for k, v in extra.items():
                if k not in ("c", "REPLY") and b"%s=%s" % (k.encode(), v.encode()) not in out:
                    die("a oneshot call does not see %s=%s of the runner's environment" % (k, v))
            if "BASH_ENV" in extra and b"FROM_BASH_ENV=1" not in out:
                die("a oneshot call ran without what BASH_ENV sets in a fresh shell")
        if any(o != outs[0] for o in outs):
            die("oneshot calls saw different environments (%r)" % extra)
        if r.containment == "pid-namespace" and set(waiters(d)) != {"bash"}:
            die("a slot whose environment has %r ran a call in its fork" % sorted(extra))
        r.close()
    print("fork-env: slots whose environment a fork would change run every call in a fresh shell")

def sizes():
    """Frames around a FIFO's page (4 KiB) and beyond its 64 KiB, run and killed at once: each
    prints its own value and a stopped call's code never runs later. (A stopped call's leftovers
    read off with a read -N that timed out once came back in the slot's next read of n<k>.)"""
    r = Runner()
    n = 0
    for size in (3800, 3930, 3990, 4010, 4100, 70000, 3900):
        for kill in (False, True, False):
            n += 1
            t = trace("size-%s-%d" % (r.rnonce, n))
            cmd = "touch %s; echo S%d" % (t, n)
            cmd = "#" * (size - len(cmd)) + "\n" + cmd
            out, end = r.call(cmd, kill=kill)
            if end["desync"] != "0":
                die("a call of %d bytes (kill %s) left the runner out of step: %r" % (size, kill, end))
            if not kill:
                check_own(r, "S%d" % n, out, end)
            elif os.path.exists(t) and end["started"] != "1":
                die("the stopped call ran but its end says not started: %r" % end)
            ran = os.path.exists(t)
            out, end = r.call("echo after%d" % n)
            check_own(r, "after%d" % n, out, end)
            if os.path.exists(t) != ran:
                die("a call after a %d-byte one ran the code of the call stopped before it" % size)
    r.close()
    print("sizes containment=%s: calls of 3,800 to 70,000 bytes, run and stopped, in step"
          % r.containment)


def marks():
    """The ends the runner itself writes (a call that never reaches a slot: its minimum rank
    above the runner's, or a kill right after its stdin) come on the right streams, and later
    calls run."""
    r = Runner()
    code = b'unset __rx_c\nbuiltin echo ok 1<>"$__rx_st"; unset __rx_st __rx_in\necho RAN\n'
    for min_rank, stdin, kill, phase in ((9, None, False, "contain"), (0, b"abc", True, "cancel"),
                                         (0, b"abc", False, "cmd")):
        nonce = secrets.token_hex(16).encode()
        h = b"C %s %d %d %d" % (nonce, min_rank, -1 if stdin is None else len(stdin), len(code))
        r.send(h + b" " * (95 - len(h)) + b"\n" + code + (stdin or b"") + (b"K\n" if kill else b""))
        mark = b"\036rexec:%s:end" % nonce
        out = r.until(1, mark + b"\n")[:-len(mark) - 1]
        end = r.end_line(mark)
        if end["phase"] != phase or out != (b"RAN\n" if phase == "cmd" else b""):
            die("a call meant to end %s printed %r and ended %r" % (phase, out, end))
    out, end = r.call("echo after")
    check_own(r, "after", out, end)
    r.close()
    print("marks containment=%s: contain and cancel ends on both streams, then calls run"
          % r.containment)


def runner_dir(r):
    """The directory of runner r (its "owner" file names the runner's pid)."""
    base = os.path.join(TMP, ".rexec-%d" % os.geteuid())
    for e in os.listdir(base):
        try:
            with open(os.path.join(base, e, "owner")) as fh:
                if fh.read().split()[0] == str(r.p.pid):
                    return os.path.join(base, e)
        except (OSError, IndexError):
            pass
    die("no directory of runner %d" % r.p.pid)


def processes_of(d):
    """Processes whose command line names directory d (slots, call shells)."""
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as fh:
                    if d.encode() in fh.read():
                        found.append(int(p))
            except OSError:
                pass
    return found


def stall():
    """A runner whose every timed read is held up past its deadline, as a slot is on a machine
    so loaded that it is not scheduled for a second: strace (the runner's parent, so Yama's
    ptrace scope 1 allows it) delays the return of each pselect6 of the runner and what it
    starts (bash's read -t waits in one before each read()) by 1.2 s. Calls that ran must still
    end as run ("cmd", rc 0), and each slot's next call (a oneshot call: in a fork of the slot
    under a PID namespace) must run too. Until 2026-12-06 the slot read the call's status with
    `read -N 3 -t 1`: the deadline passed with the status taken from the FIFO, the call was
    reported as never run (phase setup), and the rest of the status, left in bash's read
    buffer, became the start of the fork's go-ahead (nonce mismatch: desync)."""
    global WAIT_S
    WAIT_S = 120  # a call here takes some 5 held-up reads (6 s); room for a loaded machine
    log = os.path.join(TMP, "stall-strace")
    r = Runner(wrap=("strace", "-f", "--seccomp-bpf", "-qq", "-o", log, "-e", "signal=none",
                     "-e", "trace=pselect6",
                     "-e", "inject=pselect6:delay_exit=1200000"))
    for i in range(4):  # slot 0, 1, 0, 1: each slot's call, then its fork's
        out, end = r.call("exec echo s%d" % i, oneshot=True)
        check_own(r, "s%d" % i, out, end)
    r.close()
    with open(log) as fh:
        delays = fh.read().count("(DELAYED)")
    if delays == 0:  # the injection must have held the runner up, or this tested nothing
        die("strace delayed no pselect6 of the runner")
    print("stall containment=%s: 4 calls of a runner whose timed reads were held up past their "
          "deadline (%d times) ran and were reported as run" % (r.containment, delays))


def bad_head(kind):
    """A frame whose header is not what runner.c writes (96 bytes, "C ", newline last) or that
    is neither C nor K: the runner runs nothing of it and exits (the controller then discards
    it); its slots go with it."""
    r = Runner()
    r.call("echo warm")
    d = runner_dir(r)
    nonce = secrets.token_hex(16).encode()
    t = trace("badhead-%s-%s" % (r.rnonce, kind))
    code = b'unset __rx_c\nbuiltin echo ok 1<>"$__rx_st"; unset __rx_st __rx_in\ntouch %s\n' % t.encode()
    h = head(nonce, code)
    frame = {"line": b"C %s 0 -1 %d\n" % (nonce, len(code)),  # a line, not padded
             "nonl": h[:-1] + b" ",                              # 96 bytes, no newline last
             "fields": h[:-2] + b"5\n",                         # five fields
             "other": b"X " + h[2:]}[kind] + code
    r.send(frame)
    try:
        r.until(1, b"\036rexec:%s:end\n" % nonce)
        die("a %s header ran as a call" % kind)
    except EOFError:
        pass
    r.close()
    deadline = time.monotonic() + WAIT_S
    while processes_of(d):
        if time.monotonic() > deadline:
            die("processes of a runner that exited are still there: %r" % processes_of(d))
        time.sleep(0.05)
    if os.path.exists(t):
        die("the code behind a %s header ran" % kind)
    print("bad header %s: nothing ran, the runner exited" % kind)


if SCENARIO == "kill":
    kill_then_calls(40, False)
    kill_then_calls(5, True)
elif SCENARIO == "fork":
    fork()
    fork_env()
elif SCENARIO == "fork-kill":  # oneshot frames stopped at once, then calls; then mixed
    kill_then_calls(40, False, oneshot=True)
    kill_then_calls(5, True, oneshot=True)
    mixed(150, oneshot=True)
elif SCENARIO.startswith("plant-"):
    plant(SCENARIO[len("plant-"):].replace("-o", ""), SCENARIO.endswith("-o"))
elif SCENARIO == "stall":
    stall()
elif SCENARIO == "marks":
    marks()
elif SCENARIO == "sizes":
    sizes()
elif SCENARIO.startswith("badhead-"):
    bad_head(SCENARIO[len("badhead-"):])
elif SCENARIO == "one-slot":
    one_slot(False)
    one_slot(True)
elif SCENARIO == "choose":
    choose()
elif SCENARIO == "mixed":
    mixed(150)
elif SCENARIO == "bench":  # not a test: the runner's own time for 300 calls, without ssh
    r = Runner()
    t0 = time.monotonic()
    for i in range(300):
        check_own(r, "B%d" % i, *r.call("echo B%d" % i))
    print("300 calls: %.0f ms" % ((time.monotonic() - t0) * 1000))
    r.close()
else:
    die("unknown scenario " + SCENARIO)
