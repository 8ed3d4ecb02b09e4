#!/usr/bin/env bash
# CPack makes a .deb of this build: `dpkg-deb -I` shows its control fields, the dependencies are
# Debian package names found by dpkg-shlibdeps (libssh2-1, libuv1, libcjson1, libssl3, libc6),
# and `dpkg-deb -c` lists the files `cmake --install` puts in place, under /usr.
tid="deb: cpack, dpkg-deb -I and -c"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null \
    || skip "dpkg-deb or dpkg-shlibdeps (dpkg-dev) is not installed"
build=${REXEC_BUILD_DIR:?REXEC_BUILD_DIR is not set}

assert_exit 0 cpack -G DEB --config "$build/CPackConfig.cmake" -B "$RX_TMP/pkg"
debs=("$RX_TMP"/pkg/rexec_*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "expected one rexec_*.deb, got: $(ls "$RX_TMP/pkg")"
deb=${debs[0]}

# --- control fields
dpkg-deb -I "$deb" >"$OUT" || fail "dpkg-deb -I refused $deb"
assert_contains "$OUT" " Package: rexec"
assert_contains "$OUT" " Version: $("$REXEC_BIN" --version | sed -n '1s/^rexec //p')"
assert_contains "$OUT" " Architecture: $(dpkg --print-architecture)"
assert_contains "$OUT" " Maintainer: "
assert_contains "$OUT" " Description: run operator-approved actions on tool VMs over SSH"
dpkg-deb -f "$deb" Depends >"$RX_TMP/depends"
for p in libssh2-1 libuv1 libcjson1 libssl3 libc6; do
    grep -qE "(^|, )$p( |,|$)" "$RX_TMP/depends" || fail "Depends lacks $p: $(cat "$RX_TMP/depends")"
done
# every dependency is a Debian package name with an optional version: "name (>= 1.2)"
tr ',' '\n' <"$RX_TMP/depends" | sed 's/^ *//' | while read -r dep; do
    [[ $dep =~ ^[a-z0-9][a-z0-9+.-]+(\ \([<>=]+\ [^\)]+\))?$ ]] || fail "Depends has a non-package entry: '$dep'"
done
# a shared library package: a shlibs file, and ldconfig runs on install and removal
dpkg-deb --ctrl-tarfile "$deb" | tar -t >"$RX_TMP/ctrl"
assert_contains "$RX_TMP/ctrl" "./shlibs"
dpkg-deb -e "$deb" "$RX_TMP/control"
assert_contains "$RX_TMP/control/shlibs" "librexec 0 rexec"
grep -qs ldconfig "$RX_TMP/control/postinst" "$RX_TMP/control/triggers" \
    || fail "the .deb neither runs nor triggers ldconfig"

# --- files
dpkg-deb -c "$deb" | awk '{ print $6 }' >"$RX_TMP/files"
for f in ./usr/bin/rexec ./usr/libexec/rexec/rexec-full ./usr/include/rexec.h ./usr/include/rexec/version.h \
         ./usr/share/man/man1/rexec.1.gz ./usr/share/man/man5/rexec.json.5.gz \
         ./usr/share/bash-completion/completions/rexec ./usr/share/doc/rexec/LICENSE \
         ./usr/share/doc/rexec/CHANGELOG.md ./usr/share/doc/rexec/docs/ci.md \
         ./usr/lib/python3/dist-packages/rexec_client/__init__.py; do
    grep -qxF -- "$f" "$RX_TMP/files" || fail "the .deb lacks $f"
done
for re in '^\./usr/lib/(.*/)?librexec\.so\.0\.[0-9]+\.[0-9]+$' '^\./usr/lib/(.*/)?librexec\.a$' \
          '^\./usr/lib/(.*/)?pkgconfig/rexec\.pc$' '^\./usr/lib/(.*/)?cmake/rexec/rexecConfig\.cmake$'; do
    grep -qE -- "$re" "$RX_TMP/files" || fail "the .deb has no file matching $re"
done
if grep -vE '^\./(usr/.*|usr/?|)$' "$RX_TMP/files" | grep -q .; then
    fail "the .deb installs outside /usr: $(grep -vE '^\./(usr/.*|usr/?|)$' "$RX_TMP/files" | head -3 | xargs)"
fi
# the pc file in the package names /usr
dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards '*/pkgconfig/rexec.pc' >"$RX_TMP/rexec.pc"
assert_contains "$RX_TMP/rexec.pc" "prefix=/usr"
pass
