#!/usr/bin/env python3
"""Holds the faces of serve's request keys against their one table (`rexec __interface --serve`,
rx_serve_keys in src/config/request.c): docs/serve-protocol.md's key tables (per op: the keys
and their types) and every unknown-key message it quotes, and the Python client
(python/rexec_client: SENDS and NOT_SENT in _proto.py, and the keys its functions really send).
Prints one line per difference and exits 1 if any.

usage: serve_interface_check.py REXEC_BIN SRC_DIR"""
import base64
import inspect
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading

BIN, SRC = sys.argv[1:3]
TABLE = json.loads(subprocess.run([BIN, "__interface", "--serve"], capture_output=True,
                                  text=True, check=True).stdout)
OPS = TABLE["ops"]
KEYS = {op: [k["name"] for k in TABLE["keys"] if op in k["ops"]] for op in OPS}
TYPES = {k["name"]: k["type"] for k in TABLE["keys"]}
COMMON = [k["name"] for k in TABLE["keys"] if set(k["ops"]) == set(OPS)]
problems = []


def bad(msg):
    problems.append(msg)


def check_set(face, what, got, want):
    got, want = set(got), set(want)
    if got - want:
        bad(f"{face}: {what} shows {sorted(got - want)}, which serve's table does not list")
    if want - got:
        bad(f"{face}: {what} lacks {sorted(want - got)}")


# ---- docs/serve-protocol.md -----------------------------------------------------------------
DOC = "docs/serve-protocol.md"
md = open(os.path.join(SRC, DOC), encoding="utf-8").read()
req = re.search(r"^## Requests\n(.*?)^## ", md, re.M | re.S)
req = req.group(1) if req else ""
if not req:
    bad(f"{DOC}: no '## Requests' section")
parts = re.split(r"^### (.*)\n", req, flags=re.M)  # intro, heading, body, heading, body...


def md_rows(body):
    """(key names, type) of each row of the body's first table."""
    t = re.search(r"((?:^\|.*\n)+)", body, re.M)
    rows = []
    for r in (t.group(1) if t else "").splitlines()[2:]:
        cells = [c.strip() for c in r.strip().strip("|").split("|")]
        rows.append((re.findall(r"`([a-z_0-9]+)`", cells[0]), cells[1] if len(cells) > 1 else ""))
    return rows


def check_rows(where, rows):
    keys = []
    for names, typ in rows:
        for n in names:
            keys.append(n)
            if n in TYPES and TYPES[n] != typ:
                bad(f"{DOC}: {where}: `{n}` is '{typ}', serve's table says '{TYPES[n]}'")
    return keys


common = check_rows("the table of every op's keys", md_rows(parts[0]))
op_row = re.search(r"^\| `op` \|[^|]*\|(.*)\|$", parts[0], re.M)
check_set(DOC, "the ops its `op` row names", re.findall(r"`([a-z]+)`", op_row.group(1)) if op_row
          else [], OPS)
check_set(DOC, "the table of every op's keys (under '## Requests')", common, COMMON)
seen = {}
for head, body in zip(parts[1::2], parts[2::2]):
    ops = [w for w in re.findall(r"`([a-z_]+)`", head) if w in OPS or w.isalpha()]
    keys = check_rows(f"'### {head}'", md_rows(body))
    for op in ops:
        if op not in OPS:
            bad(f"{DOC}: '### {head}' names op `{op}`, which serve's table does not list")
            continue
        seen[op] = seen.get(op, set()) | set(keys) | set(common)  # an op may have several sections
for op in OPS:
    if op not in seen:
        bad(f"{DOC}: no '### ' section for op `{op}`")
    else:
        check_set(DOC, f"the keys of `{op}`", seen[op], KEYS[op])
# Every unknown-key message the page quotes is serve's, word for word.
for m in re.finditer(r'unknown key(?: of \\?"([a-z]+)\\?")? \(expected one of: ([^)]*)\)', md):
    op, listed = m.group(1), [k.strip() for k in m.group(2).split(",")]
    if op is None:
        bad(f"{DOC}: quotes an unknown-key message that names no op: '{m.group(0)[:80]}…'")
    elif op not in KEYS:
        bad(f"{DOC}: quotes an unknown-key message of op `{op}`, which is not an op")
    elif listed != KEYS[op]:
        bad(f"{DOC}: quotes the unknown-key message of `{op}` as listing {listed}; serve lists "
            f"{KEYS[op]}")

# ---- python/rexec_client ----------------------------------------------------------------------
PY = "python/rexec_client"
sys.path.insert(0, os.path.join(SRC, "python"))
from rexec_client import _proto, sync  # noqa: E402

check_set(f"{PY}/_proto.py", "SENDS's ops", _proto.SENDS, OPS)
check_set(f"{PY}/_proto.py", "NOT_SENT's ops", set(_proto.NOT_SENT) - set(OPS), ())
for op in OPS:
    sends, unsent = set(_proto.SENDS.get(op, ())), set(_proto.NOT_SENT.get(op, {}))
    if sends & unsent:
        bad(f"{PY}/_proto.py: `{op}`: {sorted(sends & unsent)} both in SENDS and NOT_SENT")
    check_set(f"{PY}/_proto.py", f"SENDS + NOT_SENT of `{op}`", sends | unsent, KEYS[op])


def line_keys(line):
    return set(json.loads(line.split(b"\n", 1)[0]))


# What the functions really send: every keyword of call_request given, with each stdin form.
sig = inspect.signature(_proto.call_request)
SAMPLE = {"stdin": b"x", "stream": True, "parallel": 2, "timeout_s": 5}
kw = {n: SAMPLE.get(n, "x") for n, p in sig.parameters.items() if p.kind == p.KEYWORD_ONLY}
for op in ("run", "eval"):
    sent = set()
    for stdin in (b"x", b"x" * (_proto.INLINE_MAX + 1)):
        sent |= set(_proto.call_request(op, "h", "a", {"p": "v"}, **dict(kw, stdin=stdin)))
    check_set(f"{PY}: call_request", f"the keys of `{op}` it sends", sent, _proto.SENDS[op])
check_set(f"{PY}: call_request", "the keys of `check` it sends",
          _proto.call_request("check", "h"), _proto.SENDS["check"])
sent = set()
for raw in (False, True):
    for line in _proto.stdin_lines(b"x" * (_proto.PIECE + 1), lambda: raw):
        sent |= line_keys(line)
check_set(f"{PY}: stdin_lines", "the keys of `stdin` it sends", sent, _proto.SENDS["stdin"])
check_set(f"{PY}: cancel_line", "the keys of `cancel` it sends", line_keys(_proto.cancel_line()),
          _proto.SENDS["cancel"])

# The sync client's methods against a stand-in serve that records each request line.
REPLY = {"ping": {"type": "pong"}, "hosts": {"type": "list", "hosts": []},
         "actions": {"type": "list", "actions": []}, "groups": {"type": "list", "groups": []},
         "reload": {"type": "reloaded"}}
got = {}
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "s")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)

    def stand_in():
        while True:
            c, _ = srv.accept()
            with c, c.makefile("rb") as f:
                m = json.loads(f.readline() or b"{}")
                if not m:
                    return
                got.setdefault(m["op"], set()).update(m)
                reply = REPLY.get(m["op"], {"type": "done", "exit_status": 0})
                c.sendall(json.dumps(dict(reply, id=m.get("id"))).encode() + b"\n")

    t = threading.Thread(target=stand_in, daemon=True)
    t.start()
    cl = sync.Client(path, timeout=60)
    call_kw = {k: v for k, v in kw.items() if k not in ("stdin", "stream")}
    cl.run("h", "a", {"p": "v"}, stdin=b"x", **call_kw)
    cl.eval("h", "a", {"p": "v"}, stdin=b"x", **call_kw)
    cl.check("h")
    for op in ("ping", "hosts", "actions", "groups", "reload"):
        getattr(cl, op)()
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(path)  # ends the stand-in
    t.join(60)
    srv.close()
for op in ("run", "eval", "check", "ping", "hosts", "actions", "groups", "reload"):
    if op not in got:
        bad(f"{PY}: Client.{op} sent no `{op}` request")
    else:
        check_set(f"{PY}: Client.{op}", f"the keys of `{op}` it sends",
                  got[op] - {"stdin_stream"}, set(_proto.SENDS[op]) - {"stdin_stream"})

# docs/python-client.md names every keyword that becomes a key
pydoc = open(os.path.join(SRC, "docs/python-client.md"), encoding="utf-8").read()
for n in kw:
    if n in KEYS["run"] and f"`{n}`" not in pydoc:
        bad(f"docs/python-client.md: the keyword `{n}` (serve's key `{n}`) is not mentioned")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
