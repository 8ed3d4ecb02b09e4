#!/usr/bin/env bash
# `cmake --install` into a temporary prefix puts every file in place; librexec.so has its SONAME
# and exports only rexec_* (every function rexec.h declares among them); rexec/version.h agrees
# with `rexec --version`; and docs/examples/embed.c, built against the INSTALLED copy (through
# pkg-config, through find_package(rexec), and statically), runs an action on the lab.
# CTest sets REXEC_BUILD_DIR, REXEC_LIBDIR and REXEC_SAN_FLAGS (the test build's sanitizers).
tid="install: prefix, exports, pkg-config, find_package"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

build=${REXEC_BUILD_DIR:?REXEC_BUILD_DIR is not set}
libdir=${REXEC_LIBDIR:-lib}
read -ra san <<<"${REXEC_SAN_FLAGS:-}"
prefix=$RX_TMP/prefix
cc=${CC:-cc}

assert_exit 0 cmake --install "$build" --prefix "$prefix"

# --- the files
for f in bin/rexec libexec/rexec/rexec-full include/rexec.h include/rexec/version.h \
         "$libdir/librexec.so" "$libdir/librexec.so.0" "$libdir/librexec.a" \
         "$libdir/pkgconfig/rexec.pc" "$libdir/cmake/rexec/rexecConfig.cmake" \
         "$libdir/cmake/rexec/rexecConfigVersion.cmake" "$libdir/cmake/rexec/rexecTargets.cmake" \
         share/man/man1/rexec.1.gz share/man/man5/rexec.json.5.gz \
         share/bash-completion/completions/rexec \
         share/doc/rexec/README.md share/doc/rexec/LICENSE share/doc/rexec/CHANGELOG.md \
         share/doc/rexec/docs/cli.md share/doc/rexec/docs/ci.md share/doc/rexec/docs/examples/embed.c; do
    [[ -e $prefix/$f ]] || fail "cmake --install did not install $f"
done
[[ -L $prefix/$libdir/librexec.so && -L $prefix/$libdir/librexec.so.0 ]] \
    || fail "librexec.so and librexec.so.0 should be symlinks to the versioned file"
so=$prefix/$libdir/librexec.so
readelf -d "$so" >"$OUT"
assert_contains "$OUT" "Library soname: [librexec.so.0]"
# The pc file names the prefix it was installed into, not the configure-time one.
assert_contains "$prefix/$libdir/pkgconfig/rexec.pc" "prefix=$prefix"

# --- exports: rexec_* only, and all of rexec.h's functions
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | sort >"$RX_TMP/exports"
grep -v '^rexec_' "$RX_TMP/exports" >"$RX_TMP/extra" || true
[[ ! -s $RX_TMP/extra ]] || fail "librexec.so exports non-rexec_ symbols: $(head -5 "$RX_TMP/extra" | xargs)"
# every function prototype of rexec.h (a line starting with its return type)
grep -oE '^(REXEC_API )?[a-z][a-z_ ]*[ *]rexec_[a-z0-9_]+\(' "$prefix/include/rexec.h" |
    grep -oE 'rexec_[a-z0-9_]+\($' | tr -d '(' | sort -u >"$RX_TMP/declared"
[[ $(wc -l <"$RX_TMP/declared") -ge 15 ]] || fail "found only $(wc -l <"$RX_TMP/declared") functions in rexec.h"
missing=$(comm -23 "$RX_TMP/declared" "$RX_TMP/exports" | xargs)
[[ -z $missing ]] || fail "declared in rexec.h but not exported by librexec.so: $missing"

# --- version.h against the binary
"$prefix/bin/rexec" --version >"$RX_TMP/version"
ver=$(sed -n '1s/^rexec //p' "$RX_TMP/version")
cat >"$RX_TMP/v.c" <<'C'
#include <stdio.h>
#include <rexec/version.h>
int main(void)
{
    printf("%d.%d.%d %s %06x\n", REXEC_VERSION_MAJOR, REXEC_VERSION_MINOR, REXEC_VERSION_PATCH,
           REXEC_VERSION_STRING, REXEC_VERSION_HEX);
    return 0;
}
C
"$cc" -I"$prefix/include" "$RX_TMP/v.c" -o "$RX_TMP/v" || fail "cannot compile against rexec/version.h"
IFS=. read -r ma mi pa <<<"$ver"
assert_eq "$ver $ver $(printf '%02x%02x%02x' "$ma" "$mi" "$pa")" "$("$RX_TMP/v")" "version.h vs rexec --version"
for lib in libssh2 libuv OpenSSL cJSON; do
    grep -qE "^$lib [0-9]" "$RX_TMP/version" || fail "rexec --version does not name $lib's version: $(cat "$RX_TMP/version")"
done

# --- the embedding example from docs/, against the installed copy only (a copy of the source
# outside the tree, so no header of the source tree can be picked up)
mkdir -p "$RX_TMP/ex"
cp "$REXEC_SRC/docs/examples/embed.c" "$REXEC_SRC/docs/examples/CMakeLists.txt" "$RX_TMP/ex/"
lab_start 1

# uses_installed BINARY: it loads librexec.so.0 from the prefix
uses_installed() {
    LD_LIBRARY_PATH=$prefix/$libdir ldd "$1" >"$RX_TMP/ldd"
    grep -q "librexec.so.0 => $prefix/$libdir/librexec.so.0" "$RX_TMP/ldd" \
        || fail "$1 does not load the installed librexec.so.0: $(cat "$RX_TMP/ldd")"
}
# runs_on_lab BINARY: sys.echo through the library prints the text, exits 0, reports JSON
runs_on_lab() {
    LD_LIBRARY_PATH=$prefix/$libdir assert_exit 0 "$1" "$WS" lab1 sys.echo text "hello from $2"
    assert_eq "hello from $2" "$(cat "$OUT")" "stdout of the example ($2)"
    assert_contains "$ERR" '"exit_code":0'
    assert_contains "$ERR" '"action":"sys.echo"'
}

# 1. pkg-config
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
[[ $(pkg-config --modversion rexec) == "$ver" ]] || fail "pkg-config --modversion rexec: $(pkg-config --modversion rexec 2>&1)"
# shellcheck disable=SC2046 # pkg-config's words
"$cc" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror ${san[@]+"${san[@]}"} "$RX_TMP/ex/embed.c" \
    $(pkg-config --cflags --libs rexec) -o "$RX_TMP/embed-pc" || fail "embed.c does not build with pkg-config"
uses_installed "$RX_TMP/embed-pc"
runs_on_lab "$RX_TMP/embed-pc" pkg-config

# 2. find_package(rexec), rexec::rexec
cmake -S "$RX_TMP/ex" -B "$RX_TMP/ex/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="${REXEC_SAN_FLAGS:-}" -DCMAKE_EXE_LINKER_FLAGS="${REXEC_SAN_FLAGS:-}" \
    >"$RX_TMP/cmake.out" 2>&1 || { _rx_show cmake "$RX_TMP/cmake.out"; fail "find_package(rexec) failed"; }
cmake --build "$RX_TMP/ex/build" >"$RX_TMP/cmake.out" 2>&1 \
    || { _rx_show "cmake --build" "$RX_TMP/cmake.out"; fail "embed.c does not build with find_package"; }
uses_installed "$RX_TMP/ex/build/embed"
runs_on_lab "$RX_TMP/ex/build/embed" find_package

# 3. the static library (no librexec.so needed at run time)
# shellcheck disable=SC2046
"$cc" -std=c11 -D_GNU_SOURCE ${san[@]+"${san[@]}"} "$RX_TMP/ex/embed.c" -I"$prefix/include" \
    "$prefix/$libdir/librexec.a" $(pkg-config --libs libuv libssh2 libcjson libcrypto) -lm \
    -o "$RX_TMP/embed-static" || fail "embed.c does not link with librexec.a"
if ldd "$RX_TMP/embed-static" | grep -q librexec; then fail "embed-static loads librexec.so"; fi
runs_on_lab "$RX_TMP/embed-static" librexec.a

pass
