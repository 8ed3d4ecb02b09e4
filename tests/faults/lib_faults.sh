# shellcheck shell=bash
# tests/faults/lib_faults.sh — sourced by the fault cases (tests/faults/f_*.sh) after
# tests/e2e/lib.sh: serve in the background, its memory, and the audit/VM checks every case ends
# with (docs/testing.md, "Fault cases").

SERVE_PIDS=()
_f_stop_serves() {
    stop_gently ${SERVE_PIDS[@]+"${SERVE_PIDS[@]}"}
}
trap '_t_rc=$?; _f_stop_serves; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT

# start_serve SOCK [SERVE_OPTIONS...]: rexec serve on SOCK (stderr to $RX_TMP/serve.err); sets
# SERVE_PID once the socket is up. ASan's quarantine is kept small so that RSS reflects what
# serve holds, not what the sanitizer keeps of freed memory.
start_serve() {
    local sock=$1
    shift
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8 \
        "$REXEC_BIN" --workspace "$WS" serve --socket "$sock" "$@" 2>>"$RX_TMP/serve.err" &
    SERVE_PID=$!
    disown "$SERVE_PID"
    SERVE_PIDS+=("$SERVE_PID")
    wait_until 20 test -S "$sock"
}

# rss_kib PID / hwm_kib PID: resident set now / at its peak, KiB.
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# assert_serve_clean: no sanitizer report in serve's stderr.
assert_serve_clean() {
    assert_not_contains "$RX_TMP/serve.err" "Sanitizer"
    assert_not_contains "$RX_TMP/serve.err" "runtime error"
}

# assert_audit_whole: `rexec audit verify` passes (the chain is whole, every intent has its
# outcome).
assert_audit_whole() {
    assert_exit 0 rx audit verify
}

# assert_vm_clean ERE: no process matching ERE is left on the VM (bounded wait: the remote
# side's kill-after may still be running).
assert_vm_clean() {
    wait_until 20 bash -c '! "$1" --dir "$2" ps "$3" >/dev/null' _ "$RX_LAB" "$LAB_DIR" "$1"
}
