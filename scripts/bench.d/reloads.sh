#!/usr/bin/env bash
# Reloads under load (not a test; scripts/bench.d/reloads.py): 1,000 reloads of a serve that 8
# clients keep calling; serve's fds, RSS and connections to the lab before and after.
# Usage: scripts/bench.d/reloads.sh [--rexec BIN] [--reloads N] [--clients C]
set -euo pipefail
cd "$(dirname "$0")/../.."
rexec="" args=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --rexec) rexec=$(realpath "$2"); shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
if [[ -z $rexec ]]; then
    cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build-release --target rexec -j2 >/dev/null
    rexec=$PWD/build-release/rexec
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rexec-bench-reload.XXXXXX")
serve=
trap '[[ -z $serve ]] || kill -KILL "$serve" 2>/dev/null; scripts/lab down --purge --dir "$tmp/lab" >/dev/null 2>&1 || true; rm -rf -- "$tmp"' EXIT
. scripts/lib/lab_ports.sh
rx_lab_up_free scripts/lab "$tmp/lab" 2 "$tmp/lab.out" || { cat "$tmp/lab.out" >&2; exit 1; }
ws=$tmp/lab/workspace
"$rexec" --workspace "$ws" serve --socket "$tmp/s.sock" --log off 2>"$tmp/serve.err" &
serve=$!
for ((i = 0; i < 100; i++)); do [[ -S $tmp/s.sock ]] && break; sleep 0.1; done
printf 'command: scripts/bench.d/reloads.sh %s (git %s); load before: %s\n' "${args[*]-}" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
python3 scripts/bench.d/reloads.py --socket "$tmp/s.sock" --serve-pid "$serve" --workspace "$ws" \
    --ports "$base,$((base + 1))" ${args[@]+"${args[@]}"} || rc=1
printf 'load after: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
