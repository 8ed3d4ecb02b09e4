#!/usr/bin/env bash
# The VM side's bulk copiers, without rexec or sshd (bash runs the fragments as the wrapper
# would, fed through a pipe as sshd feeds it):
#  - remote/copier.sh's perl copier, with splice(2) and with read/write, and the dd loop of
#    remote/wrapper.sh it falls back to: frames (bytes that look like headers, NULs, a
#    1.5 MiB frame past the copier's 1 MiB pieces) and N bytes arrive byte for byte, and
#    nothing past the end frame (or byte N) is taken from the channel; frames cut short (in
#    the bytes or in a header) and a header that is not one give 2 (a cancel), a reader gone
#    gives neither 0 nor 2; a perl that cannot run the copier is not picked;
#  - remote/put.sh's writer (tee(2) + splice(2) into the file, else read/write, else
#    coreutils' tee): the file and the bytes handed to the hash are both the input.
tid="bulk copiers: the perl frame copier, its dd fallback, put's writer"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

T=$RX_TMP/t
mkdir -m 700 "$T" "$T/noperl" "$T/notee"
printf '#!/bin/sh\necho "no perl here" >&2\nexit 1\n' >"$T/noperl/perl"
printf '#!/bin/sh\necho "no tee here" >&2\nexit 1\n' >"$T/notee/tee"
chmod +x "$T/noperl/perl" "$T/notee/tee"
command -v perl >/dev/null || skip "no perl on this machine (the dd loop is tested by unit/test_render)"

# copy MODE FRAMED LEN OUT INPUT: __rx_copy of INPUT (through a pipe) into OUT (pipe: through
# a pipe into $T/out, file: into $T/out); what it left of INPUT into $T/rest; prints the status.
# MODE: splice, rw (perl without splice) or dd (the dd loop).
copy() {
    local rc=0
    bash -c '
        . "$REXEC_SRC/remote/wrapper.sh"; . "$REXEC_SRC/remote/copier.sh"
        case $1 in dd) __rx_pl=0 __rx_pl_frame= ;; rw) __rx_splice=0 ;; esac
        [ "$1" = dd ] || [ "${__rx_pl:-0}" = 1 ] || { echo "perl copier not picked" >&2; exit 99; }
        __rx_stdin_framed=$2 __rx_stdin_len=$3
        exec 7<&0 </dev/null
        if [ "$4" = pipe ]; then
            __rx_copy | cat >"$5/out"; rc=${PIPESTATUS[0]}
        else
            __rx_copy >"$5/out"; rc=$?
        fi
        cat <&7 >"$5/rest"
        exit "$rc"' _ "$1" "$2" "$3" "$4" "$T" < <(cat "$5") || rc=$?
    echo "$rc"
}

# inputs: frames with header-like bytes and NULs, then the end frame and a trailer
printf '6\n0\n5\nab3\n\0\0\n0\nTRAILER' >"$T/frames"
printf '0\n5\nab\0\0\n' >"$T/frames.want"
head -c $((3 * 1536 * 1024)) /dev/urandom >"$T/big.want"
{ for i in 0 1 2; do
      printf '%d\n' $((1536 * 1024))
      dd if="$T/big.want" bs=$((1536 * 1024)) skip="$i" count=1 status=none
  done; printf '0\nTRAILER'; } >"$T/big"

for mode in splice rw dd; do
    for out in pipe file; do
        w="$mode, into a $out"
        assert_eq 0 "$(copy "$mode" 1 0 "$out" "$T/frames")" "frames ($w)"
        cmp -s "$T/out" "$T/frames.want" || fail "frames ($w): the bytes differ: $(od -c "$T/out" | head -3)"
        assert_eq TRAILER "$(cat "$T/rest")" "what frames left on the channel ($w)"
        assert_eq 0 "$(copy "$mode" 1 0 "$out" "$T/big")" "4.5 MiB of frames ($w)"
        cmp -s "$T/out" "$T/big.want" || fail "4.5 MiB of frames ($w): the bytes differ"
        assert_eq TRAILER "$(cat "$T/rest")" "what 4.5 MiB of frames left on the channel ($w)"
        printf 'hello world' >"$T/n"
        assert_eq 0 "$(copy "$mode" 0 5 "$out" "$T/n")" "N bytes ($w)"
        assert_eq hello "$(cat "$T/out")" "N bytes ($w)"
        assert_eq " world" "$(cat "$T/rest")" "what N bytes left on the channel ($w)"
        printf '5\nab' >"$T/in"
        assert_eq 2 "$(copy "$mode" 1 0 "$out" "$T/in")" "frame bytes cut short ($w)"
        printf '2\nab12' >"$T/in"
        assert_eq 2 "$(copy "$mode" 1 0 "$out" "$T/in")" "a header cut short ($w)"
        printf '007\nabcdefg0\n' >"$T/in"
        assert_eq 2 "$(copy "$mode" 1 0 "$out" "$T/in")" "a header that is not one ($w)"
        # N bytes cut short: the perl copier says so (2); dd stops at EOF with 0, and the
        # wrapper then finds the channel at EOF (a cancel either way)
        printf 'hell' >"$T/in"
        [[ $mode == dd ]] && n_short=0 || n_short=2
        assert_eq "$n_short" "$(copy "$mode" 0 5 "$out" "$T/in")" "N bytes cut short ($w)"
    done
    # the reader goes after 10 bytes: the copier fails, and says neither "whole" nor "cancel"
    rc=$(bash -c '
        . "$REXEC_SRC/remote/wrapper.sh"; . "$REXEC_SRC/remote/copier.sh"
        case $1 in dd) __rx_pl=0 __rx_pl_frame= ;; rw) __rx_splice=0 ;; esac
        __rx_stdin_framed=1 __rx_stdin_len=0
        exec 7<&0 </dev/null
        __rx_copy | head -c 10 >/dev/null; echo "${PIPESTATUS[0]}"' _ "$mode" <"$T/big")
    [[ $rc != 0 && $rc != 2 ]] || fail "a reader gone ($mode): status $rc"
done

# a perl that cannot run the copier is not picked (the dd loop is used)
got=$(PATH=$T/noperl:$PATH bash -c '. "$REXEC_SRC/remote/wrapper.sh"; . "$REXEC_SRC/remote/copier.sh"; echo "pl=${__rx_pl:-0}"' </dev/null)
assert_eq pl=0 "$got" "a failing perl"

# ---- put's writer -------------------------------------------------------------------------------
# put_write PATH_PREFIX STDIN_KIND: __rx_put_write of big.want's size into $T/put.tmp (an empty
# file, as mktemp leaves it) from big.want followed by a trailer, its stdout hashed; prints that
# hash and what was left of stdin after the writer (the trailer: the writer stops at the size).
# STDIN_KIND pipe or file.
printf 'the-trailer\n' >"$T/trailer"
cat "$T/big.want" "$T/trailer" >"$T/big.put"
put_write() {
    : >"$T/put.tmp"
    local cmd='. "$REXEC_SRC/remote/xfer.sh"; . "$REXEC_SRC/remote/put.sh"; __rx_put_tmp=$1
               h=$(__rx_put_write "$2" | sha256sum | cut -d" " -f1); echo "$h $(cat)"'
    local size
    size=$(stat -c %s "$T/big.want")
    if [[ $2 == pipe ]]; then
        cat "$T/big.put" | PATH=$1:$PATH bash -c "$cmd" _ "$T/put.tmp" "$size"
    else
        PATH=$1:$PATH bash -c "$cmd" _ "$T/put.tmp" "$size" <"$T/big.put"
    fi
}
want=$(sha256sum <"$T/big.want" | cut -d' ' -f1)
for v in "$T/notee pipe" "$T/notee file" "$T/noperl pipe"; do
    read -r prefix kind <<<"$v"
    assert_eq "$want the-trailer" "$(put_write "$prefix" "$kind")" \
        "put's writer, the hashed bytes and what it left of stdin ($v)"
    cmp -s "$T/put.tmp" "$T/big.want" || fail "put's writer ($v): the file differs"
done
pass
