#!/usr/bin/env bash
# The audit log under load and under attack: 32 concurrent rexec processes leave whole records,
# an intent and an outcome for each run, and a chain that verifies; an edited, removed or
# reordered line is found; a crash between intent and outcome shows; a full disk refuses to
# run anything (74); modes are 0700/0600 whatever the umask.
tid="audit: concurrency, tampering, full disk, modes"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
# 32 processes connecting at once on a small machine: give the handshakes room.
ws_edit 'c["limits"]["connect_timeout_s"] = 90'
ws_add_action t.mark '{"risk": "L0", "command": "echo {n} >> {file}",
  "params": {"n": {"type": "int", "min": 0, "max": 1000}, "file": {"type": "path"}}}'

# --- 32 processes at once
pids=()
for n in $(seq 1 32); do
    host=lab$(( n % 2 + 1 ))
    "$REXEC_BIN" --workspace "$WS" run "$host" t.mark --param n=$n --param "file=$RX_TMP/marks" \
        >"$RX_TMP/o.$n" 2>"$RX_TMP/e.$n" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent run failed: $(cat "$RX_TMP"/e.* | head -5)"; done
assert_eq 32 "$(wc -l <"$RX_TMP/marks")" "commands run"
"$RX_PYTHON" - "$WS/audit/audit.log" <<'PY' || fail "records not whole"
import json, sys, collections
phases = collections.defaultdict(list)
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)             # every line is one whole JSON object
    phases[r["run_id"]].append(r["phase"])
runs = [v for v in phases.values() if "intent" in v]
assert len(runs) == 32, len(runs)
assert all(v == ["intent", "outcome"] for v in runs), runs
PY
assert_exit 0 rx audit verify

# --- tampering: an edited, a removed and a reordered line are each found, naming the line
cp "$WS/audit/audit.log" "$RX_TMP/good.log"
sed -i '5s/"action":"t.mark"/"action":"t.marx"/' "$WS/audit/audit.log"
cmp -s "$WS/audit/audit.log" "$RX_TMP/good.log" && fail "the edit did not change the log"
assert_exit 1 rx audit verify
grep -q ":5:" "$OUT" "$ERR" || fail "verify did not name line 5 of an edited log"
cp "$RX_TMP/good.log" "$WS/audit/audit.log"
sed -i '7d' "$WS/audit/audit.log"
assert_exit 1 rx audit verify
grep -q ":7:" "$OUT" "$ERR" || fail "verify did not name line 7 after a removal"
cp "$RX_TMP/good.log" "$WS/audit/audit.log"
awk 'NR == 10 { held = $0; next } { print } NR == 11 { print held }' "$RX_TMP/good.log" >"$WS/audit/audit.log"
assert_exit 1 rx audit verify
grep -q ":10:" "$OUT" "$ERR" || fail "verify did not name line 10 after a swap"
cp "$RX_TMP/good.log" "$WS/audit/audit.log"
assert_exit 0 rx audit verify

# --- a crash between intent and outcome: kill -9 rexec while its command runs
ws_add_action t.sleep '{"risk": "L0", "command": "sleep 30"}'
"$REXEC_BIN" --workspace "$WS" run lab1 t.sleep >/dev/null 2>&1 &
victim=$!
wait_until 20 remote_pgrep '^sleep 30$' >/dev/null
kill -9 "$victim"
wait "$victim" 2>/dev/null || true
assert_exit 2 rx audit verify
grep -qi "intent without outcome\|without an outcome\|no outcome" "$OUT" "$ERR" || fail "verify did not report the intent without outcome"

# --- modes whatever the umask
rm -rf "$WS/audit" "$WS/evidence"
(umask 000 && "$REXEC_BIN" --workspace "$WS" run lab1 t.mark --param n=1 --param "file=$RX_TMP/m2" --json >"$RX_TMP/j")
ev=$("$RX_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["evidence"])' "$RX_TMP/j")
assert_eq 700 "$(stat -c %a "$WS/audit")" "audit dir mode"
assert_eq 600 "$(stat -c %a "$WS/audit/audit.log")" "audit file mode"
assert_eq 700 "$(stat -c %a "$WS/evidence")" "evidence dir mode"
assert_eq 700 "$(stat -c %a "$ev")" "run evidence dir mode"
for f in stdout stderr meta.json; do assert_eq 600 "$(stat -c %a "$ev/$f")" "$f mode"; done

# --- a symlinked audit file is refused, and nothing runs
mv "$WS/audit/audit.log" "$RX_TMP/real.log"
ln -s "$RX_TMP/real.log" "$WS/audit/audit.log"
assert_exit 74 rx run lab1 t.mark --param n=2 --param "file=$RX_TMP/m3"
[[ ! -e $RX_TMP/m3 ]] || fail "ran with a symlinked audit log"
rm "$WS/audit/audit.log"
mv "$RX_TMP/real.log" "$WS/audit/audit.log"

# --- a full disk: the intent cannot be written, so nothing runs (root only: needs a tmpfs)
if [[ $(id -u) == 0 ]]; then
    rm -rf "$WS/audit"
    mkdir -m 700 "$WS/audit"
    mount -t tmpfs -o size=16k,mode=0700 tmpfs "$WS/audit" || skip "cannot mount a tmpfs"
    trap 'umount "$WS/audit" 2>/dev/null || true' RETURN
    head -c 1M /dev/zero >"$WS/audit/filler" 2>/dev/null || true
    assert_exit 74 rx run lab1 t.mark --param n=3 --param "file=$RX_TMP/m4"
    assert_contains "$ERR" "audit"
    [[ ! -e $RX_TMP/m4 ]] || fail "ran although the intent record could not be written"
    umount "$WS/audit"
fi
pass
