#!/usr/bin/env bash
# serve's metrics (docs/metrics.md): after known calls (allowed and ok, failing, timing out,
# needing approval, refused before the gate, an eval, a reload), {"op":"metrics"} shows exactly
# those counts, as Prometheus text that a strict parser (tests/e2e/promtext.py) reads; the
# histograms count every call and every evidence commit. --metrics-file writes the same text,
# replaced whole (a new inode each time, never a partial file for a reader racing the writes),
# and once more at exit with the final counts; a path that cannot be written refuses the start.
tid="serve: metrics op and --metrics-file (exact counts, Prometheus text, atomic replace)"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
ws_add_action t.ok '{"risk": "L0", "command": "echo one"}'
ws_add_action t.fail '{"risk": "L0", "command": "echo bad >&2; exit 3"}'
ws_add_action t.slow '{"risk": "L0", "command": "sleep 60"}'
ws_add_action t.appr '{"risk": "L2", "command": "true"}'
ws_add_action t.long '{"risk": "L0", "command": "sleep 77"}'
SOCK=$RX_TMP/s.sock
MDIR=$RX_TMP/textfile
mkdir "$MDIR"
MFILE=$MDIR/rexec.prom

# a path that cannot be written: 64 naming it, no socket
assert_exit 64 rx serve --socket "$SOCK" --metrics-file "$RX_TMP/no/such/dir/rexec.prom"
assert_contains "$ERR" "metrics file $RX_TMP/no/such/dir/rexec.prom: cannot write"
[[ ! -e $SOCK ]] || fail "serve left a socket after refusing to start"
assert_exit 64 rx serve --socket "$SOCK" --metrics-file "$MFILE" --metrics-interval-s 0

start_serve --metrics-file "$MFILE" --metrics-interval-s 1
test -f "$MFILE" || fail "the metrics file is not there once serve listens"

# the calls: 2 ok, 1 failed, 1 timeout (all allowed), 1 needs approval, 1 refused (no such
# action), an eval, a reload; then the metrics
"$RX_PYTHON" - "$SOCK" "$REXEC_SRC/tests/e2e" >"$RX_TMP/metrics.txt" <<'PY' || fail "the metrics op did not answer what the calls did"
import json, socket, sys
sys.path.insert(0, sys.argv[2])
import promtext
s = socket.socket(socket.AF_UNIX); s.settimeout(120); s.connect(sys.argv[1])
f = s.makefile()
produced = 0  # stdout_bytes + stderr_bytes of every result: what went through the redactor
def ask(req):
    global produced
    s.sendall(json.dumps(req).encode() + b"\n")
    while True:
        r = json.loads(f.readline())
        if r["type"] == "result":
            produced += r["stdout_bytes"] + r["stderr_bytes"]
        if r["type"] not in ("accepted", "result", "output"):
            return r
for req, status in (({"op": "run", "targets": "@lab", "action": "t.ok"}, 0),
                    ({"op": "run", "targets": "lab1", "action": "t.fail"}, 3),
                    ({"op": "run", "targets": "lab2", "action": "t.slow", "timeout_s": 1}, 124),
                    ({"op": "run", "targets": "lab1", "action": "t.appr"}, 75),
                    ({"op": "run", "targets": "lab1", "action": "no.such"}, 78),
                    ({"op": "eval", "targets": "lab1", "action": "t.ok"}, 0)):
    r = ask(req)
    assert r["type"] == "done" and r["exit_status"] == status, (req, r)
assert ask({"op": "reload"})["type"] == "reloaded"
r = ask({"op": "metrics", "id": "m"})
assert r["type"] == "metrics" and r["id"] == "m" and r["format"] == "text/plain; version=0.0.4", r
bad = ask({"op": "metrics", "id": 2, "what": 1})
assert bad["type"] == "error" and bad["exit_status"] == 65 and 'unknown key of "metrics"' in bad["error"], bad
print(r["text"], end="")
m = promtext.parse(r["text"])
def calls(decision, exit_class):
    return promtext.value(m, "rexec_calls_total", decision=decision, exit_class=exit_class)
want = {("allowed", "ok"): 2, ("allowed", "failed"): 1, ("allowed", "timeout"): 1,
        ("needs_approval", "failed"): 1, ("refused", "failed"): 1}
for d in ("allowed", "refused", "needs_approval"):
    for e in ("ok", "failed", "timeout", "cancelled", "unavailable"):
        assert calls(d, e) == want.get((d, e), 0), (d, e, calls(d, e))
assert promtext.value(m, "rexec_evals_total", decision="allowed") == 1
assert promtext.value(m, "rexec_call_duration_seconds_count") == 6
# the timeout's call took at least its 1 s: in no bucket below 1
assert promtext.value(m, "rexec_call_duration_seconds_bucket", le="0.5") <= 5
assert promtext.value(m, "rexec_call_duration_seconds_sum") >= 1
# evidence: one commit per call that ran (2 ok, fail, slow); audit: at least one append
assert promtext.value(m, "rexec_evidence_write_seconds_count") == 4
assert promtext.value(m, "rexec_audit_write_seconds_count") >= 1
# "one\n" twice and "bad\n" (and whatever else the results say the commands wrote)
assert promtext.value(m, "rexec_redacted_bytes_total") == produced >= 12, produced
assert promtext.value(m, "rexec_reloads_total", result="ok") == 1
assert promtext.value(m, "rexec_reloads_total", result="refused") == 0
assert promtext.value(m, "rexec_notify_failures_total") == 0
assert promtext.value(m, "rexec_ssh_connections", state="ready") >= 1
assert promtext.value(m, "rexec_serve_clients", state="reading") == 1
assert promtext.value(m, "rexec_serve_requests_in_flight") == 0
assert promtext.value(m, "rexec_queued_calls") == 0
assert promtext.value(m, "rexec_build_info", version=ask({"op": "ping"})["version"]) == 1
PY

# the file: the same counts once the timer has written after the calls; each write a new file
# (rename), every read a whole text
cat >"$RX_TMP/readfile.py" <<'PY'
import os, sys, time
sys.path.insert(0, sys.argv[2])
import promtext
path, inodes, reads = sys.argv[1], set(), 0
deadline = time.monotonic() + 120
# until the file was replaced twice after the calls, reading it as fast as possible meanwhile
while len(inodes) < 3 and time.monotonic() < deadline:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise SystemExit("the metrics file was missing for a moment")
    ino = os.fstat(fd).st_ino
    text = os.read(fd, 1 << 20).decode()
    os.close(fd)
    m = promtext.parse(text)   # raises on a partial file
    reads += 1
    if promtext.value(m, "rexec_calls_total", decision="allowed", exit_class="ok") == 2:
        inodes.add(ino)
assert len(inodes) >= 3, ("the file was not replaced by new files", inodes, reads)
print(reads)
PY
"$RX_PYTHON" "$RX_TMP/readfile.py" "$MFILE" "$REXEC_SRC/tests/e2e" >"$OUT" || fail "the metrics file is not replaced whole with the counts"
[[ $(stat -c %a "$MFILE") == 644 ]] || fail "the metrics file is not 0644 (node_exporter reads it)"

# at exit: written once more, after the last call reported (a run cancelled by the stop counts)
"$RX_PYTHON" - "$SOCK" <<'PY' &
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(120); s.connect(sys.argv[1])
s.sendall(b'{"op":"run","id":"long","targets":"lab1","action":"t.long"}\n')
f = s.makefile()
while json.loads(f.readline())["type"] != "done":
    pass
PY
CLIENT=$!
wait_until 90 remote_pgrep 'sleep 77' >/dev/null
# while it runs (on lab1's runner: lab1 had calls before), the gauges say so
"$RX_PYTHON" - "$SOCK" "$REXEC_SRC/tests/e2e" <<'PY' || fail "the gauges do not show the running call"
import json, socket, sys
sys.path.insert(0, sys.argv[2])
import promtext
s = socket.socket(socket.AF_UNIX); s.settimeout(120); s.connect(sys.argv[1])
s.sendall(b'{"op":"metrics"}\n')
m = promtext.parse(json.loads(s.makefile().readline())["text"])
assert promtext.value(m, "rexec_runners", state="busy") == 1
assert promtext.value(m, "rexec_serve_requests_in_flight") == 1
assert promtext.value(m, "rexec_serve_clients", state="reading") == 2
PY
stop_serve
[[ $SERVE_RC == 0 ]] || fail "serve did not exit 0 on SIGTERM"
wait "$CLIENT" || fail "the client of the cancelled run did not get its done"
"$RX_PYTHON" - "$MFILE" "$REXEC_SRC/tests/e2e" <<'PY' || fail "the metrics file at exit lacks the last call"
import sys
sys.path.insert(0, sys.argv[2])
import promtext
m = promtext.parse(open(sys.argv[1]).read())
assert promtext.value(m, "rexec_calls_total", decision="allowed", exit_class="cancelled") == 1
assert promtext.value(m, "rexec_call_duration_seconds_count") == 7
assert promtext.value(m, "rexec_serve_requests_in_flight") == 0
PY
[[ -z $(find "$MDIR" -name '.*.tmp') ]] || fail "a temporary file was left behind at exit"
pass
