# shellcheck shell=bash
# scripts/lib/bench_lab.sh — sourced by the scripts/bench.d/*.sh benchmarks: the rexec binary they
# measure, and a lab of their own in a temporary directory. Run from the source tree's root.

# rx_release_rexec [BIN]: prints BIN (made absolute) when given; else builds build-release's rexec
# (CMake Release, quietly) and prints its path.
rx_release_rexec() {
    if [[ -n ${1:-} ]]; then
        realpath "$1"
        return
    fi
    cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build-release --target rexec -j2 >/dev/null
    echo "$PWD/build-release/rexec"
}

# rx_bench_lab TAG HOSTS: a temporary directory ($tmp, named after TAG) holding a lab of HOSTS
# hosts ($tmp/lab) on a free block of ports ($base; scripts/lib/lab_ports.sh). At exit the
# processes in bench_pids are killed, the lab is stopped and $tmp removed.
bench_pids=()
rx_bench_lab() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/rexec-bench-$1.XXXXXX")
    trap 'for p in ${bench_pids[@]+"${bench_pids[@]}"}; do kill -KILL "$p" 2>/dev/null; done
          scripts/lab down --purge --dir "$tmp/lab" >/dev/null 2>&1 || true; rm -rf -- "$tmp"' EXIT
    . scripts/lib/lab_ports.sh
    rx_lab_up_free scripts/lab "$tmp/lab" "$2" "$tmp/lab.out" || { cat "$tmp/lab.out" >&2; exit 1; }
}
