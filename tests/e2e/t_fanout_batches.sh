#!/usr/bin/env bash
# Fan-out controls: --batch runs the hosts batch after batch; --canary runs the first hosts alone
# first; once more hosts than --max-failures have failed, no host after that batch starts (proven
# on the VM side: each call leaves a marker file named by its sshd's port), the others report
# executed:false / STOPPED_FAILURE_THRESHOLD and rexec exits 76; the audit log holds the plan and
# the stop under the fan-out's batch_id and still verifies. Bad values exit 64 with nothing run
# or recorded. --retry-unavailable tries again only a host whose call never reached it. The same
# through serve's socket (an "error" line for bad values).
tid="run: fan-out batches, canary, failure threshold, retries"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 8
all=lab1,lab2,lab3,lab4,lab5,lab6,lab7,lab8
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'
MARK=$RX_TMP/marks
mkdir -p "$MARK"
# t.mark: leaves ran-PORT (the host's sshd port: which host it ran on), then fails where
# fail-PORT exists. Every lab sshd runs on this machine, so the markers are the VM's own word.
# shellcheck disable=SC2016 # ${SSH_CONNECTION...} is for the VM's shell
ws_add_action t.mark "$(printf '{"risk": "L0", "command": "p=${SSH_CONNECTION##* }; touch %s/ran-$p; ! test -e %s/fail-$p"}' "$MARK" "$MARK")"

rxt() { timeout 300 "$REXEC_BIN" --workspace "$WS" "$@"; }
fail_on() { local h; for h in "$@"; do touch "$MARK/fail-$(lab_port "$h")"; done; }
reset_marks() { rm -f "$MARK"/*; }
# ran HOST...: exactly these hosts left a marker
ran() {
    local h want got
    want=$(for h in "$@"; do echo "ran-$(lab_port "$h")"; done | sort | tr '\n' ' ')
    got=$(find "$MARK" -name 'ran-*' -printf '%f\n' | sort | tr '\n' ' ')
    assert_eq "$want" "$got" "hosts that ran (markers on the VM side)"
}
audit_lines() { wc -l <"$WS/audit/audit.log" 2>/dev/null || echo 0; }

# ---- batches of 2, threshold 1: lab2 fails in batch 1 (1 failure, not more than 1), lab4 in
# batch 2 (2 > 1): the run stops after batch 2; lab5..lab8 never start -----------------------
fail_on lab2 lab4
assert_exit 76 rxt run "$all" t.mark --batch 2 --max-failures 1 --json
ran lab1 lab2 lab3 lab4
"$RX_PYTHON" - "$OUT" "$WS/audit/audit.log" <<'PY' || fail "results and audit of the stopped run"
import json, sys
res = {r["host"]: r for r in map(json.loads, open(sys.argv[1]))}
assert sorted(res) == ["lab%d" % i for i in range(1, 9)], sorted(res)
for h in ("lab1", "lab3"):
    assert res[h]["executed"] is True and res[h]["exit_status"] == 0, res[h]
for h in ("lab2", "lab4"):
    assert res[h]["executed"] is True and res[h]["exit_status"] == 1, res[h]
for h in ("lab5", "lab6", "lab7", "lab8"):
    r = res[h]
    assert r["executed"] is False and r["reason"] == "STOPPED_FAILURE_THRESHOLD", r
    assert r["exit_status"] == 76 and r["run_id"] is None, r
    assert "more than the threshold" in r["error"] and r["error"].startswith(h + ": "), r
assert all("tries" not in r for r in res.values()), res   # counted with --retry-unavailable only
batch = res["lab1"]["batch_id"]
assert batch and all(r.get("batch_id") in (batch, None) for r in res.values()), res
recs = [json.loads(l) for l in open(sys.argv[2])]
mine = [r for r in recs if r.get("batch_id") == batch]
plan = [r for r in mine if r["phase"] == "batch_plan"]
stop = [r for r in mine if r["phase"] == "batch_stop"]
assert len(plan) == 1 and len(stop) == 1, [r["phase"] for r in mine]
plan, stop = plan[0], stop[0]
assert plan["batches"] == [["lab1", "lab2"], ["lab3", "lab4"], ["lab5", "lab6"], ["lab7", "lab8"]], plan
assert plan["max_failures"] == 1 and plan["batch_size"] == 2 and plan["run_id"] == batch, plan
assert mine.index(plan) == 0, "the plan comes before the calls' records"
assert stop["failed"] == 2 and stop["batch"] == 2 and stop["batches"] == 4, stop
assert stop["failed_hosts"] == ["lab2", "lab4"], stop
assert stop["not_started"] == ["lab5", "lab6", "lab7", "lab8"], stop
assert stop["reason"] == "STOPPED_FAILURE_THRESHOLD", stop
intents = sorted(r["host"] for r in mine if r["phase"] == "intent")
assert intents == ["lab1", "lab2", "lab3", "lab4"], intents   # no call for the skipped hosts
PY
assert_exit 0 rx audit verify
assert_exit 0 rx audit show
assert_contains "$OUT" "batch_stop"

# ---- the same, but without --batch: no threshold crossed, every host runs (the control above
# really is what stopped it) ---------------------------------------------------------------------
reset_marks
fail_on lab2
assert_exit 1 rxt run "$all" t.mark --max-failures 1 --json
ran lab1 lab2 lab3 lab4 lab5 lab6 lab7 lab8

# ---- a canary of 1 that fails, threshold 0: nothing after it starts; percentages ------------
reset_marks
fail_on lab1
assert_exit 76 rxt run "$all" t.mark --canary 1 --batch 50% --max-failures 0 --json
ran lab1
assert_eq 7 "$(grep -c '"reason":"STOPPED_FAILURE_THRESHOLD"' "$OUT")" "skipped after the canary"
reset_marks
assert_exit 0 rxt run "$all" t.mark --canary 2 --batch 25% --max-failures 10% --json
ran lab1 lab2 lab3 lab4 lab5 lab6 lab7 lab8
# batches: the canary (2), then 25% of 8 = 2 a batch
last_plan() {
    "$RX_PYTHON" -c 'import json,sys
p=[json.loads(l) for l in open(sys.argv[1]) if "\"batch_plan\"" in l][-1]
print(json.dumps([len(b) for b in p["batches"]]), p["max_failures"])' "$WS/audit/audit.log"
}
assert_eq "[2, 2, 2, 2] 0" "$(last_plan)" "canary 2, batch 25%, max 10% of 8"

# ---- the progress line on a terminal: the batch, done, failed and skipped ---------------------
if command -v script >/dev/null 2>&1; then
    reset_marks
    fail_on lab2 lab4
    printf -v cmd '%q ' "$REXEC_BIN" --workspace "$WS" run "$all" t.mark --batch 2 --max-failures 1
    assert_exit 76 timeout 300 script -qec "$cmd" /dev/null
    assert_contains "$OUT" "batch 2/4, 8/8 hosts done, 2 failed, 4 skipped (stopped: too many failures)"
    assert_contains "$OUT" "rexec: lab5: not started: 2 host(s) failed"  # each skipped host says so
    ran lab1 lab2 lab3 lab4
fi

# ---- bad values: exit 64, nothing runs, nothing is recorded -----------------------------------
reset_marks
before=$(audit_lines)
for bad in "--batch 0" "--batch 0%" "--batch 101%" "--batch x" "--batch 2.5" "--max-failures -1" \
    "--max-failures 5x" "--canary 9" "--canary 0" "--canary -1" "--retry-unavailable 11"; do
    # shellcheck disable=SC2086 # the option and its value are two words
    assert_exit 64 rxt run "$all" t.mark $bad
    assert_contains "$ERR" "${bad%% *}"
done
assert_exit 64 rxt eval "$all" t.mark --batch 2
ran
assert_eq "$before" "$(audit_lines)" "audit lines after refused fan-outs"
# one host: allowed (one batch of one), and no plan to record (no batch_id)
assert_exit 0 rxt run lab1 t.mark --batch 2 --max-failures 0
ran lab1

# ---- --retry-unavailable: a closed port is tried N+1 times, executed false; a command that ran
# and failed is never tried again ---------------------------------------------------------------
reset_marks
closed=$("$RX_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
ws_edit 'c["hosts"]["closed"] = dict(c["hosts"]["lab1"], port=int(args[0]))' "$closed"
fail_on lab2
before=$(audit_lines)
assert_exit 255 rxt run closed,lab1,lab2 t.mark --retry-unavailable 2 --json
ran lab1 lab2
"$RX_PYTHON" - "$OUT" "$WS/audit/audit.log" "$before" <<'PY' || fail "tries of the retried run"
import json, sys
res = {r["host"]: r for r in map(json.loads, open(sys.argv[1]))}
assert res["closed"]["tries"] == 3 and res["closed"]["executed"] is False, res["closed"]
assert res["closed"]["exit_status"] == 255, res["closed"]
assert res["lab2"]["tries"] == 1 and res["lab2"]["exit_status"] == 1, res["lab2"]
assert res["lab1"]["tries"] == 1 and res["lab1"]["exit_status"] == 0, res["lab1"]
new = [json.loads(l) for l in open(sys.argv[2]).readlines()[int(sys.argv[3]):]]
per = {}
for r in new:
    if r["phase"] == "intent":
        per[r["host"]] = per.get(r["host"], 0) + 1
assert per == {"closed": 3, "lab1": 1, "lab2": 1}, per   # every try is a call of its own
PY
assert_exit 0 rx audit verify

# ---- through serve's socket ----------------------------------------------------------------------
SOCK=$RX_TMP/s.sock
start_serve
reset_marks
fail_on lab2 lab4
"$RX_PYTHON" - "$SOCK" "$all" >"$OUT" 2>&1 <<'PY' || { cat "$OUT" >&2; fail "serve: batches and threshold"; }
import json, socket, sys
path, targets = sys.argv[1], sys.argv[2]

def ask(o):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(300)
    s.connect(path)
    s.sendall(json.dumps(o).encode() + b"\n")
    f, out = s.makefile("rb"), []
    while True:
        m = json.loads(f.readline())
        out.append(m)
        if m["type"] in ("done", "error"):
            s.close()
            return out

run = {"op": "run", "id": 1, "targets": targets, "action": "t.mark"}
out = ask(dict(run, batch=2, max_failures="1"))
res = {m["host"]: m for m in out if m["type"] == "result"}
done = out[-1]
assert done["type"] == "done" and done["exit_status"] == 76, done
assert done["stopped"] == "STOPPED_FAILURE_THRESHOLD", done
assert len(res) == 8, sorted(res)
assert [h for h in sorted(res) if res[h]["executed"]] == ["lab1", "lab2", "lab3", "lab4"], res
for h in ("lab5", "lab6", "lab7", "lab8"):
    assert res[h]["reason"] == "STOPPED_FAILURE_THRESHOLD" and res[h]["exit_status"] == 76, res[h]
# bad values: one error line, nothing runs
for bad, code in (({"batch": 0}, 64), ({"batch": "0%"}, 64), ({"batch": "101%"}, 64),
                  ({"max_failures": -1}, 64), ({"canary": 9}, 64), ({"batch": True}, 65),
                  ({"batch": 1.5}, 65), ({"max_failures": [1]}, 65), ({"canary": "2"}, 65),
                  ({"retry_unavailable": 11}, 65)):
    out = ask(dict(run, **bad))
    assert len(out) == 1 and out[0]["type"] == "error" and out[0]["exit_status"] == code, (bad, out)
    assert list(bad)[0] in out[0]["error"], (bad, out)
out = ask({"op": "eval", "id": 2, "targets": targets, "action": "t.mark", "batch": 2})
assert out[0]["type"] == "error" and "unknown key" in out[0]["error"], out
PY
# a retry waits before it starts (500 ms, doubling); a cancel during the wait ends it at once:
# 10 retries would take 55 s of waits, the cancel comes after the first try's outcome
"$RX_PYTHON" - "$SOCK" "$WS/audit/audit.log" >"$OUT" 2>&1 <<'PY' || { cat "$OUT" >&2; fail "serve: a cancel during a retry's wait"; }
import json, socket, sys, time
path, log = sys.argv[1:3]
seen = len(open(log).readlines())
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(300)
s.connect(path)
s.sendall(json.dumps({"op": "run", "id": 1, "targets": "closed", "action": "t.mark",
                      "retry_unavailable": 10}).encode() + b"\n")
deadline = time.monotonic() + 120
while not any('"phase":"outcome"' in l and '"host":"closed"' in l for l in open(log).readlines()[seen:]):
    assert time.monotonic() < deadline, "no outcome of the first try"
    time.sleep(0.05)
s.sendall(b'{"op":"cancel","id":2,"target":1}\n')
f, res = s.makefile("rb"), None
while True:
    m = json.loads(f.readline())
    if m["type"] == "result":
        res = m
    if m["type"] == "done":
        break
assert res["exit_status"] == 130 and res["executed"] is False, res
assert 2 <= res["tries"] <= 10, res   # the waiting try was ended, not tried to the end
PY
ran lab1 lab2 lab3 lab4
# rexec run --socket sends them: the same stop, the same exit status; a bad value is serve's 64
reset_marks
fail_on lab2 lab4
assert_exit 76 rxt run --socket "$SOCK" "$all" t.mark --batch 25% --max-failures 1 --json
ran lab1 lab2 lab3 lab4
assert_eq 4 "$(grep -c '"reason":"STOPPED_FAILURE_THRESHOLD"' "$OUT")" "skipped through --socket"
assert_exit 64 rxt run --socket "$SOCK" "$all" t.mark --canary 9
assert_contains "$ERR" "canary 9"
ran lab1 lab2 lab3 lab4

# ---- the Python client passes them through --------------------------------------------------
reset_marks
fail_on lab2
PYTHONPATH=$REXEC_SRC/python "$RX_PYTHON" - "$SOCK" "$all" >"$OUT" 2>&1 <<'PY' || { cat "$OUT" >&2; fail "python client: canary"; }
import sys
from rexec_client import Client
r = Client(sys.argv[1]).run(sys.argv[2], "t.mark", canary=3, max_failures=0, batch="50%")
assert r["exit_status"] == 76 and r["stopped"] == "STOPPED_FAILURE_THRESHOLD", r
ran = sorted(x["host"] for x in r["results"] if x["executed"])
assert ran == ["lab1", "lab2", "lab3"], ran   # lab2 fails in the canary: nothing after it
PY
ran lab1 lab2 lab3
assert_exit 0 rx audit verify
