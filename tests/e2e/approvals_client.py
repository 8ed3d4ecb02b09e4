#!/usr/bin/env python3
"""The caller and the scripted approver of tests/e2e/t_serve_approvals.sh (and of
scripts/bench.d/approval_fanout.py; both approval benches take connect and send from here), on
serve's socket: one JSON line each way, no sleeps.

  run SOCK TARGETS ACTION UNIT WAIT_S [leave]   a run with wait_approval_s; prints every reply;
                                                leave: disconnect once the challenge line came
  approver SOCK DECISION UNIT N [NOTE]          watch; decide (approve|deny) each pending
                                                challenge whose params.unit is UNIT; print every
                                                event; exit after N decisions
  lines SOCK JSON...                            send each line, print the first reply to each
  slow SOCK GO_FILE                             watch, then read nothing until GO_FILE exists;
                                                then print every line until serve closes
"""
import json
import os
import socket
import sys
import time


def connect(path, timeout=300):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s, s.makefile("rb")


def send(s, o):
    s.sendall(json.dumps(o).encode() + b"\n")


def out(m):
    print(json.dumps(m), flush=True)


def run(path, targets, action, unit, wait_s, leave=False):
    s, f = connect(path)
    send(s, {"op": "run", "id": "r", "targets": targets, "action": action,
             "params": {"unit": unit}, "wait_approval_s": float(wait_s)})
    for line in f:
        m = json.loads(line)
        out(m)
        if leave and m.get("type") == "challenge":
            s.close()
            return 0
        if m.get("type") in ("done", "error"):
            return 0
    return 1


def approver(path, decision, unit, n, note=None):
    s, f = connect(path)
    send(s, {"op": "watch", "id": "w"})
    done = 0
    for line in f:
        m = json.loads(line)
        out(m)
        if m.get("type") == "error" and m.get("id") == "w":
            return 1
        if m.get("event") != "approval_pending":
            continue
        ch = m["challenge"]
        if ch.get("params", {}).get("unit") != unit:
            continue
        req = {"op": decision, "id": "d", "challenge_id": ch["challenge_id"]}
        if note is not None:
            req["comment" if decision == "approve" else "reason"] = note
        send(s, req)
        done += 1
        if done == n:  # the decision's reply, then leave
            for line2 in f:
                m2 = json.loads(line2)
                out(m2)
                if m2.get("id") == "d":
                    return 0 if m2.get("type") in ("approved", "denied") else 1
    return 1


def lines(path, *reqs):
    s, f = connect(path)
    for r in reqs:
        o = json.loads(r)
        send(s, o)
        for line in f:
            m = json.loads(line)
            if m.get("id") == o.get("id"):
                out(m)
                break
    return 0


def slow(path, go):
    s, f = connect(path)
    send(s, {"op": "watch", "id": "w"})
    while not os.path.exists(go):  # a watcher that does not read (the test says when to)
        time.sleep(0.05)
    for line in f:
        print(line.decode().strip()[:300], flush=True)
    return 0


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "run":
        sys.exit(run(*args[:5], leave=len(args) > 5 and args[5] == "leave"))
    if cmd == "slow":
        sys.exit(slow(*args))
    if cmd == "approver":
        sys.exit(approver(args[0], args[1], args[2], int(args[3]), *args[4:5]))
    sys.exit(lines(*args))
