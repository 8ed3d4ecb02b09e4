#!/usr/bin/env bash
# Fan-out controls at fleet size (not a test; tests/e2e/t_fanout_batches.sh is the test): a lab
# of 64 hosts, an action that fails on 5 of them (lab3, lab12, lab20, lab40, lab50: batches 1, 2,
# 3, 5, 7 of 8), run as `rexec run @lab ACTION --batch 8 --max-failures 2`. It must stop after
# batch 3 (the third failure, lab20's) with no host of batch 4 or later started: the markers each
# call leaves on the VM side say which hosts ran. Prints what ran, the exit status, the stop
# record, and the wall time beside the same run without --max-failures (all 8 batches) and
# without any control (all 64 at --parallel 64), measured in the same run.
# Usage: scripts/bench.d/batches.sh [--rexec BIN] [--hosts N]
set -euo pipefail
cd "$(dirname "$0")/../.."
rexec="" hosts=64
while [[ $# -gt 0 ]]; do
    case $1 in
        --rexec) rexec=$2; shift 2 ;;
        --hosts) hosts=$2; shift 2 ;;
        *) echo "usage: $0 [--rexec BIN] [--hosts N]" >&2; exit 64 ;;
    esac
done
. scripts/lib/bench_lab.sh
rexec=$(rx_release_rexec "$rexec")
rx_bench_lab batches "$hosts"
ws=$tmp/lab/workspace
marks=$tmp/marks
mkdir -p "$marks"
printf 'command: scripts/bench.d/batches.sh --hosts %s (git %s); load before: %s\n' "$hosts" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(uptime)"
python3 - "$ws/rexec.json" "$marks" <<'PY'
import json, sys
path, marks = sys.argv[1:3]
c = json.load(open(path))
c.setdefault("limits", {})["connect_timeout_s"] = 120
c["actions"]["b.mark"] = {"risk": "L0", "command":
    "p=${SSH_CONNECTION##* }; touch %s/ran-$p; ! test -e %s/fail-$p" % (marks, marks)}
json.dump(c, open(path, "w"), indent=2)
PY
port() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hosts"][sys.argv[2]]["port"])' "$ws/rexec.json" "$1"; }
for h in lab3 lab12 lab20 lab40 lab50; do touch "$marks/fail-$(port "$h")"; done
rx() { "$rexec" --workspace "$ws" "$@"; }
rx check @lab >/dev/null || true # warm nothing up: each run below opens its own connections

# timed LABEL ARGS...: one run; its wall time, exit status and the hosts that ran
timed() {
    local label=$1 t0 t1 rc=0
    shift
    rm -f "$marks"/ran-*
    t0=$(date +%s.%N)
    rx run @lab b.mark --json "$@" >"$tmp/$label.json" 2>"$tmp/$label.err" || rc=$?
    t1=$(date +%s.%N)
    printf '%-28s exit %3s  hosts ran %2s  wall %6.2f s\n' "$label" "$rc" \
        "$(find "$marks" -name 'ran-*' | wc -l)" "$(python3 -c "print($t1 - $t0)")"
}
timed stopped --batch 8 --max-failures 2
python3 - "$tmp/stopped.json" "$ws/audit/audit.log" "$marks" "$ws/rexec.json" <<'PY'
import json, os, sys
res = [json.loads(l) for l in open(sys.argv[1])]
ports = {h["port"]: n for n, h in json.load(open(sys.argv[4]))["hosts"].items()}
ran = sorted((ports[int(f.split("-")[1])] for f in os.listdir(sys.argv[3]) if f.startswith("ran-")),
             key=lambda h: int(h[3:]))
skipped = [r["host"] for r in res if r.get("reason") == "STOPPED_FAILURE_THRESHOLD"]
stop = [json.loads(l) for l in open(sys.argv[2]) if '"batch_stop"' in l][-1]
print("  hosts that ran (VM side): %s..%s (%d); results: %d; skipped: %d (executed false)"
      % (ran[0], ran[-1], len(ran), len(res), len(skipped)))
print("  batch_stop: failed %d (%s), crossed in batch %d of %d, not_started %d"
      % (stop["failed"], ",".join(stop["failed_hosts"]), stop["batch"], stop["batches"],
         len(stop["not_started"])))
ok = ran == ["lab%d" % i for i in range(1, 25)] and stop["batch"] == 3 and len(skipped) == len(res) - 24
print("  stops after the batch of the third failure, nothing after it started: %s" % ("yes" if ok else "NO"))
PY
timed all-8-batches --batch 8
timed no-controls --parallel 64
"$rexec" --workspace "$ws" audit verify >/dev/null && echo "audit verify: intact"
printf 'load after: %s\n' "$(uptime)"
