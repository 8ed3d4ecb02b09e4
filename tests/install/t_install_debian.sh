#!/usr/bin/env bash
# README's install path on Debian: `cmake --install` to /usr/local (staged here with DESTDIR,
# so the machine is not touched) puts each piece where Debian's own tools look for it without
# any setting: python3 imports rexec_client (Debian's python3 searches
# /usr/local/lib/python3.X/dist-packages, not lib/python3/dist-packages, under /usr/local), man
# finds rexec(1) under /usr/local/share/man, bash-completion loads completions/rexec from
# /usr/local/share, and the dynamic linker searches /usr/local/lib. An install into the running
# system as root runs ldconfig (a fake one on PATH records it); a staged one does not. And
# docs/python-client.md's command for Debian 12 (a venv; plain `pip install` is refused there,
# PEP 668) installs the client. README's steps are the ones checked here: no sudo for root,
# `cmake --install build-release` right after scripts/demo (which must build every installed
# target, not the binary alone: the install once failed on a missing librexec.so.0.1.0).
tid="install: Debian's python3, man, bash-completion and ld.so find the /usr/local install"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
build=${REXEC_BUILD_DIR:?REXEC_BUILD_DIR is not set}
[[ -f /etc/debian_version && -x /usr/bin/python3 ]] || skip "not a Debian system with /usr/bin/python3"

# README's install block and scripts/demo's build
readme=$(sed -n '/^<!-- install section/,/^<!-- end install section/p' "$REXEC_SRC/README.md")
grep -q '^cmake --install build-release' <<<"$readme" || fail "README's install block does not run 'cmake --install build-release' (as root, no sudo)"
grep -q "python3 -c 'import rexec_client'" <<<"$readme" || fail "README's install block does not check the Python client"
if grep -E '^[^#]*cmake --build .*--target' "$REXEC_SRC/scripts/demo"; then
    fail "scripts/demo builds only some targets: cmake --install build-release would then fail"
fi

stage=$RX_TMP/stage
mkdir "$RX_TMP/fakebin"
printf '#!/bin/sh\necho "$@" >>"%s"\n' "$RX_TMP/ldconfig.calls" >"$RX_TMP/fakebin/ldconfig"
chmod +x "$RX_TMP/fakebin/ldconfig"
DESTDIR=$stage PATH=$RX_TMP/fakebin:$PATH assert_exit 0 cmake --install "$build" --prefix /usr/local
[[ ! -e $RX_TMP/ldconfig.calls ]] || fail "a staged install (DESTDIR) ran ldconfig"
local_=$stage/usr/local

# python3: Debian's own search path for the prefix /usr, applied to the stage
/usr/bin/python3 -S - "$stage/usr" >"$OUT" 2>"$ERR" <<'PY' || fail "python3 does not import rexec_client from the /usr/local install: $(cat "$ERR")"
import site, sys
sys.path[:0] = site.getsitepackages([sys.argv[1]])
import rexec_client
from rexec_client import Client, AsyncClient
print(rexec_client.__file__)
PY
assert_contains "$OUT" "$local_/lib/python3"

# man: /usr/local/share/man is on man's path, and the page is there
manpath 2>/dev/null | tr : '\n' | grep -qx /usr/local/share/man || fail "man does not search /usr/local/share/man: $(manpath 2>&1)"
[[ -f $local_/share/man/man1/rexec.1.gz ]] || fail "no rexec.1.gz under share/man/man1"
MANWIDTH=80 man -l "$local_/share/man/man1/rexec.1.gz" >"$OUT" 2>/dev/null
grep -q "rexec run" "$OUT" || fail "the installed rexec(1) does not render"

# bash-completion loads rexec's completion from /usr/local/share (XDG_DATA_DIRS's default)
if [[ -f /usr/share/bash-completion/bash_completion ]]; then
    XDG_DATA_DIRS=$local_/share:/usr/share bash -c '. /usr/share/bash-completion/bash_completion
        _completion_loader rexec; complete -p rexec' >"$OUT" 2>&1 || true
    assert_contains "$OUT" "-F _rexec rexec"
else
    echo "note: bash-completion is not installed; its loading is not checked" >&2
fi

# ld.so: /usr/local/lib is configured, and the library is there
[[ -e $local_/lib/librexec.so.0 ]] || fail "no lib/librexec.so.0 under /usr/local"
# (grep reads the files itself: `cat | grep -q` fails now and then under pipefail, when grep has
# quit before cat wrote everything and cat dies of SIGPIPE)
grep -qxs /usr/local/lib /etc/ld.so.conf /etc/ld.so.conf.d/*.conf \
    || fail "/usr/local/lib is not in ld.so's configuration"

# an install into the running system (here a scratch prefix) as root runs ldconfig
if [[ $(id -u) == 0 ]]; then
    PATH=$RX_TMP/fakebin:$PATH assert_exit 0 cmake --install "$build" --prefix "$RX_TMP/prefix"
    [[ -s $RX_TMP/ldconfig.calls ]] || fail "cmake --install as root did not run ldconfig"
fi

# docs/python-client.md's Debian 12 command, on a copy of python/ (pip builds in the tree)
cmd=$(grep -m1 -E '^python3 -m venv' "$REXEC_SRC/docs/python-client.md") || fail "docs/python-client.md has no 'python3 -m venv' command"
if /usr/bin/python3 -c 'import ensurepip, setuptools' 2>/dev/null; then
    cp -r "$REXEC_SRC/python" "$RX_TMP/python"
    (cd "$RX_TMP" && PATH=/usr/bin:$PATH bash -euc "${cmd%%#*}") >"$OUT" 2>&1 \
        || { _rx_show "$cmd" "$OUT"; fail "docs/python-client.md's venv command failed"; }
    "$RX_TMP/.venv/bin/python" -c 'import rexec_client' || fail "the venv does not import rexec_client"
else
    echo "note: python3-venv or python3-setuptools is missing; the venv command is not run" >&2
fi
pass
