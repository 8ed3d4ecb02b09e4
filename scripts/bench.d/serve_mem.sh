#!/usr/bin/env bash
# serve's memory and descriptors per call (not a test; scripts/bench.d/serve_mem.py): VmRSS
# growth per 1,000 completed calls and per 1,000 calls cancelled while queued (after a warm-up),
# and the fds a queued call holds.
# Usage: scripts/bench.d/serve_mem.sh [--rexec BIN] [serve_mem.py options: --warm N --calls N
#        --inflight N --batch N --serve-wrapper 'heaptrack -o FILE']
#   --rexec BIN: that binary instead of building the release build
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
rx_bench_lab mem 2
printf 'command: scripts/bench.d/serve_mem.sh %s (git %s); load before: %s\n' "${args[*]-}" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(uptime)"
python3 scripts/bench.d/serve_mem.py --rexec "$rexec" --lab "$tmp/lab" ${args[@]+"${args[@]}"}
printf 'load after: %s\n' "$(uptime)"
