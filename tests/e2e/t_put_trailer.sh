#!/usr/bin/env bash
# A put's stream ends with a trailer (docs/remote-contract.md, "Files: put and get"): `rexec put`
# does not read the file before it sends it; it hashes the bytes as they go and sends their
# SHA-256 after exactly content_size of them. The VM renames the file into place only when the
# trailer is its own hash of what arrived (and content_sha256, when a caller gave one):
#  - put.sh itself: no trailer (the stream cut short), a trailer that is not the hash, a trailer
#    that is not content_sha256, more bytes than content_size: exit 4, the old file kept, no
#    temporary file; the right trailer: the file replaced;
#  - through rexec: a pipe (the trailer in a frame of its own), a pipe with fewer bytes than
#    content_size (4); a "trailer" that is not the hash (content_size short of the file, so that
#    the file's own last 65 bytes stand where the trailer goes): 4;
#  - a local file that grows or shrinks while it is sent: the call fails naming it, nothing
#    renamed;
#  - an approval-bound put (a grant): the hash is taken before (the challenge shows it, the
#    intent record has it), the trailer still goes; the file changed after the approval: 77 by
#    the gate; changed while it is sent: the call fails naming the approval, nothing renamed.
# The audit's outcome records the hash of what was sent; an intent without approval has none.
# shellcheck disable=SC2317 # predicates called by wait_until / poll_until
tid="put trailer: the hash taken while sending, checked on the VM before the rename"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
vm=$RX_TMP/vm
loc=$RX_TMP/local
mkdir -p "$vm" "$loc"
ws_edit 'c["hosts"]["lab1"]["allow"] = "L1"
c["hosts"]["lab1"]["approve"] = "L3"
c["limits"]["max_stdin_bytes"] = 256 * 1024 * 1024'
ws_add_action t.put "{\"risk\": \"L1\", \"state_changing\": false, \"put\": {\"path\": \"$vm/{name}\"},
  \"params\": {\"name\": {\"type\": \"path\"}}}"
ws_add_action t.held "{\"risk\": \"L2\", \"put\": {\"path\": \"$vm/{name}\"},
  \"params\": {\"name\": {\"type\": \"path\"}}}"
sha() { sha256sum <"$1" | cut -d' ' -f1; }
no_temp_left() { ! compgen -G "$vm/.rexec-put.*" >/dev/null; }
record() {  # record PHASE PYEXPR: PYEXPR over the newest audit record `r` of that phase
    "$RX_PYTHON" - "$WS/audit/audit.log" "$1" "$2" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in recs if x.get("phase") == sys.argv[2]][-1]
v = eval(sys.argv[3], {"r": r})
print(v if isinstance(v, str) else json.dumps(v))
PY
}

# ---- put.sh on its own ------------------------------------------------------------------------
head -c 100000 /dev/urandom >"$loc/a"
a_sha=$(sha "$loc/a")
# vm_put STDIN_FILE SHA256_PARAM SIZE: __rx_put of $vm/d from STDIN_FILE; its status
vm_put() {
    bash -c '. "$REXEC_SRC/remote/xfer.sh"; . "$REXEC_SRC/remote/put.sh"; __rx_put "$1" "$2" "$3" "" ""' \
        _ "$vm/d" "$2" "$3" <"$1" 2>"$RX_TMP/vm.err"
}
keep_old() {  # keep_old WHAT: the destination is still "old", nothing temporary left
    assert_eq old "$(cat "$vm/d")" "the destination after $1"
    no_temp_left || fail "a temporary file was left after $1: $(ls -la "$vm")"
}
printf 'old\n' >"$vm/d"
cp "$loc/a" "$RX_TMP/s.none"
assert_exit 4 vm_put "$RX_TMP/s.none" "" 100000
assert_contains "$RX_TMP/vm.err" "the stream ended before the file's SHA-256 trailer"
keep_old "a stream with no trailer"
{ cat "$loc/a"; printf '%s\n' "$(printf '0%.0s' {1..64})"; } >"$RX_TMP/s.wrong"
assert_exit 4 vm_put "$RX_TMP/s.wrong" "" 100000
assert_contains "$RX_TMP/vm.err" "the SHA-256 of what arrived is $a_sha, not the controller's 0000"
keep_old "a trailer that is not the hash"
{ cat "$loc/a"; printf '%s\n' "$a_sha"; } >"$RX_TMP/s.right"
assert_exit 4 vm_put "$RX_TMP/s.right" "$(printf 'f%.0s' {1..64})" 100000
assert_contains "$RX_TMP/vm.err" "not the controller's content_sha256 ffff"
keep_old "a trailer that is not content_sha256"
assert_exit 4 vm_put "$RX_TMP/s.right" "" 99999
assert_contains "$RX_TMP/vm.err" "is not the SHA-256 trailer (more bytes than content_size arrived?)"
keep_old "more bytes than content_size"
assert_exit 0 vm_put "$RX_TMP/s.right" "$a_sha" 100000
cmp "$loc/a" "$vm/d" || fail "put.sh with the right trailer and content_sha256 wrote something else"
printf 'old\n' >"$vm/d"
assert_exit 0 vm_put "$RX_TMP/s.right" "" 100000
cmp "$loc/a" "$vm/d" || fail "put.sh with the right trailer wrote something else"

# ---- through rexec ----------------------------------------------------------------------------
printf 'old\n' >"$vm/d"
assert_exit 0 rx put lab1 t.put "$loc/a" --param name=d
cmp "$loc/a" "$vm/d" || fail "rexec put wrote something else"
assert_contains "$ERR" "put $loc/a: 100000 bytes, sha256 $a_sha"
assert_eq "$a_sha" "$(record outcome 'r["transfer"]["sha256"]')" "outcome record: the hash sent"
assert_eq null "$(record intent 'r["transfer"]["sha256"]')" "intent record: no hash yet"
assert_eq 100000 "$(record intent 'r["transfer"]["bytes"]')" "intent record: the size"
# the file's last 65 bytes are a well-formed trailer of the wrong hash, and content_size stops
# the file before them: the VM reads them as the trailer
printf 'old\n' >"$vm/d"
{ head -c 1000 /dev/urandom; printf '%s\n' "$(printf '0%.0s' {1..64})"; } >"$loc/fake"
assert_exit 4 rx run lab1 t.put --stdin "$loc/fake" --param name=d --param content_size=1000
assert_contains "$ERR" "not the controller's 0000"
keep_old "a put whose trailer was not the hash"

# an empty file: nothing but the trailer (the hash of nothing)
: >"$loc/empty"
assert_exit 0 rx put lab1 t.put "$loc/empty" --param name=d
assert_eq 0 "$(stat -c %s "$vm/d")" "the size of an empty file put"
assert_contains "$ERR" "0 bytes, sha256 $(sha "$loc/empty")"
# a pipe into a put action: the trailer goes in a frame of its own after the pipe's end
printf 'old\n' >"$vm/d"
assert_exit 0 rx run lab1 t.put --stdin - --param name=d --param content_size=100000 < <(cat "$loc/a")
cmp "$loc/a" "$vm/d" || fail "a piped put wrote something else"
assert_eq "$a_sha" "$(record outcome 'r["transfer"]["sha256"]')" "outcome record of a piped put"
printf 'old\n' >"$vm/d"
assert_exit 4 rx run lab1 t.put --stdin - --param name=d --param content_size=100000 < <(head -c 99000 "$loc/a")
keep_old "a piped put with fewer bytes than content_size"

# ---- the local file grows while it is sent ----------------------------------------------------
# sparse (reading it costs nothing) and far larger than what the pipes and the channel's window
# hold; rexec is stopped as soon as it has read some of it (its descriptor's offset), the file
# grows, and rexec goes on.
truncate -s 128M "$loc/big"
# sending PID: the offset of PID's descriptor of $loc/big is past 0 (it reads, no pread)
sending() {
    local fd pos
    for fd in /proc/"$1"/fd/*; do
        [[ $(readlink "$fd" 2>/dev/null) == "$loc/big" ]] || continue
        pos=$(awk '/^pos:/ {print $2}' "/proc/$1/fdinfo/${fd##*/}" 2>/dev/null)
        [[ -n $pos && $pos -gt 0 ]] && return 0
    done
    return 1
}
# grow_while_sent ACTION [ARGS...]: the put of $loc/big, stopped while it sends, the file changed
# by $change (grown unless set);
# its status in grow_rc. A machine that sends it all before the stop: a skip, never a false failure.
grow_while_sent() {
    local rpid
    grow_rc=0
    truncate -s 128M "$loc/big"
    "$REXEC_BIN" --workspace "$WS" put lab1 "$@" "$loc/big" --param name=d >"$RX_TMP/g.out" 2>"$RX_TMP/g.err" &
    rpid=$!
    sending_or_done() { sending "$rpid" || ! kill -0 "$rpid" 2>/dev/null; }
    wait_until 300 sending_or_done
    kill -STOP "$rpid" 2>/dev/null || true
    if ! kill -0 "$rpid" 2>/dev/null || ! sending "$rpid"; then
        kill -CONT "$rpid" 2>/dev/null || true
        wait "$rpid" || true
        skip "the put of 128 MiB ended before it could be stopped"
    fi
    if [[ -n ${change:-} ]]; then "$change"; else printf 'more' >>"$loc/big"; fi
    kill -CONT "$rpid"
    wait "$rpid" || grow_rc=$?
}
printf 'old\n' >"$vm/d"
grow_while_sent t.put
assert_eq 65 "$grow_rc" "status of a put whose file grew while it was sent"
assert_contains "$RX_TMP/g.err" "$loc/big changed while it was sent"
keep_old "a put whose file grew while it was sent"
shrink_big() { truncate -s 64M "$loc/big"; }
change=shrink_big grow_while_sent t.put
assert_eq 65 "$grow_rc" "status of a put whose file shrank while it was sent"
assert_contains "$RX_TMP/g.err" "$loc/big: the file shrank while it was sent"
keep_old "a put whose file shrank while it was sent"

# ---- an approval binds the hash ---------------------------------------------------------------
printf 'old\n' >"$vm/d"
assert_exit 75 rx put lab1 t.held "$loc/a" --param name=d --json
CID=$(json challenge_id)
assert_eq "$a_sha" "$("$RX_PYTHON" -c 'import json,sys
print(json.load(open(sys.argv[1]))["stdin"]["sha256"])' "$WS/approvals/$CID.json")" "the challenge's sha256"
assert_exit 0 tty_answer "$REXEC_BIN" --workspace "$WS" approve "$CID"
cp "$loc/a" "$loc/a.orig"
printf 'xyz' | dd of="$loc/a" bs=1 seek=10 conv=notrunc status=none  # same size
assert_exit 77 rx put lab1 t.held "$loc/a" --param name=d --grant "$CID"
assert_contains "$ERR" "the stdin differs"
keep_old "a grant-bound put of a file changed after the approval"
cp "$loc/a.orig" "$loc/a"
assert_exit 0 rx put lab1 t.held "$loc/a" --param name=d --grant "$CID"
cmp "$loc/a" "$vm/d" || fail "the grant-bound put wrote something else"
assert_eq "$a_sha" "$(record intent 'r["transfer"]["sha256"]')" "intent record of a grant-bound put: the approved hash"
assert_eq "$a_sha" "$(record outcome 'r["transfer"]["sha256"]')" "outcome record of a grant-bound put"
# changed while it is sent, after the gate hashed it
printf 'old\n' >"$vm/d"
truncate -s 128M "$loc/big"
assert_exit 75 rx put lab1 t.held "$loc/big" --param name=d --json
CID=$(json challenge_id)
assert_exit 0 tty_answer "$REXEC_BIN" --workspace "$WS" approve "$CID"
grow_while_sent t.held --grant "$CID"
assert_eq 65 "$grow_rc" "status of a grant-bound put whose file grew while it was sent"
assert_contains "$RX_TMP/g.err" "$loc/big changed since it was approved"
keep_old "a grant-bound put whose file grew while it was sent"
pass
