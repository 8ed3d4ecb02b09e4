#!/usr/bin/env bash
# REXEC_STATIC_DEPS (cmake/static_deps.cmake): rexec with libssh2, libcrypto, libuv and zlib
# linked in from their archives. The test build links that program too (rexec_static_deps, the
# same objects); it needs none of those shared libraries, reports the same dependency versions
# as the usual rexec, runs a call directly over SSH (key exchange, auth and exec through the
# static libcrypto and libssh2), and as the client of a `rexec serve` of the usual rexec.
# Skipped (77) when the archives are not installed (the target is then not defined).
tid="install: REXEC_STATIC_DEPS links the dependencies in"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

build=${REXEC_BUILD_DIR:?REXEC_BUILD_DIR is not set}
SX=$build/rexec_static_deps
if [[ ! -x $SX ]]; then
    echo "SKIP $tid: no $SX (static archives of libssh2, libcrypto, libuv or zlib not found)"
    exit 77
fi

# The test build's LeakSanitizer counts OpenSSL's process-wide state (its providers), which
# libcrypto.so frees from its destructor and the archive's copy leaves to the exit: the usual
# rexec of the same objects is leak-checked by every other test.
sx() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$SX" "$@"; }

readelf -d "$SX" >"$OUT"
assert_contains "$OUT" "Shared library: [libc.so"
for lib in libssh2 libcrypto libssl libuv libz; do
    grep -q "Shared library: \[${lib}[.]" "$OUT" && fail "$SX still needs $lib: $(grep NEEDED "$OUT")"
done
assert_exit 0 sx --version
"$REXEC_BIN" --version >"$RX_TMP/dynamic.version" || fail "rexec --version failed"
assert_eq "$(cat "$RX_TMP/dynamic.version")" "$(cat "$OUT")" "--version of the two links"

lab_start 1
assert_exit 0 sx --workspace "$WS" run lab1 sys.echo -p text=static-direct
assert_contains "$OUT" static-direct

SOCK=$RX_TMP/s.sock
"$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK" 2>"$RX_TMP/serve.err" &
SERVE=$!
trap '_t_rc=$?; stop_gently $SERVE; (exit $_t_rc); _rx_cleanup' EXIT  # the failure's status to _rx_cleanup
wait_until 20 test -S "$SOCK"
assert_exit 0 sx --socket "$SOCK" run lab1 sys.echo -p text=static-client
assert_contains "$OUT" static-client
assert_exit 0 sx --socket "$SOCK" run lab1 sys.echo -p text=static-json --json
assert_eq "static-json" "$(json stdout | tr -d '\n')" "stdout through serve"
pass
