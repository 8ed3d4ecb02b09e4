#!/usr/bin/env bash
# Approval latency benchmark (not a test): an agent user's L2 call with wait_approval_s while an
# approver user watches serve's socket and approves at once, against the flow without waiting
# (75, approve, call again with the grant). Prints p50/p90/max and the load average before and
# after (scripts/bench.d/approval.py). Needs root: it creates the two users (and removes them).
# Usage: scripts/bench.d/approval.sh [--rounds N] [--rexec BIN]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=20 rexec=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --rexec) rexec=$2; shift 2 ;;
        *) echo "bench-approval: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ $(id -u) == 0 ]] || { echo "bench-approval: needs root (it creates an agent and an approver user)" >&2; exit 2; }
. scripts/lib/bench_lab.sh
rexec=$(rx_release_rexec "$rexec")
rx_bench_lab approval 1
sfx=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
agent=rxba$sfx approver=rxbp$sfx
rx_bench_users "$agent" "$approver"
ws=$tmp/lab/workspace
python3 - "$ws/rexec.json" "$agent" "$approver" <<'PY'
import json, sys
p, agent, approver = sys.argv[1:4]
c = json.load(open(p))
c["actions"]["bench.approve"] = {"risk": "L2", "state_changing": True,
    "command": "date +%s.%N; echo {unit}",
    "params": {"unit": {"type": "string", "pattern": "^[a-z0-9]{1,32}$"}}}
c["actions"]["bench.approve-l0"] = dict(c["actions"]["bench.approve"], risk="L0",
                                        state_changing=False)
c["serve"] = {"clients": [{"user": agent, "verbs": ["run"]},
                          {"user": approver, "verbs": ["approvals", "approve"]}]}
json.dump(c, open(p, "w"), indent=2)
PY
rx_bench_serve_for_users "$ws"
printf 'command: scripts/bench.d/approval.sh --rounds %s (git %s); load before: %s\n' "$rounds" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(uptime)"
python3 scripts/bench.d/approval.py drive "$sock" "$agent" "$approver" "$rounds"
printf 'load after: %s\n' "$(uptime)"
