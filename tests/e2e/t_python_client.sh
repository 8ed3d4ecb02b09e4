#!/usr/bin/env bash
# The rexec_client Python package (python/): `pip install` from the repository works offline; the
# sync API runs, evaluates and checks with results as dicts and errors as RexecError carrying
# exit_status, and streams a stdin past 48 KiB (bytes or a file object) to serve in "stdin" lines
# (raw pieces once serve says it takes them);
# the asyncio API runs 10 calls at once, streams output as it arrives (the second
# line is written only after the client saw the first), and cancels; scripts/rexec-client.py
# (a shim over the package) still works.
tid="python client: install, sync, asyncio x10, streaming, cancel"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'
GATE=$RX_TMP/gate
HOLD=$RX_TMP/hold.started
ws_add_action t.echo '{"risk": "L0", "command": "echo {text}", "params": {"text": {"type": "string"}}}'
ws_add_action t.exit '{"risk": "L0", "command": "exit {code}", "params": {"code": {"type": "int"}}}'
# t.two: one line, then waits (on the VM) until the client, having seen it, opens the gate
# The "." line: the redactor holds back a line's last bytes while they could be part of a wrapped
# encoded secret (hex/base64/base32 wrapped at any column) until the next byte shows they are not
# (docs/redaction.md); a line ending in a character outside those alphabets is released at once.
ws_add_action t.two "{\"risk\": \"L0\", \"command\": \"echo first; echo .; while [ ! -e $GATE ]; do sleep 0.05; done; echo second\"}"
ws_add_action t.hold "{\"risk\": \"L0\", \"command\": \"touch $HOLD; exec sleep 3141\"}"
ws_add_action t.sha '{"risk": "L0", "command": "sha256sum | cut -d\" \" -f1"}'

# ---- install from the repository, offline, into a private directory -----------------------------
cp -r "$REXEC_SRC/python" "$RX_TMP/src"
rm -rf "$RX_TMP/src/build" "$RX_TMP/src"/*.egg-info
assert_exit 0 "$RX_PYTHON" -m pip install --no-build-isolation --no-index --no-deps -q \
    --target "$RX_TMP/site" "$RX_TMP/src"
test -f "$RX_TMP/site/rexec_client/aio.py" || fail "pip installed no rexec_client"
test -x "$RX_TMP/site/bin/rexec-client" || fail "pip installed no rexec-client command"

SOCK=$RX_TMP/s.sock
start_serve

cat >"$RX_TMP/t.py" <<'PY'
import asyncio, os, sys, time
import rexec_client
from rexec_client import Client, AsyncClient, RexecError

sock, gate, hold = sys.argv[1:4]
assert rexec_client.__file__.startswith(os.environ["SITE"]), rexec_client.__file__

# ---- sync ----
c = Client(sock, timeout=120)
r = c.run("lab1", "t.echo", {"text": "hello"})
assert r["exit_status"] == 0 and r["hosts"] == ["lab1"], r
assert r["results"][0]["stdout"] == "hello\n" and r["results"][0]["decision"] == "ALLOW", r
r = c.run("@lab", "t.exit", {"code": 3})
assert r["exit_status"] == 3 and sorted(x["host"] for x in r["results"]) == ["lab1", "lab2"], r
try:
    c.run("lab1", "t.exit", {"code": 4}, raise_on_error=True)
    raise AssertionError("no RexecCallError")
except rexec_client.RexecCallError as e:
    assert e.exit_status == 4 and e.result["results"][0]["exit_code"] == 4, e.result
try:
    c.run("lab9", "t.echo", {"text": "x"})              # refused as a whole: an exception
    raise AssertionError("no RexecError")
except RexecError as e:
    assert e.exit_status == 78 and "lab9" in str(e), (e, e.exit_status)
r = c.run("lab1", "t.nope")                             # refused for the host: its result
assert r["exit_status"] == 78 and "t.nope" in r["results"][0]["error"], r
r = c.run("lab1", "t.exit", {"code": "abc"})          # a per-host refusal is a result
assert r["exit_status"] == 65 and r["results"][0]["decision"] is None, r
r = c.eval("lab1", "t.echo", {"text": "hi"})
assert r["results"][0]["decision"] == "ALLOW" and r["results"][0]["executed"] is False, r
r = c.check("lab1")
assert r["exit_status"] == 0 and isinstance(r["results"][0]["facts"], dict), r
assert [g["name"] for g in c.groups()] == ["lab"] and c.ping()["pid"] > 0
assert c.metrics().startswith("# HELP rexec_build_info ")  # serve's Prometheus text
# stdin past what a request line carries is streamed ("stdin_stream"): bytes, and a file object
import base64, hashlib, json
big = os.urandom(3 * 1024 * 1024 + 17)
r = c.run("@lab", "t.sha", stdin=big)
assert r["exit_status"] == 0 and [x["stdout"] for x in r["results"]] == [
    hashlib.sha256(big).hexdigest() + "\n"] * 2, r
with open(os.path.join(os.path.dirname(gate), "big.bin"), "wb") as f:
    f.write(big)
with open(f.name, "rb") as f:
    r = c.run("lab1", "t.sha", stdin=f)
assert r["results"][0]["stdout"] == hashlib.sha256(big).hexdigest() + "\n", r
# the pieces: base64 lines until serve's "accepted" says "stdin_bytes", raw pieces after it
from rexec_client._proto import stdin_lines
asked = []
stream = b"".join(stdin_lines(big, lambda: asked.append(1) or len(asked) > 2))
got, kinds, at = b"", [], 0
while True:
    nl = stream.index(b"\n", at)
    o = json.loads(stream[at:nl])
    at = nl + 1
    if "bytes" in o:
        got += stream[at:at + o["bytes"]]; at += o["bytes"]; kinds.append("raw")
    elif "data_base64" in o:
        got += base64.b64decode(o["data_base64"]); kinds.append("base64")
    if o.get("eof"):
        break
assert got == big and at == len(stream), (len(got), at, len(stream))
assert kinds[:2] == ["base64", "base64"] and set(kinds[2:]) == {"raw"}, kinds
from rexec_client._proto import Collector
for says in (True, None):
    col = Collector()
    col.add({"id": 1, "type": "accepted", "hosts": ["lab1"], "stdin_bytes": says})
    assert col.stdin_bytes is (says is True), says
try:
    Client(sock + ".nope").ping()
    raise AssertionError("no RexecError")
except RexecError as e:
    assert e.exit_status == 255, e

# ---- approvers: approvals, approve, deny, watch; a run that waits for a decision ----
import subprocess
def challenge(unit):  # made by the rexec process itself (no serve client: no requester)
    p = subprocess.run([os.environ["REXEC_BIN"], "--workspace", os.environ["WS"], "run", "lab1",
                        "svc.restart", "--param", "unit=" + unit, "--json"], capture_output=True,
                       text=True)
    return __import__("json").loads(p.stdout)["challenge_id"]
ida, idd = challenge("pya"), challenge("pyd")
pending = {x["challenge_id"]: x for x in c.approvals()}
assert ida in pending and idd in pending, pending
assert pending[ida]["hosts"] == ["lab1"] and pending[ida]["params"] == {"unit": "pya"}, pending[ida]
assert pending[ida]["requester"] is None and pending[ida]["state"] == "pending", pending[ida]
r = c.approve(ida, comment="py ok")
assert r["challenge_id"] == ida and r["via"] == "socket", r
assert c.approvals(ida)[0]["comment"] == "py ok", c.approvals(ida)
r = c.deny(idd, reason="py no")
assert r["challenge_id"] == idd and "denied_by" in r, r
try:
    c.approve(idd)
    raise AssertionError("no RexecError")
except RexecError as e:
    assert e.exit_status == 77 and "denied" in e.message, e
try:
    c.approve("ch-12")
    raise AssertionError("no RexecError")
except RexecError as e:
    assert e.exit_status == 65, e
# waiting: serve's own user may not approve its own request, so this one runs out of time
r = c.run("lab1", "svc.restart", {"unit": "pyw"}, wait_approval_s=1)
assert r["exit_status"] == 77 and r["challenge"]["hosts"] == ["lab1"], r
assert "no decision within wait_approval_s" in r["results"][0]["error"], r
idw = challenge("pyw2")
for ev in c.watch():  # the pending ones first
    if ev["event"] == "approval_pending" and ev["challenge"]["challenge_id"] == idw:
        break

# ---- asyncio: 10 at once, streaming, cancel ----
async def main():
    ac = AsyncClient(sock)
    t0 = time.monotonic()
    rs = await asyncio.wait_for(asyncio.gather(
        *(ac.run("lab%d" % (1 + i % 2), "t.echo", {"text": "n%d" % i}) for i in range(10))), 240)
    assert [x["results"][0]["stdout"] for x in rs] == ["n%d\n" % i for i in range(10)], rs
    assert len({x["results"][0]["run_id"] for x in rs}) == 10, rs
    assert all(x["exit_status"] == 0 for x in rs), rs
    assert 'rexec_calls_total{decision="allowed",exit_class="ok"} ' in await ac.metrics()
    big = os.urandom(1024 * 1024 + 1)
    r = await ac.run("lab2", "t.sha", stdin=big)
    assert r["results"][0]["stdout"] == hashlib.sha256(big).hexdigest() + "\n", r
    print("10 concurrent calls: %.2f s" % (time.monotonic() - t0))

    seen = []
    async for m in ac.stream("lab1", "t.two"):
        if m["type"] == "output":
            seen.append(m["bytes"])
            if b"first" in b"".join(seen) and not os.path.exists(gate):
                open(gate, "w").close()           # the VM goes on only once we saw line 1
        if m["type"] == "done":
            assert m["exit_status"] == 0, m
    assert b"".join(seen) == b"first\n.\nsecond\n", seen

    call = await ac.start("run", "lab1", "t.hold")
    while not os.path.exists(hold):
        await asyncio.sleep(0.02)
    await call.cancel()
    r = await asyncio.wait_for(call.wait(), 120)
    assert r["exit_status"] == 130 and "cancel" in r["results"][0]["error"], r

    try:
        await ac.run("@nogroup", "t.echo", {"text": "x"})
        raise AssertionError("no RexecError")
    except RexecError as e:
        assert e.exit_status == 78, e

asyncio.run(main())
print("python client ok")
PY
assert_exit 0 env SITE="$RX_TMP/site" PYTHONPATH="$RX_TMP/site" REXEC_BIN="$REXEC_BIN" WS="$WS" \
    timeout 300 "$RX_PYTHON" "$RX_TMP/t.py" "$SOCK" "$GATE" "$HOLD"
assert_contains "$OUT" "python client ok"
cat "$OUT"

# the installed command and the script in scripts/ (a shim over the package in the tree)
assert_exit 3 env PYTHONPATH="$RX_TMP/site" timeout 60 "$RX_TMP/site/bin/rexec-client" --socket "$SOCK" lab1 t.exit -p code=3
assert_exit 0 timeout 60 "$REXEC_SRC/scripts/rexec-client.py" --socket "$SOCK" @lab t.echo -p text=via-shim
assert_eq "via-shim via-shim" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')" "shim output"
assert_exit 78 timeout 60 "$REXEC_SRC/scripts/rexec-client.py" --socket "$SOCK" lab9 t.echo -p text=x
pass
