#!/usr/bin/env bash
# serve's streamed stdin (docs/serve-protocol.md, "Streaming stdin"): a run sent with
# "stdin_stream": true takes its stdin in "stdin" lines, spooled by serve, and only then runs.
# Checked: 20 MiB from a file and from a pipe through `rexec run --socket`, byte for byte, also on
# two hosts at once; raw pieces ("bytes": N and N bytes after the line) kept in step (also past
# the limit and after a pause mid-piece), and the CLI sending them only to a serve that says it
# takes them (base64 lines otherwise); the gate hashed it (an L2 call's challenge names its size
# and sha256); an empty stdin; past limits.max_stdin_bytes, a bad piece, a pause longer than
# --stdin-timeout, a cancel and a half-close all end the request with nothing run and every host
# saying why; a stdin line for no waiting request is an error line; the pieces taken are not
# logged; nothing is left in evidence/; the audit verifies.
tid="serve: streamed stdin"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
RAN=$RX_TMP/ran
: >"$RAN"
ws_edit 'c["limits"]["max_stdin_bytes"] = 24 * 1024 * 1024'
ws_add_action t.sha "{\"risk\": \"L0\", \"command\": \"sha256sum | cut -d' ' -f1; echo ran >> $RAN\"}"
ws_add_action t.sha2 '{"risk": "L2", "command": "sha256sum"}'

SOCK=$RX_TMP/serve.sock
SERVE_ERR=$RX_TMP/serve.log
start_serve --stdin-timeout 1 --log json
SX=("$REXEC_BIN" --workspace "$WS" --socket "$SOCK")

# 20 MiB, far past the 64 KiB a request line can carry, from a file and from a pipe.
head -c $((20 * 1024 * 1024)) /dev/urandom >"$RX_TMP/big"
want=$(sha256sum <"$RX_TMP/big" | cut -d' ' -f1)
assert_exit 0 timeout 120 "${SX[@]}" run lab1 t.sha --stdin "$RX_TMP/big"
assert_eq "$want" "$(cat "$OUT")" "sha256 of 20 MiB from a file, as the command saw it"
assert_exit 0 timeout 120 bash -c '"$@" <"$0"' "$RX_TMP/big" "${SX[@]}" run lab1 t.sha --stdin -
assert_eq "$want" "$(cat "$OUT")" "sha256 of 20 MiB from a pipe"
assert_exit 0 timeout 120 "${SX[@]}" run lab1,lab2 t.sha --stdin "$RX_TMP/big" --json
assert_eq 2 "$(grep -c "\"stdout\":\"$want\\\\n\"" "$OUT")" "hosts that got the 20 MiB"
assert_eq 4 "$(wc -l <"$RAN")" "runs so far"

# The gate hashed the spooled stdin: an L2 call's challenge names its size and sha256.
assert_exit 75 timeout 120 "${SX[@]}" run lab1 t.sha2 --stdin "$RX_TMP/big" --json
ch=$(json challenge_id)
[[ -n $ch && $ch != null ]] || fail "no challenge for the L2 call"
assert_eq "$want $((20 * 1024 * 1024))" "$("$RX_PYTHON" -c 'import json,sys
d = json.load(open(sys.argv[1]))
print(d["stdin"]["sha256"], d["stdin"]["bytes"])' "$WS/approvals/$ch.json")" "the challenge's stdin"

# Past limits.max_stdin_bytes: 65 from the CLI, nothing ran.
: >"$RAN"
head -c $((25 * 1024 * 1024)) /dev/zero >"$RX_TMP/toobig"
assert_exit 65 timeout 120 "${SX[@]}" run lab1 t.sha --stdin "$RX_TMP/toobig"
assert_contains "$ERR" "lab1: stdin: more than limits.max_stdin_bytes (25165824 bytes): nothing ran"
assert_eq 0 "$(wc -l <"$RAN")" "runs after a stdin over the limit"

# The protocol itself.
timeout 60 "$RX_PYTHON" - "$SOCK" >"$OUT" 2>"$ERR" <<'PY' || fail "protocol: $(cat "$ERR")"
import base64, hashlib, json, socket, sys

def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(sys.argv[1])
    return s, s.makefile("rb")

s, f = conn()
send = lambda o: s.sendall((json.dumps(o) + "\n").encode())

def until_done(rid, f=f):
    got = []
    while True:
        line = f.readline()
        assert line, ("connection closed", rid, got)
        o = json.loads(line)
        if o.get("id") == rid:
            got.append(o)
            if o["type"] in ("done", "error"):
                return got

def results(got):
    return {o["host"]: o for o in got if o["type"] == "result"}

def ended(rid, why, status=65, hosts=("lab1",), f=f):
    got = until_done(rid, f)
    rs = results(got)
    assert sorted(rs) == sorted(hosts), got
    for h, x in rs.items():
        assert x["executed"] is False and x["exit_status"] == status, x
        assert x["error"] == h + ": " + why, (x["error"], why)
    assert got[-1]["type"] == "done" and got[-1]["exit_status"] == status, got

# an empty stdin: "eof" alone; the command reads an empty stdin, not /dev/null
send({"op": "run", "id": "e", "targets": "lab1", "action": "t.sha", "stdin_stream": True})
send({"op": "stdin", "target": "e", "eof": True})
r = results(until_done("e"))["lab1"]
assert r["exit_status"] == 0 and r["stdout"] == hashlib.sha256(b"").hexdigest() + "\n", r

# pieces as text and as base64, the last one with the eof, to two hosts
send({"op": "run", "id": 7, "targets": "lab1,lab2", "action": "t.sha", "stdin_stream": True})
send({"op": "stdin", "target": 7, "data": "hello "})
send({"op": "stdin", "target": 7, "data_base64": base64.b64encode(b"\x00world\xff").decode(),
      "eof": True})
want = hashlib.sha256(b"hello \x00world\xff").hexdigest() + "\n"
rs = results(until_done(7))
assert sorted(rs) == ["lab1", "lab2"] and all(x["stdout"] == want for x in rs.values()), rs

# a stdin line for no waiting request (one that has ended, or none named) is an error line
send({"op": "stdin", "id": "x", "target": 7, "data": "late"})
o = until_done("x")[-1]
assert o["type"] == "error" and o["exit_status"] == 65, o
assert "no request 7 of this connection is waiting for its stdin" in o["error"], o
send({"op": "stdin", "id": "y", "data": "no target"})
o = until_done("y")[-1]
assert o["type"] == "error" and "target: missing" in o["error"], o
# stdin_stream together with stdin: the request is refused as a whole
send({"op": "run", "id": "z", "targets": "lab1", "action": "t.sha", "stdin_stream": True,
      "stdin": "x"})
o = until_done("z")[-1]
assert o["type"] == "error" and "stdin_stream: exclusive with stdin" in o["error"], o

# a bad piece ends the request at once, on every host
send({"op": "run", "id": "b", "targets": "lab1,lab2", "action": "t.sha", "stdin_stream": True})
send({"op": "stdin", "target": "b", "data_base64": "!!!!"})
ended("b", "data_base64: invalid base64 character at offset 0: nothing ran", hosts=("lab1", "lab2"))
# a pause longer than --stdin-timeout (1 s)
send({"op": "run", "id": "p", "targets": "lab1", "action": "t.sha", "stdin_stream": True})
send({"op": "stdin", "target": "p", "data": "part"})
ended("p", 'stdin: nothing arrived for 1 s (a streamed stdin must keep coming until its "eof"): '
      'nothing ran')
# a cancel while the stdin arrives
send({"op": "run", "id": "c", "targets": "lab1", "action": "t.sha", "stdin_stream": True})
send({"op": "stdin", "target": "c", "data": "part"})
send({"op": "cancel", "id": "k", "target": "c"})
ended("c", "cancelled before it started", status=130)
# a client that half-closes before the eof: its request ends, then the connection closes
s2, f2 = conn()
s2.sendall((json.dumps({"op": "run", "id": "h", "targets": "lab1", "action": "t.sha",
                        "stdin_stream": True}) + "\n" +
            json.dumps({"op": "stdin", "target": "h", "data": "part"}) + "\n").encode())
s2.shutdown(socket.SHUT_WR)
ended("h", 'stdin: the client closed its side of the connection before the stdin\'s "eof": '
      'nothing ran', f=f2)
assert f2.readline() == b"", "the half-closed connection is closed after its done"

# raw pieces: "bytes": N, then N bytes that are not lines (a newline and a request inside them
# are data, not a request); "accepted" says serve takes them
raw = [b"line one\n", b'\n{"op":"ping","id":"injected"}\n', bytes(range(256)) * 300]
send({"op": "run", "id": "r", "targets": "lab1", "action": "t.sha", "stdin_stream": True})
def next_of(rid):
    while True:
        o = json.loads(f.readline())
        if o.get("id") == rid:
            return o
acc = next_of("r")
assert acc["type"] == "accepted" and acc.get("stdin_bytes") is True, acc
for i, piece in enumerate(raw):
    head = {"op": "stdin", "target": "r", "bytes": len(piece)}
    if i == len(raw) - 1:
        head["eof"] = True
    s.sendall((json.dumps(head) + "\n").encode() + piece)
got = until_done("r")
assert not any(o.get("id") == "injected" for o in got), got
r = results(got)["lab1"]
assert r["stdout"] == hashlib.sha256(b"".join(raw)).hexdigest() + "\n", r
# a raw piece for no waiting request: an error line, its bytes read and dropped; the next line
# is read as a line (the connection kept step)
s.sendall((json.dumps({"op": "stdin", "id": "rx", "target": "r", "bytes": 5}) + "\n").encode()
          + b"\n\n\n\n\n")
o = until_done("rx")[-1]
assert o["type"] == "error" and "no request \"r\" of this connection" in o["error"], o
send({"op": "ping", "id": "after"})
o = next_of("after")
assert o["type"] != "error", o
# bytes with data: the request ends, nothing run, and its raw bytes are dropped
send({"op": "run", "id": "rd", "targets": "lab1", "action": "t.sha", "stdin_stream": True})
s.sendall((json.dumps({"op": "stdin", "target": "rd", "bytes": 3, "data": "x"}) + "\n").encode()
          + b"abc")
ended("rd", "stdin: bytes is exclusive with data and data_base64: nothing ran")
# raw pieces past limits.max_stdin_bytes (24 MiB): the request ends there, the rest of the piece
# and the pieces after it are read and dropped (each later line an error), the connection in step
send({"op": "run", "id": "rm", "targets": "lab1", "action": "t.sha", "stdin_stream": True})
mib = b"\xab" * (1 << 20)
for i in range(26):
    s.sendall((json.dumps({"op": "stdin", "id": "rm%d" % i, "target": "rm", "bytes": len(mib)})
               + "\n").encode() + mib)
ended("rm", "stdin: more than limits.max_stdin_bytes (25165824 bytes): nothing ran")
send({"op": "ping", "id": "after-rm"})
assert next_of("after-rm")["type"] != "error"
# a raw piece that stops half way for longer than --stdin-timeout (1 s): the request ends; the
# rest of the piece, when it comes, is dropped
send({"op": "run", "id": "rt", "targets": "lab1", "action": "t.sha", "stdin_stream": True})
s.sendall((json.dumps({"op": "stdin", "target": "rt", "bytes": 10, "eof": True}) + "\n").encode()
          + b"12345")
ended("rt", 'stdin: nothing arrived for 1 s (a streamed stdin must keep coming until its "eof"): '
      'nothing ran')
s.sendall(b"67890")
send({"op": "ping", "id": "after-rt"})
assert next_of("after-rt")["type"] != "error"
# a count serve cannot take: an error, a waiting request ends, and the connection closes
for bad in (0, 1048577, 1.5, "7", -1):
    s3, f3 = conn()
    s3.sendall((json.dumps({"op": "run", "id": "w", "targets": "lab1", "action": "t.sha",
                            "stdin_stream": True}) + "\n").encode())
    assert json.loads(f3.readline())["type"] == "accepted"
    s3.sendall((json.dumps({"op": "stdin", "target": "w", "bytes": bad}) + "\n").encode()
               + b'{"op":"ping","id":"never"}\n')
    lines = [json.loads(l) for l in f3]  # until serve closes it
    errs = [o for o in lines if o["type"] == "error"]
    assert len(errs) == 1 and "stdin: bytes must be a whole number from 1 to 1048576" in errs[0]["error"], (bad, lines)
    rs = [o for o in lines if o["type"] == "result"]
    assert len(rs) == 1 and rs[0]["executed"] is False and "could not be followed" in rs[0]["error"], (bad, lines)
    assert not any(o.get("id") == "never" for o in lines), (bad, lines)
    s3.close()
print("protocol ok")
PY
assert_contains "$OUT" "protocol ok"
assert_eq 4 "$(wc -l <"$RAN")" "runs in the protocol part (e on lab1, 7 on both hosts, r on lab1)"

# The CLI sends raw pieces only to a serve whose "accepted" says "stdin_bytes", and base64 lines
# to one that does not (an older serve): a stand-in serve checks what arrives, both ways.
head -c $((600 * 1024 + 3)) /dev/urandom >"$RX_TMP/mid"
for says in 1 0; do
    rm -f "$RX_TMP/fake.sock"
    "$RX_PYTHON" - "$RX_TMP/fake.sock" "$RX_TMP/mid" "$says" >"$RX_TMP/fake.out" 2>&1 <<'PY' &
import base64, hashlib, json, os, socket, sys
path, want, says = sys.argv[1], open(sys.argv[2], "rb").read(), sys.argv[3] == "1"
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path + ".tmp"); srv.listen(1); os.rename(path + ".tmp", path)
srv.settimeout(60)
c, _ = srv.accept(); f = c.makefile("rb")
req = json.loads(f.readline())
assert req["stdin_stream"] is True, req
acc = {"id": req["id"], "type": "accepted", "hosts": ["lab1"]}
if says:
    acc["stdin_bytes"] = True
c.sendall((json.dumps(acc) + "\n").encode())
got, kinds = b"", set()
while True:
    o = json.loads(f.readline())
    assert o["op"] == "stdin", o
    if "bytes" in o:
        kinds.add("raw"); got += f.read(o["bytes"])
    elif "data_base64" in o:
        kinds.add("base64"); got += base64.b64decode(o["data_base64"])
    if o.get("eof"):
        break
assert got == want, (len(got), len(want))
assert kinds == ({"raw"} if says else {"base64"}), kinds
print("pieces:", *sorted(kinds))
res = {"id": req["id"], "type": "result", "host": "lab1", "executed": True, "exit_code": 0,
       "exit_status": 0, "stdout": hashlib.sha256(got).hexdigest() + "\n"}
c.sendall((json.dumps(res) + "\n" + json.dumps({"id": req["id"], "type": "done",
                                                "exit_status": 0}) + "\n").encode())
c.close()
PY
    fake=$!
    wait_until 20 test -S "$RX_TMP/fake.sock"
    assert_exit 0 timeout 60 "$REXEC_BIN" --workspace "$WS" --socket "$RX_TMP/fake.sock" run lab1 t.sha --stdin "$RX_TMP/mid" --json
    wait "$fake" || fail "stand-in serve (stdin_bytes $says): $(cat "$RX_TMP/fake.out")"
    assert_contains "$RX_TMP/fake.out" "pieces: $( ((says)) && echo raw || echo base64)"
    assert_contains "$OUT" "$(sha256sum <"$RX_TMP/mid" | cut -d' ' -f1)"
done

# The pieces taken are not logged one by one (the 20 MiB calls sent 2,100 of them); refused lines
# are (a few pieces the CLI had sent before it read that its over-limit request had ended, and x).
n=$(grep -c '"op":"stdin"' "$RX_TMP/serve.log")
((n < 100)) || fail "$n stdin lines in serve's log"
assert_contains "$RX_TMP/serve.log" '"op":"stdin","id":"x"'
# Requests that ended before they started still log their hosts.
assert_contains "$RX_TMP/serve.log" '"op":"run","id":"b","client_uid":0,"client_user":"root","hosts":2'
# The spool leaves nothing behind, and the trail is whole.
assert_eq "" "$(find "$WS/evidence" -name '.stdin-*' -o -name '.tmp-*' | head -3)" "leftovers in evidence/"
assert_exit 0 rx audit verify
pass
