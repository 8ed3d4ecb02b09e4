#!/usr/bin/env bash
# Fairness benchmark (not a test): `ping` round trips on one serve connection while another
# streams --mib MiB (default 300) of stdout, with runners and with "runner": false
# (scripts/bench.d/fairness.py). Prints p50/p99/max and the load average before and after.
# Usage: scripts/bench.d/fairness.sh [--mib N] [--rexec BIN] [--modes runner,exec]
#   --rexec BIN: that binary instead of building the release build
set -euo pipefail
cd "$(dirname "$0")/../.."
mib=300 rexec="" modes=runner,exec
while [[ $# -gt 0 ]]; do
    case $1 in
        --mib) mib=$2; shift 2 ;;
        --rexec) rexec=$2; shift 2 ;;
        --modes) modes=$2; shift 2 ;; # runner,exec (default), runner or exec
        *) echo "bench-fairness: unknown argument $1" >&2; exit 2 ;;
    esac
done
. scripts/lib/bench_lab.sh
rexec=$(rx_release_rexec "$rexec")
rx_bench_lab fair 2
printf 'command: scripts/bench.d/fairness.sh --mib %s (git %s); load before: %s\n' "$mib" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(uptime)"
python3 scripts/bench.d/fairness.py --rexec "$rexec" --lab "$tmp/lab" --mib "$mib" --modes "$modes"
printf 'load after: %s\n' "$(uptime)"
