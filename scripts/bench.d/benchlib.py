"""What the benchmarks measure of a process the same way (bench.py, serve_ab.py): its CPU time
and its syncs per call. Not a benchmark itself."""
import os
import shutil
import signal
import subprocess
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
