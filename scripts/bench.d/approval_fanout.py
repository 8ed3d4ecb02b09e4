#!/usr/bin/env python3
"""A 32-host fan-out approved with one decision (issue 32; not a test: scripts/bench.d/
approval_fanout.sh starts it as root with a lab, serve, an agent user and an approver user).
The agent sends one `run` to the group with wait_approval_s; the scripted approver of
tests/e2e/approvals_client.py approves the single challenge once; a second watcher (the approver
user too) records every event until the end, so a second challenge would show. Then the agent
names the grant again: in a run to the group and in a run to one host, each must be refused for
every host. Prints the figures and the checks, and exits 1 when a check fails; with
FANOUT_DEBUG=FILE in the environment, every reply and event goes to FILE as evidence.

  approval_fanout.py drive SOCK WS AGENT APPROVER GROUP UNIT RAN   prints the figures
  approval_fanout.py agent SOCK GROUP UNIT HOST                    (internal) the agent's calls
  approval_fanout.py watch SOCK                                    (internal) every event
"""
import datetime
import glob
import json
import os
import subprocess
import sys
import time

ACTION = "bench.fanout"
HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "..", "..", "tests", "e2e", "approvals_client.py")
sys.path.insert(0, os.path.dirname(CLIENT))
from approvals_client import connect, send  # noqa: E402


def request(path, req):
    """One request on a connection of its own: its replies, each with the time it arrived."""
    s, f = connect(path)
    send(s, req)
    replies = []
    for line in f:
        m = json.loads(line)
        m["_t"] = time.time()
        replies.append(m)
        if m.get("type") in ("done", "error"):
            break
    s.close()
    return replies


def agent(path, group, unit, host):
    """The fan-out with wait_approval_s, then the grant named again (group, then one host)."""
    req = {"op": "run", "id": "fan", "targets": "@" + group, "action": ACTION, "params": {"unit": unit},
           "wait_approval_s": 120, "parallel": 1024}
    floor = dict(req, id="floor-before", action=ACTION + "-l0")
    del floor["wait_approval_s"]
    floor_cold = floor_run(path, floor)  # opens the connections
    floor_before = [floor_run(path, dict(floor, id="floor-warm%d" % i)) for i in (1, 2)]
    t0 = time.time()
    fan = request(path, req)
    cid = next((m["challenge_id"] for m in fan if m.get("type") == "challenge"), None)
    reuse = dict(req, id="reuse-group", grant_id=cid)
    del reuse["wait_approval_s"]
    again_group = request(path, reuse)
    again_host = request(path, dict(reuse, id="reuse-host", targets=host))
    floor_after = floor_run(path, dict(floor, id="floor-after"))
    print(json.dumps({"floor": [floor_cold, floor_before, floor_after], "t0": t0, "fan": fan, "challenge_id": cid, "reuse_group": again_group,
                      "reuse_host": again_host}), flush=True)


def floor_run(path, req):
    """The peer: the same fan-out at L0 (no approval); ms to the last host's result, hosts ok."""
    t0 = time.time()
    res = results(request(path, req))
    return {"ms": (max(r["_t"] for r in res) - t0) * 1000 if res else None,
            "ok": sum(1 for r in res if r.get("exit_code") == 0 and r.get("executed"))}


def watch(path):
    s, f = connect(path)
    send(s, {"op": "watch", "id": "w"})
    for line in f:
        m = json.loads(line)
        m["_t"] = time.time()
        print(json.dumps(m), flush=True)


def as_user(user, *args):
    return ["setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups", sys.executable] + \
        list(args)


def audit_records(ws):
    recs = []
    for p in sorted(glob.glob(os.path.join(ws, "audit", "audit*.log"))):
        with open(p) as fh:
            recs += [json.loads(line) for line in fh if line.strip()]
    return recs


def iso_s(ts):
    """2026-12-06T08:15:00.123Z -> seconds since the epoch."""
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def results(replies):
    return [m for m in replies if m.get("type") == "result"]


def drive(path, ws, agent_user, approver_user, group, unit, ran_file):
    hosts = json.load(open(os.path.join(ws, "rexec.json")))["groups"][group]
    watcher = subprocess.Popen(as_user(approver_user, os.path.abspath(__file__), "watch", path),
                               stdout=subprocess.PIPE, text=True)
    first = json.loads(watcher.stdout.readline())  # the watch's first reply: it is watching
    approver = subprocess.Popen(as_user(approver_user, CLIENT, "approver", path, "approve", unit,
                                        "1", "fan-out bench"),
                                stdout=subprocess.PIPE, text=True)
    appr_first = approver.stdout.readline()  # the approver's watch is on before the agent asks
    out = subprocess.run(as_user(agent_user, os.path.abspath(__file__), "agent", path, group,
                                 unit, hosts[len(hosts) // 2]),
                         capture_output=True, text=True, check=True).stdout
    a = json.loads(out)
    try:
        appr_rest = approver.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:  # it decided nothing: the report says what was seen
        print("the approver made no decision within 30 s of the agent's end", flush=True)
        approver.kill()
        appr_rest = approver.communicate()[0]
    approver_events = [json.loads(x) for x in [appr_first] + appr_rest.splitlines() if x.strip()]
    # one more event that must come after all of the above: the watcher has seen everything
    subprocess.run(as_user(approver_user, CLIENT, "lines", path,
                           '{"op":"approvals","id":"end"}'), capture_output=True, check=True)
    watcher.terminate()
    events = [first] + [json.loads(x) for x in watcher.communicate(timeout=60)[0].splitlines()
                        if x.strip()]
    if os.environ.get("FANOUT_DEBUG"):  # every reply and event, for a failed check's evidence
        json.dump({"agent": a, "approver": approver_events, "watcher": events},
                  open(os.environ["FANOUT_DEBUG"], "w"), indent=1)
    return report(ws, hosts, unit, ran_file, a, approver_events, events)


def report(ws, hosts, unit, ran_file, a, approver_events, events):
    cid, fan = a["challenge_id"], a["fan"]
    res = results(fan)
    pending = [e for e in events if e.get("event") == "approval_pending"]
    decided = [e for e in events if e.get("event") == "approval_decided"]
    challenge_lines = [m for m in fan if m.get("type") == "challenge"]
    ran_hosts = sorted({r["host"] for r in res if r.get("reason") == "ALLOW_GRANT"
                        and r.get("executed") and r.get("exit_code") == 0})
    ran_lines = [x for x in open(ran_file).read().split() if x == unit]
    recs = audit_records(ws)
    uses = [r for r in recs if r.get("grant_id") == cid and r.get("reason") == "ALLOW_GRANT"
            and r.get("phase") == "intent"]
    use_hosts = sorted(r["host"] for r in uses)
    approvals = [r for r in recs if r.get("phase") == "approval" and r.get("run_id") == cid]
    # a challenge is ch-ID.json until its grant is taken (renamed ch-ID.used): distinct ids
    files = {os.path.basename(f).split(".")[0]
             for f in glob.glob(os.path.join(ws, "approvals", "ch-*"))}
    reuse = results(a["reuse_group"]) + results(a["reuse_host"])
    reusable = [r for r in reuse if r.get("executed") or r.get("reason") == "ALLOW_GRANT"]
    refused_used = [r for r in reuse if r.get("reason") == "GRANT_USED"
                    and r.get("exit_status") == 77 and not r.get("executed")]
    t0 = a["t0"]
    t_chal = challenge_lines[0]["_t"] if challenge_lines else float("nan")
    t_last = max(r["_t"] for r in res) if res else float("nan")
    t_first = min(r["_t"] for r in res) if res else float("nan")
    t_pend = pending[0]["_t"] if pending else float("nan")
    t_dec = next((e["_t"] for e in decided if e.get("challenge_id") == cid), float("nan"))
    n = len(hosts)
    print("challenge %s for %d hosts (the challenge line lists %d)" %
          (cid, n, len(challenge_lines[0]["hosts"]) if challenge_lines else 0))
    checks = [
        ("challenges made (approval_pending events seen by a watcher)", 1, len(pending)),
        ("challenge lines in the agent's replies", 1, len(challenge_lines)),
        ("challenges in approvals/ (ch-ID.json or .used)", 1, len(files)),
        ("decisions by the approver", 1, sum(1 for e in approver_events
                                             if e.get("type") == "approved")),
        ("approval records in the audit log", 1, len(approvals)),
        ("hosts that ran on the grant (result ALLOW_GRANT, exit 0)", n, len(ran_hosts)),
        ("runs recorded by the command itself (lines in the shared file)", n, len(ran_lines)),
        ("audit intents using the grant (ALLOW_GRANT, grant_id)", n, len(uses)),
        ("distinct hosts among them", n, len(set(use_hosts))),
        ("grant named again, group + one host: hosts refused GRANT_USED (77)", n + 1,
         len(refused_used)),
        ("grant named again: hosts that ran (reusable)", 0, len(reusable)),
        ("grant used file approvals/%s.used" % cid, True,
         os.path.exists(os.path.join(ws, "approvals", "%s.used" % cid))),
    ]
    bad = 0
    for label, want, got in checks:
        ok = want == got
        bad += not ok
        print("  %-72s %6s  (want %s)%s" % (label, got, want, "" if ok else "  FAILED"))
    print("times (ms, from the agent's request; same clock):")
    for label, t in (("challenge line to the agent", t_chal), ("approval_pending at a watcher",
                     t_pend), ("approval_decided at a watcher", t_dec),
                     ("first host's result", t_first), ("last host's result", t_last)):
        print("  %-40s %9.1f" % (label, (t - t0) * 1000))
    print("  %-40s %9.1f" % ("decision -> last host's result", (t_last - t_dec) * 1000))
    its = sorted(iso_s(r["ts"]) for r in uses)
    if its:  # when each host took its use (the audit intent's ts, milliseconds)
        print("  %-40s %9.1f .. %.1f" % ("grant uses' audit intents (first .. last)",
                                         (its[0] - t0) * 1000, (its[-1] - t0) * 1000))
    print("  %-40s %9.1f" % ("host durations (max, command on the VM)",
                              max((r.get("duration_ms") or 0) for r in res) if res else 0))
    for r in res + reuse:
        if r not in refused_used and not (r.get("reason") == "ALLOW_GRANT"
                                          and r.get("exit_code") == 0 and r in res):
            print("  unexpected result: %s" % json.dumps({k: r.get(k) for k in (
                "id", "host", "reason", "exit_status", "executed", "error")}))
    fc, fb, fa = a["floor"]
    print("peer, the same fan-out at L0 (no approval), request -> last host's result: first "
          "(cold) %.1f ms, then (warm) %s ms, after the approved one %.1f ms (hosts ok: %s)" % (
              fc["ms"] or 0, " and ".join("%.1f" % (x["ms"] or 0) for x in fb), fa["ms"] or 0,
              ", ".join(str(x["ok"]) for x in [fc] + fb + [fa])))
    # the faster warm one before: the approved fan-out's connections are as warm
    floor_ms = min((x["ms"] for x in fb if x["ms"]), default=None)
    if floor_ms:
        print("ratio, approved fan-out vs the warm L0 peer (the faster): %.2f; approval's own "
              "cost (the decision's time included): %.1f ms" % ((t_last - t0) * 1000 / floor_ms, (t_last - t0) * 1000 - floor_ms))
    print("goal (one decision, %d grants used, 0 reusable): %s" %
          (n, "MET" if bad == 0 else "NOT MET (%d checks failed)" % bad))
    return bad


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "agent":
        agent(*sys.argv[2:6])
    elif cmd == "watch":
        watch(sys.argv[2])
    else:
        sys.exit(1 if drive(*sys.argv[2:9]) else 0)
