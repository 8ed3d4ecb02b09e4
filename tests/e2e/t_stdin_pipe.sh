#!/usr/bin/env bash
# `--stdin -` fed by a pipe (docs/cli.md, "--stdin"; docs/remote-contract.md, "Stdin of unknown
# length"): sent as it is read, in frames, in flat memory. 64 MiB through `cat | rexec run` into
# sha256sum on the VM, staged and "stdin": "piped", byte-exact and under an RSS cap (reading it
# whole took 4x the input); frame-like bytes, one byte, an empty pipe; `-` from a file; a pipe
# that closes early (its end); a FIFO that stalls (--stdin-timeout: 65, nothing ran); more than
# max_stdin_bytes (65, nothing ran); a fan-out (spooled once, each host gets all); an approval
# binding a piped stdin's sha256 (spooled, hashed, the grant runs that content only), a stalled
# pipe there and SIGINT while it is spooled (130 at once). A pipe never reaches a runner: only
# `rexec run` has one, and its first call to a host takes a channel of its own (a fan-out
# spools), so every case here is on a channel.
tid="stdin: a pipe streams in flat memory"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
ws_edit 'c["hosts"]["lab1"]["allow"] = "L0"; c["hosts"]["lab2"]["allow"] = "L0"
c["limits"]["max_stdin_bytes"] = 512 * 1024 * 1024'
ws_add_action t.sha '{"risk": "L0", "command": "sha256sum | cut -d\" \" -f1"}'
ws_add_action t.psha '{"risk": "L0", "stdin": "piped", "command": "sha256sum | cut -d\" \" -f1"}'
d=$RX_TMP/in
mkdir -p "$d"
n=$((${STDIN_MB:-64} * 1024 * 1024))
head -c "$n" /dev/urandom >"$d/big"
want=$(sha256sum <"$d/big" | cut -d' ' -f1)

# peak ACTION: `cat big | rexec run lab1 ACTION --stdin -`, the controller's peak RSS in KiB in
# $PEAK. ASan's quarantine (freed blocks it keeps, up to 256 MiB) is not rexec's memory: 4 MiB.
peak() {
    cat "$d/big" | ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4 \
        /usr/bin/time -f %M -o "$RX_TMP/rss" "$REXEC_BIN" --workspace "$WS" run lab1 "$1" \
        --stdin - >"$OUT" 2>"$ERR"
    local rc=$?
    PEAK=$(tail -n1 "$RX_TMP/rss")
    return $rc
}
CAP=$((48 * 1024)) # KiB: reading the pipe whole took 4x the input (256 MiB here)
for a in t.sha t.psha; do
    peak "$a" || fail "$a: exit $?: $(cat "$ERR")"
    assert_eq "$want" "$(cat "$OUT")" "$a: sha256 of 64 MiB piped"
    ((PEAK < CAP)) || fail "$a: peak RSS $PEAK KiB for 64 MiB of piped stdin (cap $CAP KiB)"
done

# The frames carry any bytes, and the ends: an empty pipe, one byte, bytes that look like frames.
printf '0\n5\nabc\n' >"$d/framey"
head -c 1 /dev/urandom >"$d/one"
: >"$d/empty"
for f in framey one empty; do
    assert_exit 0 rx run lab1 t.sha --stdin - < <(cat "$d/$f")
    assert_eq "$(sha256sum <"$d/$f" | cut -d' ' -f1)" "$(cat "$OUT")" "sha256 of $f piped"
done

# `-` redirected from a file is that file, streamed as --stdin FILE (not read whole).
assert_exit 0 rx run lab1 t.sha --stdin - <"$d/framey"
assert_eq "$(sha256sum <"$d/framey" | cut -d' ' -f1)" "$(cat "$OUT")" "sha256 of - from a file"

# A pipe that closes early is the stdin's end, as with ssh: the command gets what came.
assert_exit 0 rx run lab1 t.sha --stdin - < <(head -c 100000 "$d/big"; exit 3)
assert_eq "$(head -c 100000 "$d/big" | sha256sum | cut -d' ' -f1)" "$(cat "$OUT")" "sha256 of the bytes before the close"

# A pipe that never ends nor sends: --stdin-timeout ends the call, 65, nothing ran (staged) --
# the FIFO's writer is this shell, which holds it open and writes nothing. A bit came first.
ws_add_action t.ran "{\"risk\": \"L0\", \"command\": \"touch '$RX_TMP/ran'; wc -c\"}"
mkfifo "$d/fifo"
exec 5<>"$d/fifo"
printf 'some' >&5
assert_exit 65 rx run lab1 t.ran --stdin "$d/fifo" --stdin-timeout 1 --json
assert_contains "$OUT" "sent nothing for 1 s and did not end (--stdin-timeout)"
assert_eq false "$(json executed)" "executed, a stalled pipe"
[[ ! -e $RX_TMP/ran ]] || fail "the command ran on a stalled pipe"
exec 5>&-

# More than limits.max_stdin_bytes: 65, nothing ran.
ws_edit 'c["limits"]["max_stdin_bytes"] = 1024 * 1024'
assert_exit 65 rx run lab1 t.ran --stdin - --json < <(head -c $((3 * 1024 * 1024)) "$d/big")
assert_contains "$OUT" "more than limits.max_stdin_bytes (1048576 bytes)"
assert_eq false "$(json executed)" "executed, a pipe above max_stdin_bytes"
[[ ! -e $RX_TMP/ran ]] || fail "the command ran on a pipe above max_stdin_bytes"
ws_edit 'c["limits"]["max_stdin_bytes"] = 512 * 1024 * 1024'

# Several hosts cannot share a pipe: it is spooled once, each host gets all of it.
head -c 3000000 "$d/big" >"$d/three"
assert_exit 0 rx run lab1,lab2 t.sha --stdin - < <(cat "$d/three")
w3=$(sha256sum <"$d/three" | cut -d' ' -f1)
assert_eq "[lab1] $w3
[lab2] $w3" "$(sort "$OUT")" "sha256 on each host of a fan-out"

# An approval binds the stdin's sha256: a pipe is spooled and hashed, then sent from the spool.
ws_add_action t.held '{"risk": "L2", "command": "sha256sum | cut -d\" \" -f1"}'
assert_exit 75 rx run lab1 t.held --stdin - --json < <(cat "$d/three")
CID=$(json challenge_id)
assert_eq "$w3" "$("$RX_PYTHON" -c 'import json,sys
print(json.load(open(sys.argv[1]))["stdin"]["sha256"])' "$WS/approvals/$CID.json")" "challenge's stdin sha256"
assert_eq 3000000 "$("$RX_PYTHON" -c 'import json,sys
print(json.load(open(sys.argv[1]))["stdin"]["bytes"])' "$WS/approvals/$CID.json")" "challenge's stdin bytes"
assert_exit 0 tty_answer "$REXEC_BIN" --workspace "$WS" approve "$CID"
assert_exit 77 rx run lab1 t.held --stdin - --grant "$CID" --json < <(head -c 2999999 "$d/three")
assert_contains "$OUT" "the stdin differs"
assert_exit 0 rx run lab1 t.held --stdin - --grant "$CID" < <(cat "$d/three")
assert_eq "$w3" "$(cat "$OUT")" "sha256 of the approved piped stdin"

# The spool has the pipe's limits too: a stalled pipe ends it (65, no challenge written), and
# Ctrl-C stops it at once (130), not at the pipe's timeout (60 s by default).
exec 5<>"$d/fifo"
printf 'some' >&5
assert_exit 65 rx run lab1 t.held --stdin "$d/fifo" --stdin-timeout 1 --json
assert_contains "$OUT" "sent nothing for 1 s and did not end (--stdin-timeout): nothing ran"
assert_eq null "$(json challenge_id)" "challenge for a stalled pipe"
# The spool (an unlinked file in evidence/, opened by the gate once the call has started, so
# after rexec's signal watchers) is open: the pipe is being read into it.
"$REXEC_BIN" --workspace "$WS" run lab1 t.held --stdin "$d/fifo" >"$OUT" 2>"$ERR" 5>&- &
pid=$!
spooling() { ls -l "/proc/$pid/fd" 2>/dev/null | grep -q "$WS/evidence/.*(deleted)"; }
poll_until 30 spooling || fail "no spool open after 30 s; rexec said: $(cat "$ERR")"
kill -INT "$pid"
st=0
timeout 30 tail --pid="$pid" -f /dev/null || fail "rexec still spooling 30 s after SIGINT: $(cat "$ERR")"
wait "$pid" || st=$?
assert_eq 130 "$st" "exit, SIGINT while a pipe was spooled ($(cat "$ERR"))"
exec 5>&-
pass
