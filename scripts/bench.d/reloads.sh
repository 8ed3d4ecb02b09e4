#!/usr/bin/env bash
# Reloads under load (not a test; scripts/bench.d/reloads.py): 1,000 reloads of a serve that 8
# clients keep calling; serve's fds, RSS and connections to the lab before and after.
# Usage: scripts/bench.d/reloads.sh [--rexec BIN] [--reloads N] [--clients C]
set -euo pipefail
cd "$(dirname "$0")/../.."
rexec="" args=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --rexec) rexec=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
. scripts/lib/bench_lab.sh
rexec=$(rx_release_rexec "$rexec")
rx_bench_lab reload 2
ws=$tmp/lab/workspace
"$rexec" --workspace "$ws" serve --socket "$tmp/s.sock" --log off 2>"$tmp/serve.err" &
bench_pids+=($!)
serve=$!
for ((i = 0; i < 100; i++)); do [[ -S $tmp/s.sock ]] && break; sleep 0.1; done
printf 'command: scripts/bench.d/reloads.sh %s (git %s); load before: %s\n' "${args[*]-}" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
python3 scripts/bench.d/reloads.py --socket "$tmp/s.sock" --serve-pid "$serve" --workspace "$ws" \
    --ports "$base,$((base + 1))" ${args[@]+"${args[@]}"} || rc=1
printf 'load after: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
