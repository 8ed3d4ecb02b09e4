#!/usr/bin/env bash
# An unkeyed chain can be recomputed by whoever can write the log ("re-chained", docs/audit.md).
# `rexec audit verify` must still name what a re-chained forgery breaks, record by record: a
# repeated intent (duplicate_intent), an outcome with no intent, records without run_id, phase
# or prev, a seq that is not a number, a renumbered or dropped seq (seq_mismatch, seq_missing),
# a line that is not JSON, and a line past the length limit; each exits 1 (tampered) and names
# the line. The untouched log verifies (0).
tid="audit: re-chained forgeries are named by verify"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
for i in 1 2 3; do
    assert_exit 0 rx run lab1 sys.uname
done
assert_exit 0 rx audit verify
cp -a "$WS/audit" "$RX_TMP/audit.orig"

# forge KIND: rewrites audit.log from the original with one forgery, every hash recomputed (so
# each line's own hash and its prev are right: only the record checks can see it).
forge() {
    rm -rf "$WS/audit"
    cp -a "$RX_TMP/audit.orig" "$WS/audit"
    "$RX_PYTHON" - "$WS/audit/audit.log" "$1" <<'PY'
import hashlib, re, sys
path, kind = sys.argv[1:]
bodies = []
for line in open(path, encoding="utf-8").read().splitlines():
    m = re.fullmatch(r'(.*),"hash":"[0-9a-f]{64}"\}', line)
    bodies.append(m.group(1) + "}")
# bodies[0] is run 1's intent, [1] its outcome, [2] run 2's intent, ...
if kind == "duplicate_intent":
    bodies.insert(3, bodies[2])
elif kind == "outcome_without_intent":
    del bodies[2]
elif kind == "no_run_id":
    bodies[2] = re.sub(r'"run_id":"[^"]*",', "", bodies[2], count=1)
elif kind == "no_prev":
    bodies[2] = re.sub(r',"prev":"[0-9a-f]{64}"\}$', "}", bodies[2])
elif kind == "seq_text":
    bodies[2] = re.sub(r'"seq":\d+,', '"seq":"three",', bodies[2])
elif kind == "seq_mismatch":
    bodies[2] = re.sub(r'"seq":(\d+),', lambda m: '"seq":%d,' % (int(m.group(1)) + 5), bodies[2])
elif kind == "seq_missing":
    bodies[2] = re.sub(r',"seq":\d+', "", bodies[2])
elif kind == "bad_json":
    bodies[2] = '{"run_id": this is not json,"prev":"' + "0" * 64 + '"}'
elif kind == "too_long":
    bodies[2] = bodies[2][:-1] + ',"pad":"' + "x" * (4 << 20) + '"}'
prev = "0" * 64
out = []
for b in bodies:
    if re.search(r',"prev":"[0-9a-f]{64}"\}$', b):
        b = re.sub(r'"prev":"[0-9a-f]{64}"\}$', '"prev":"%s"}' % prev, b)
    h = hashlib.sha256(b.encode()).hexdigest()
    out.append(b[:-1] + ',"hash":"%s"}' % h)
    prev = h
open(path, "w", encoding="utf-8").write("\n".join(out) + "\n")
PY
}

# expect KIND PROBLEM LINE MESSAGE: verify --json exits 1 and lists PROBLEM at audit.log:LINE
expect() {
    forge "$1"
    assert_exit 1 rx audit verify --json
    "$RX_PYTHON" - "$OUT" "$2" "$3" "$4" <<'PY' || fail "$1: $2 at line $3 not reported: $(cat "$OUT")"
import json, sys
rep = json.load(open(sys.argv[1]))
want, line, msg = sys.argv[2], int(sys.argv[3]), sys.argv[4]
assert rep["status"] == "tampered", rep["status"]
hits = [e for e in rep["errors"] if e["problem"] == want and e["line"] == line
        and e["file"].endswith("audit.log") and msg in e["message"]]
assert hits, [(e["problem"], e["line"], e["message"]) for e in rep["errors"]]
PY
}

expect duplicate_intent duplicate_intent 4 "second intent for run"
expect outcome_without_intent outcome_without_intent 3 ""
expect no_run_id bad_record 3 "record has no run_id or phase"
expect no_prev bad_record 3 "record has no prev hash"
expect seq_text bad_record 3 "seq is not a positive whole number"
expect seq_mismatch seq_mismatch 3 ""
expect seq_missing seq_missing 3 ""
expect bad_json bad_json 3 "not a valid JSON record"
expect too_long too_long 3 "line longer than"

# and the untouched log still verifies
rm -rf "$WS/audit"
cp -a "$RX_TMP/audit.orig" "$WS/audit"
assert_exit 0 rx audit verify
pass
