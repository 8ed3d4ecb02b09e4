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
# processes in bench_pids are killed, the users in bench_users (rx_bench_users) deleted, the lab
# is stopped and $tmp removed.
bench_pids=()
bench_users=()
rx_bench_lab() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/rexec-bench-$1.XXXXXX")
    trap _rx_bench_cleanup EXIT
    . scripts/lib/lab_ports.sh
    rx_lab_up_free scripts/lab "$tmp/lab" "$2" "$tmp/lab.out" || { cat "$tmp/lab.out" >&2; exit 1; }
}

# shellcheck disable=SC2317 # runs from the EXIT trap
_rx_bench_cleanup() {
    local rc=$? p u
    set +e
    for p in ${bench_pids[@]+"${bench_pids[@]}"}; do { kill -KILL "$p" && wait "$p"; } 2>/dev/null; done
    for u in ${bench_users[@]+"${bench_users[@]}"}; do
        # another process's useradd/userdel may hold /etc/passwd's lock for a moment
        for _ in $(seq 50); do userdel "$u" 2>/dev/null && break; sleep 0.2; done
        ! id "$u" >/dev/null 2>&1 || echo "bench: userdel $u failed" >&2
    done
    scripts/lab down --purge --dir "$tmp/lab" >/dev/null 2>&1 || true
    rm -rf -- "$tmp"
    exit "$rc"
}

# rx_bench_users NAME...: system users (no home, no login shell) for a benchmark that needs
# more than one uid (needs root), deleted at exit; useradd is tried again while another holds
# /etc/passwd's lock. Call after rx_bench_lab.
rx_bench_users() {
    local u
    for u in "$@"; do
        for _ in $(seq 50); do
            useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
                "$u" 2>"$tmp/useradd.err" && break
            sleep 0.2
        done
        id "$u" >/dev/null 2>&1 || { cat "$tmp/useradd.err" >&2; exit 1; }
        bench_users+=("$u")
    done
}

# rx_bench_serve_for_users WS: `$rexec serve` (the caller's rexec, from rx_release_rexec) of WS
# for the benchmark's other users, killed at exit: its socket ($sock) in a 0755 directory under
# $tmp, which they may now reach; its stderr in $tmp/serve.err. Returns once the socket is
# there (exits 1 with serve's stderr otherwise).
rx_bench_serve_for_users() {
    chmod o+x "$tmp" "$tmp/lab"
    mkdir -m 0755 "$tmp/run"
    sock=$tmp/run/rexec.sock
    # shellcheck disable=SC2154 # rexec: the caller's
    "$rexec" --workspace "$1" serve --socket "$sock" --log off 2>"$tmp/serve.err" &
    bench_pids+=($!)
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    [[ -S $sock ]] || { cat "$tmp/serve.err" >&2; exit 1; }
}
