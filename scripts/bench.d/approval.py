#!/usr/bin/env python3
"""Approval latency (not a test; scripts/bench.d/approval.sh starts it as root with a lab, serve,
an agent user and an approver user). An agent's L2 call with wait_approval_s, an approver
watching over the socket that approves as soon as the approval_pending event arrives: from the
request to the command's start on the VM, minus the approver's reaction (event received to
approve sent). The goal (issue 32): at most the reaction + 50 ms. The peer, measured in the same
run: the flow without waiting (the call answers 75, the approver approves, the agent calls again
with grant_id). Times are CLOCK_REALTIME of this machine; the "VM" is a loopback sshd here, so
the command's `date +%s.%N` is on the same clock.

  approval.py drive SOCK AGENT APPROVER N      prints the table
  approval.py agent SOCK MODE UNIT             (internal) one call as the agent
  approval.py approver SOCK N                  (internal) the watching approver
"""
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "e2e"))
from approvals_client import connect, send  # noqa: E402

ACTION = "bench.approve"


def cmd_start(results):
    """The command's first stdout line: its start, as `date +%s.%N` printed it."""
    for r in results:
        if r.get("reason") in ("ALLOW_GRANT", "ALLOW_LEVEL"):
            return float(r["stdout"].split()[0])
    return None


def agent(path, mode, unit):
    """wait: one run with wait_approval_s; retry: run (75), wait for the grant, run again."""
    t0 = time.time()
    s, f = connect(path, 120)
    req = {"op": "run", "id": 1, "targets": "lab1", "action": ACTION, "params": {"unit": unit}}
    if mode == "plain":  # the floor: the same command at L0, no approval
        req["action"] = ACTION + "-l0"
    if mode == "wait":
        req["wait_approval_s"] = 60
    send(s, req)
    results, cid = [], None
    for line in f:
        m = json.loads(line)
        if m.get("type") == "result":
            results.append(m)
            cid = cid or m.get("challenge_id")
        if m.get("type") == "challenge":
            cid = m["challenge_id"]
        if m.get("type") in ("done", "error"):
            break
    if mode == "retry":  # the caller's side of the old flow: ask again until the grant works
        while cmd_start(results) is None:
            send(s, dict(req, id=2, grant_id=cid))
            results = []
            for line in f:
                m = json.loads(line)
                if m.get("type") == "result":
                    results.append(m)
                if m.get("type") in ("done", "error"):
                    break
    print(json.dumps({"t0": t0, "cmd": cmd_start(results), "challenge_id": cid}), flush=True)


def approver(path, n):
    s, f = connect(path, 120)
    send(s, {"op": "watch", "id": "w"})
    done = 0
    for line in f:
        m = json.loads(line)
        if m.get("event") != "approval_pending":
            continue
        t_event = time.time()
        send(s, {"op": "approve", "id": "a", "challenge_id": m["challenge"]["challenge_id"]})
        t_sent = time.time()
        print(json.dumps({"unit": m["challenge"]["params"].get("unit"), "event": t_event,
                          "sent": t_sent}), flush=True)
        done += 1
        if done == n:
            return


def as_user(user, *args):
    return ["setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups",
            sys.executable, os.path.abspath(__file__)] + list(args)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def drive(path, agent_user, approver_user, n):
    """Rounds alternate between the two flows, so that a change of load hits both alike."""
    rows = {"wait": ([], [], [], []), "retry": ([], [], [], []), "plain": ([], [], [], [])}
    appr = subprocess.Popen(as_user(approver_user, "approver", path, str(2 * n)),
                            stdout=subprocess.PIPE, text=True)
    for i in range(3 * n):
        mode = ("wait", "retry", "plain")[i % 3]
        unit = "%s%d" % (mode, i)
        out = subprocess.run(as_user(agent_user, "agent", path, mode, unit),
                             capture_output=True, text=True, check=True).stdout
        a = json.loads(out)
        d = json.loads(appr.stdout.readline()) if mode != "plain" else \
            {"unit": unit, "sent": 0, "event": 0}
        assert d["unit"] == unit, (d, unit)
        if a["cmd"] is None:
            raise SystemExit("round %d: the command did not run: %s" % (i, out))
        reaction = d["sent"] - d["event"]
        total = a["cmd"] - a["t0"]
        totals, reactions, overheads, after = rows[mode]
        totals.append(total * 1000)
        reactions.append(reaction * 1000)
        overheads.append((total - reaction) * 1000)
        after.append((a["cmd"] - d["sent"]) * 1000 if d["sent"] else 0.0)
    appr.wait(60)
    print("%-44s %9s %9s %9s %9s" % ("", "p50 ms", "p90 ms", "max ms", "mean ms"))
    for mode, label in (("wait", "wait_approval_s (one call)"),
                        ("retry", "peer: 75, approve, call again"),
                        ("plain", "floor: the same command at L0, no approval")):
        totals, reactions, overheads, after = rows[mode]
        print(label)
        for name, v in (("request -> command start", totals), ("approver's reaction", reactions),
                        ("request -> start, minus the reaction", overheads),
                        ("approve sent -> command start", after)):
            print("  %-42s %9.1f %9.1f %9.1f %9.1f" % (name, pct(v, 50), pct(v, 90), max(v),
                                                        statistics.mean(v)))
    w, r = rows["wait"][2], rows["retry"][2]
    print("goal: request -> command start <= reaction + 50 ms: p50 %.1f ms, p90 %.1f ms, max "
          "%.1f ms over the reaction (%s)" % (pct(w, 50), pct(w, 90), max(w),
                                              "met at p90" if pct(w, 90) <= 50 else
                                              "NOT met at p90"))
    p = rows["plain"][2]
    print("ratio, wait vs the peer (minus the reaction, p50): %.2f" % (pct(w, 50) / pct(r, 50)))
    print("approval's own cost over the floor (p50): wait %.1f ms, peer %.1f ms" %
          (pct(w, 50) - pct(p, 50), pct(r, 50) - pct(p, 50)))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "agent":
        agent(*sys.argv[2:5])
    elif cmd == "approver":
        approver(sys.argv[2], int(sys.argv[3]))
    else:
        drive(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
