#!/usr/bin/env bash
# A fan-out approved with one decision (issue 32's goal: "A 32-host fan-out approved with one
# decision; 32 grants used, 0 reusable"). Not a test: a lab of N loopback hosts (default 32) in
# one group, serve with an agent user (verb run) and an approver user (approvals, approve, deny),
# an L2 action; the agent sends one run to the group with wait_approval_s, the scripted approver
# (tests/e2e/approvals_client.py) approves the single challenge once. Then it checks: one
# challenge, every host ran on the grant, one audit intent with the grant_id per host, the grant
# named again (to the group, to one host) refused for every host; and prints the time from the
# request to the last host's result (scripts/bench.d/approval_fanout.py). Exit 1 when a check
# fails. Needs root: it creates the two users (and removes them).
# Usage: scripts/bench.d/approval_fanout.sh [--hosts N] [--rexec BIN]
set -euo pipefail
cd "$(dirname "$0")/../.."
hosts=32 rexec=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --hosts) hosts=$2; shift 2 ;;
        --rexec) rexec=$2; shift 2 ;;
        *) echo "bench-approval-fanout: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ $(id -u) == 0 ]] || { echo "bench-approval-fanout: needs root (it creates an agent and an approver user)" >&2; exit 2; }
. scripts/lib/bench_lab.sh
rexec=$(rx_release_rexec "$rexec")
rx_bench_lab approval-fanout "$hosts"
sfx=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
agent=rxfa$sfx approver=rxfp$sfx
rx_bench_users "$agent" "$approver"
ws=$tmp/lab/workspace
ran=$tmp/ran
: >"$ran"
chmod 666 "$ran"
python3 - "$ws/rexec.json" "$agent" "$approver" "$ran" <<'PY'
import json, sys
p, agent, approver, ran = sys.argv[1:5]
c = json.load(open(p))
# each host's command appends the unit to one shared file: the count of runs as the hosts saw it
c["actions"]["bench.fanout"] = {"risk": "L2", "state_changing": True,
    "command": "echo {unit} >> " + ran + "; echo ran {unit}",
    "params": {"unit": {"type": "string", "pattern": "^[a-z0-9]{1,32}$"}}}
# the peer: the same command at L0, no approval (it writes to the shared file too: not counted)
c["actions"]["bench.fanout-l0"] = dict(c["actions"]["bench.fanout"], risk="L0",
                                       state_changing=False,
                                       command="echo floor >> " + ran + "; echo ran {unit}")
c["serve"] = {"clients": [{"user": agent, "verbs": ["run"]},
                          {"user": approver, "verbs": ["approvals", "approve", "deny"]}]}
json.dump(c, open(p, "w"), indent=2)
PY
rx_bench_serve_for_users "$ws"
printf 'command: scripts/bench.d/approval_fanout.sh --hosts %s (git %s, %s)\nload before: %s\n' \
    "$hosts" "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$rexec" "$(uptime)"
rc=0
python3 scripts/bench.d/approval_fanout.py drive "$sock" "$ws" "$agent" "$approver" lab \
    "u$sfx" "$ran" || rc=$?
printf 'load after: %s\n' "$(uptime)"
[[ ! -s $tmp/serve.err ]] || { echo "serve's stderr:"; sed 's/^/  /' "$tmp/serve.err"; }
exit "$rc"
