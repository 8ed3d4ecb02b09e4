#!/usr/bin/env bash
# rexec serve's log (docs/serve-protocol.md, "Logs"): one JSON line per request and per call on
# stderr, with the client's uid and user, op, id, run_id, host, action, decision, exit and
# duration, redacted; the same as journald fields (native protocol, to a socket of the test's
# own) with --log journal, and chosen by itself when stderr is the journal stream
# ($JOURNAL_STREAM); nothing with --log off.
tid="serve: a log line per request and per call, JSON or journald"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
ws_add_action t.one '{"risk": "L0", "command": "echo one"}'
TOKEN=$(cat "$WS/secrets/demo_token")
SOCK=$RX_TMP/s.sock
SERVE=
stop_serve() { [[ -z $SERVE ]] || { kill -TERM "$SERVE"; wait "$SERVE"; } 2>/dev/null || true; SERVE=; }
trap '_t_rc=$?; { [[ -z $SERVE ]] || stop_gently $SERVE; }; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT

# requests SOCK JSON...: each request, then every reply until its "done" / the one reply
cat >"$RX_TMP/req.py" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sys.argv[1])
f = s.makefile()
for req in sys.argv[2:]:
    s.sendall(req.encode() + b"\n")
    while True:
        r = json.loads(f.readline())
        if r["type"] not in ("accepted", "result", "output"):
            break
PY
requests() { timeout 60 "$RX_PYTHON" "$RX_TMP/req.py" "$SOCK" "$@"; }
the_requests=(
    '{"op": "run", "id": "r1", "targets": "@lab", "action": "t.one"}'
    "{\"op\": \"ping\", \"id\": \"$TOKEN\"}"
    '{"op": "nope", "id": 7}'
    '{"op": "run", "id": "r2", "targets": "lab1", "action": "no.such"}')

# ---- JSON lines (the default when stderr is not the journal) -------------------------------
"$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK" 2>"$RX_TMP/serve.err" &
SERVE=$!
wait_until 20 test -S "$SOCK"
requests "${the_requests[@]}"
stop_serve
assert_not_contains "$RX_TMP/serve.err" "$TOKEN"
"$RX_PYTHON" - "$RX_TMP/serve.err" "$(id -u)" "$(id -un)" <<'PY' || fail "the JSON log lines are not what was asked"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
uid, user = int(sys.argv[2]), sys.argv[3]
calls = [l for l in lines if l["event"] == "call" and l["id"] == "r1"]
refused = [l for l in lines if l["event"] == "call" and l["id"] == "r2"]
assert len(refused) == 1 and refused[0]["exit_status"] == 78 and refused[0]["decision"] is None, refused
reqs = {json.dumps(l["id"]): l for l in lines if l["event"] == "request"}
assert len(calls) == 2, calls
assert sorted(c["host"] for c in calls) == ["lab1", "lab2"], calls
for c in calls:
    assert c["op"] == "run" and c["id"] == "r1" and c["action"] == "t.one", c
    assert c["decision"] == "ALLOW" and c["reason"] == "ALLOW_LEVEL", c
    assert c["exit_status"] == 0 and c["exit_code"] == 0 and c["error"] is None, c
    assert len(c["run_id"]) > 20 and isinstance(c["duration_ms"], (int, float)), c
    assert c["client_uid"] == uid and c["client_user"] == user and c["ts"].endswith("Z"), c
r1 = reqs['"r1"']
assert r1["hosts"] == 2 and r1["exit_status"] == 0 and r1["error"] is None, r1
assert r1["duration_ms"] >= max(c["duration_ms"] for c in calls) - 1, (r1, calls)
ping = [l for l in lines if l["event"] == "request" and l["op"] == "ping"]
assert len(ping) == 1 and ping[0]["id"] == "[REDACTED:DEMO_TOKEN]", ping   # the id was a secret
bad = reqs["7"]
assert bad["op"] == "nope" and bad["exit_status"] == 65 and "unknown" in bad["error"], bad
r2 = reqs['"r2"']
assert r2["exit_status"] == 78 and r2["hosts"] == 1, r2      # its call line says why
assert "no.such" in refused[0]["error"], refused
PY

# ---- journald fields: --log journal, and auto when stderr is the journal stream ------------
JSOCK=$RX_TMP/journal.sock
"$RX_PYTHON" - "$JSOCK" "$RX_TMP/journal.bin" "$RX_TMP/journal.ready" <<'PY' &
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1])
open(sys.argv[3], "w").close(); s.settimeout(120)
with open(sys.argv[2], "ab", buffering=0) as out:
    while True:
        try:
            d = s.recv(1 << 20)
        except socket.timeout:
            break
        out.write(struct.pack("<I", len(d)) + d)
PY
RECEIVER=$!
wait_until 20 test -e "$RX_TMP/journal.ready"
# stderr is a file whose dev:ino we hand over as JOURNAL_STREAM, as systemd would
: >"$RX_TMP/serve.journal-err"
JS=$(stat -c '%d:%i' "$RX_TMP/serve.journal-err")
JOURNAL_STREAM=$JS REXEC_JOURNAL_SOCKET=$JSOCK \
    "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK" 2>>"$RX_TMP/serve.journal-err" &
SERVE=$!
wait_until 20 test -S "$SOCK"
requests "${the_requests[@]}"
stop_serve
kill "$RECEIVER" 2>/dev/null || true
wait "$RECEIVER" 2>/dev/null || true
grep -q '^{' "$RX_TMP/serve.journal-err" && fail "JSON lines on stderr although it is the journal"
"$RX_PYTHON" - "$RX_TMP/journal.bin" "$TOKEN" <<'PY' || fail "the journal entries are not what was asked"
import struct, sys
data, token = open(sys.argv[1], "rb").read(), sys.argv[2].encode()
assert token not in data
entries = []
while data:
    n = struct.unpack("<I", data[:4])[0]; d, data = data[4:4 + n], data[4 + n:]
    e = {}
    while d:
        line, _, rest = d.partition(b"\n")
        if b"=" in line:
            k, _, v = line.partition(b"="); d = rest
        else:  # KEY\n<le64><value>\n
            k = line; n = struct.unpack("<Q", rest[:8])[0]; v = rest[8:8 + n]; d = rest[8 + n + 1:]
        e[k.decode()] = v.decode()
    entries.append(e)
calls = [e for e in entries if e.get("REXEC_EVENT") == "call" and e.get("REXEC_ID") == "r1"]
assert len(calls) == 2, entries
for c in calls:
    assert c["SYSLOG_IDENTIFIER"] == "rexec-serve" and c["PRIORITY"] == "6", c
    assert c["REXEC_OP"] == "run" and c["REXEC_ACTION"] == "t.one" and c["REXEC_EXIT_STATUS"] == "0", c
    assert c["REXEC_DECISION"] == "ALLOW" and c["REXEC_RUN_ID"] and c["REXEC_HOST"] in ("lab1", "lab2"), c
    assert c["MESSAGE"].startswith("call run " + c["REXEC_HOST"] + " t.one: exit 0"), c
reqs = [e for e in entries if e.get("REXEC_EVENT") == "request"]
assert any(e.get("REXEC_ID") == "[REDACTED:DEMO_TOKEN]" for e in reqs), reqs
bad = [e for e in reqs if e.get("REXEC_OP") == "nope"]
assert len(bad) == 1 and bad[0]["PRIORITY"] == "4" and bad[0]["REXEC_EXIT_STATUS"] == "65", bad
PY

# ---- off: no log line at all ---------------------------------------------------------------
"$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK" --log off 2>"$RX_TMP/serve.off" &
SERVE=$!
wait_until 20 test -S "$SOCK"
requests "${the_requests[0]}"
stop_serve
grep -q '^{' "$RX_TMP/serve.off" && fail "--log off still logged"
assert_exit 64 rx serve --socket "$SOCK" --log loud
assert_contains "$ERR" "--log wants auto, json, journal or off"
pass
