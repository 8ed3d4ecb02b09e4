#!/usr/bin/env bash
# The audit tail anchored (docs/audit.md, "The head"), against the lab: `rexec audit head` names
# the last record; cutting the newest records stops the next call (74) until `audit head
# --reset`; a cut hidden by a reset (what anyone who can write the workspace can do) and a
# rollback to an older copy pass a local verify but not `verify --head` with a head shipped
# before; every record is copied to a syslog socket, redacted, in order.
tid="audit head: seq, head.json, verify --head, syslog copy"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.mark '{"risk": "L0", "command": "echo {n}", "params": {"n": {"type": "int"}}}'

# --- a syslog receiver on a socket of our own (never the machine's /dev/log)
SOCK=$RX_TMP/log.sock
"$RX_PYTHON" - "$SOCK" "$RX_TMP/syslog.txt" "$RX_TMP/syslog.ready" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
open(sys.argv[3], "w").close()
s.settimeout(120)
with open(sys.argv[2], "ab", buffering=0) as out:
    while True:
        try:
            out.write(s.recv(65536) + b"\n")
        except socket.timeout:
            break
PY
receiver=$!
wait_until 20 test -e "$RX_TMP/syslog.ready"
ws_edit 'c.setdefault("audit", {})["syslog"] = args[0]' "$SOCK"

for n in 1 2 3; do assert_exit 0 rx run lab1 t.mark --param n=$n; done
assert_exit 0 rx run lab1 demo.leak # the action prints its secret: redacted everywhere
assert_exit 0 rx audit head
HEAD1=$RX_TMP/head1.json
cp "$OUT" "$HEAD1"
"$RX_PYTHON" - "$HEAD1" "$WS/audit/audit.log" <<'PY' || fail "the head does not name the last record"
import json, sys
head = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().splitlines()
last = json.loads(lines[-1])
assert [json.loads(l)["seq"] for l in lines] == list(range(1, len(lines) + 1))
assert head["seq"] == last["seq"] == len(lines), (head, len(lines))
assert head["hash"] == last["hash"] and head["keyed"] is False and len(head["mac"]) == 64
PY

# the copy: every line, whole and in order, and no secret value
wait_until 20 bash -c "[[ \$(grep -c rexec-audit '$RX_TMP/syslog.txt') -ge \$(wc -l <'$WS/audit/audit.log') ]]"
"$RX_PYTHON" - "$RX_TMP/syslog.txt" "$WS/audit/audit.log" <<'PY' || fail "the syslog copy differs from the log"
import re, sys
got = [re.sub(r"^<86>\w{3} [ \d]\d \d\d:\d\d:\d\d rexec-audit\[\d+\]: ", "", l, count=1)
       for l in open(sys.argv[1]).read().splitlines()]
want = open(sys.argv[2]).read().splitlines()
assert got == want, (len(got), len(want))
PY
assert_not_contains "$RX_TMP/syslog.txt" "$(cat "$WS/secrets/demo_token")"
kill "$receiver" 2>/dev/null || true
wait "$receiver" 2>/dev/null || true

# nobody listens now: calls go on, check says so
assert_exit 0 rx run lab1 t.mark --param n=4
assert_exit 0 rx check lab1
assert_contains "$ERR" "audit.syslog: $SOCK"
ws_edit 'del c["audit"]["syslog"]'
assert_exit 0 rx audit head # shipped before the cut below
cp "$OUT" "$HEAD1"

# --- the newest records cut: verify says so, the next call is refused, the reset is chained
cp "$WS/audit/audit.log" "$RX_TMP/full.log"
head -n -2 "$RX_TMP/full.log" >"$WS/audit/audit.log"
assert_exit 1 rx audit verify
assert_contains "$OUT" "audit/head.json:1: the head names record"
assert_exit 74 rx run lab1 t.mark --param n=5
assert_contains "$ERR" "records were removed"
assert_contains "$ERR" "rexec audit head --reset"
assert_exit 74 rx audit head
assert_exit 0 rx audit head --reset
assert_exit 0 rx audit verify
assert_exit 0 rx run lab1 t.mark --param n=6
grep -q '"phase":"head_reset"' "$WS/audit/audit.log" || fail "the reset is not in the chain"

# ... and the head shipped before the cut still catches it
assert_exit 1 rx audit verify --head "$HEAD1"
assert_contains "$OUT" "rolled back and written again"
assert_contains "$OUT" "shipped head (record $("$RX_PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['seq'])" "$HEAD1")): failed"

# --- a rollback: log and head.json put back to an older copy (a consistent one)
cp "$WS/audit/audit.log" "$RX_TMP/old.log"
cp "$WS/audit/head.json" "$RX_TMP/old.head"
assert_exit 0 rx run lab1 t.mark --param n=7
assert_exit 0 rx audit head
HEAD2=$RX_TMP/head2.json
cp "$OUT" "$HEAD2"
cp "$RX_TMP/old.log" "$WS/audit/audit.log"
cp "$RX_TMP/old.head" "$WS/audit/head.json"
assert_exit 0 rx audit verify                      # locally, nothing shows
assert_exit 1 rx audit verify --head - <"$HEAD2"   # the shipped head does
assert_contains "$OUT" "but the log ends at record"
assert_exit 1 rx audit verify --json --head "$(cat "$HEAD2")"
assert_contains "$OUT" '"shipped_head":"failed"'
assert_exit 64 rx audit verify --head '{"seq": "x"}'
assert_contains "$ERR" '--head: "seq" must be a whole number'
pass
