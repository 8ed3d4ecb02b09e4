#!/usr/bin/env python3
"""Calls through one rexec serve connection, one after another (tests/e2e: t_runner.sh,
t_runner_fork.sh). Usage: serve_calls.py SOCKET ACTION[:COUNT]...
ACTION alone: one call of ACTION on lab1, its result printed as one JSON line (exit_code, error,
stdout, executed, timed_out, containment). ACTION:COUNT: COUNT calls, nothing printed, exit 1
(with the result printed) at the first whose exit code is not 0."""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(120)
s.connect(sys.argv[1])
f = s.makefile("rb")
n = 0
for spec in sys.argv[2:]:
    action, _, count = spec.partition(":")
    for i in range(int(count or 1)):
        n += 1
        s.sendall((json.dumps({"op": "run", "id": n, "targets": "lab1", "action": action}) + "\n").encode())
        r = {}
        while True:
            o = json.loads(f.readline())
            if o.get("type") == "result" and o.get("id") == n:
                r = o
            if o.get("type") in ("done", "error") and o.get("id") == n:
                break
        r = r or o
        if count:
            if r.get("exit_code") != 0:
                print(json.dumps(r)); sys.exit(1)
        else:
            print(json.dumps({"exit_code": r.get("exit_code"), "error": r.get("error"),
                              "stdout": r.get("stdout"), "executed": r.get("executed"),
                              "timed_out": r.get("timed_out"), "containment": r.get("containment")}))
