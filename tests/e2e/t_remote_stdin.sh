#!/usr/bin/env bash
# The remote contract: the call's stdin arrives byte for byte (docs/remote-contract.md).
# The bytes follow the script on the channel; the wrapper stages exactly N of them (dd, count_bytes)
# into a private file the command reads. Checked with `--stdin FILE` and a request's
# stdin/stdin_base64: lines equal to any delimiter or to the wrapper's own last line, NUL bytes,
# no trailing newline, more than 1 MiB, an empty file; without stdin the command reads
# /dev/null. A call cancelled while its stdin is still arriving never starts the command.
# The same for an action with "stdin": "piped" (the command reads a FIFO filled while it runs):
# byte for byte, a command that stops reading still ends, and one cancelled mid-stdin is
# stopped before it could take the stdin cut short for a whole one. A wrapper that ends before
# taking its stdin (cd failed) ends the call at once.
tid="remote: stdin byte for byte"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c["hosts"]["lab1"]["allow"] = "L0"; c["limits"]["max_stdin_bytes"] = 128 * 1024 * 1024'
ws_add_action t.cat '{"risk": "L0", "command": "cat"}'
ws_add_action t.sha '{"risk": "L0",
  "command": "f=$(mktemp) && cat >\"$f\" && sha256sum <\"$f\" | cut -d\" \" -f1 && wc -c <\"$f\"; rm -f \"$f\""}'

expect_sha() {  # expect_sha FILE: $OUT holds the sha256 and size of FILE, as t.sha prints them
    assert_eq "$(sha256sum <"$1" | cut -d' ' -f1)
$(wc -c <"$1")" "$(cat "$OUT")" "sha256 and size of $(basename "$1") as the command saw it"
}

d=$RX_TMP/stdin
mkdir -p "$d"
# Delimiters a here-document or a naive framing would stop at, the wrapper's own last line,
# the marker byte, NUL bytes, CRs, bytes that are not UTF-8, and no newline at the end.
printf 'EOF\n__REXEC_EOF__\nEND\n__rx_main; exit\nexit\n\036rexec:x:end cmd 0 0 none 0\n\0\0NUL\0\r\n\xff\xfe\x80 bad utf-8\n\nno newline at the end' >"$d/tricky"
: >"$d/empty"
printf '\n' >"$d/newline"
head -c 1500000 /dev/urandom >"$d/big"          # > 1 MiB, every byte value
printf '%s' "$(head -c 3000 /dev/urandom | base64 -w0)" >"$d/long-line"

for f in tricky empty newline big long-line; do
    assert_exit 0 timeout 60 "$REXEC_BIN" --workspace "$WS" run lab1 t.sha --stdin "$d/$f"
    expect_sha "$d/$f"
done
# The bytes themselves, back on stdout.
assert_exit 0 rx run lab1 t.cat --stdin "$d/tricky"
cmp "$d/tricky" "$OUT" || fail "cat of the tricky file differs"

# A request's stdin_base64 (binary) and stdin (text).
"$RX_PYTHON" - "$d/tricky" "$RX_TMP/req-b64.json" "$RX_TMP/req-text.json" <<'PY'
import base64, json, sys
data = open(sys.argv[1], "rb").read()
json.dump({"action": "t.sha", "stdin_base64": base64.b64encode(data).decode()}, open(sys.argv[2], "w"))
json.dump({"action": "t.sha", "stdin": "EOF\nh\u00e9llo\n__REXEC_EOF__\nno newline"}, open(sys.argv[3], "w"))
PY
assert_exit 0 rx run lab1 --request "$RX_TMP/req-b64.json"
expect_sha "$d/tricky"
printf 'EOF\nh\xc3\xa9llo\n__REXEC_EOF__\nno newline' >"$d/text"
assert_exit 0 rx run lab1 --request "$RX_TMP/req-text.json"
expect_sha "$d/text"
# Both at once is refused.
assert_exit 64 rx run lab1 --request "$RX_TMP/req-text.json" --stdin "$d/text"

# No stdin: the command reads /dev/null and returns at once (the channel stays open during the
# call, so a command reading it would hang until its timeout).
assert_exit 0 timeout 20 "$REXEC_BIN" --workspace "$WS" run lab1 t.cat --json
assert_eq 0 "$(json stdout_bytes)" "stdout of cat without stdin"
assert_eq false "$(json timed_out)" "cat without stdin timed out"

# The staging file is private and gone after the call (a runner keeps one private file in its
# 0700 directory and empties it after each call).
ws_add_action t.stage '{"risk": "L0", "command": "stat -L -c %a /dev/stdin; ls -l /proc/self/fd/0"}'
printf 'x' >"$d/x"
assert_exit 0 rx run lab1 t.stage --stdin "$d/x"
assert_eq 600 "$(head -n1 "$OUT")" "mode of the staged stdin"
grep -qE '\(deleted\)|/\.rexec-[0-9]+/r\.[^/]*/in$' "$OUT" || fail "staged stdin: $(cat "$OUT")"

# ---- "stdin": "piped": the command reads a FIFO filled as the bytes arrive --------------------
ws_add_action t.psha '{"risk": "L0", "stdin": "piped",
  "command": "f=$(mktemp) && cat >\"$f\" && sha256sum <\"$f\" | cut -d\" \" -f1 && wc -c <\"$f\"; rm -f \"$f\""}'
for f in tricky empty newline big long-line; do
    assert_exit 0 timeout 60 "$REXEC_BIN" --workspace "$WS" run lab1 t.psha --stdin "$d/$f"
    expect_sha "$d/$f"
done
assert_exit 0 rx run lab1 --request "$RX_TMP/req-b64.json"
expect_sha "$d/tricky"
ws_add_action t.pstage '{"risk": "L0", "stdin": "piped",
  "command": "stat -L -c %a:%F /dev/stdin; ls -l /proc/self/fd/0"}'
assert_exit 0 rx run lab1 t.pstage --stdin "$d/x"
assert_eq "600:fifo" "$(head -n1 "$OUT")" "mode and type of a piped stdin"
grep -q '(deleted)' "$OUT" || fail "piped stdin: $(cat "$OUT")"
# A command that stops reading after 3 of 16 MiB ends with its own status, at once.
truncate -s $((16 * 1024 * 1024)) "$d/sixteen"
ws_add_action t.phead '{"risk": "L0", "stdin": "piped", "command": "head -c 3 | wc -c; exit 4"}'
assert_exit 4 timeout 60 "$REXEC_BIN" --workspace "$WS" run lab1 t.phead --stdin "$d/sixteen"
assert_eq 3 "$(cat "$OUT")" "bytes the command took"

# ---- a set-up step fails before the stdin is taken --------------------------------------------
# 16 MiB of stdin (far more than the channel's window and the pipes hold) to an action whose
# working directory is missing: the wrapper reports `end cd` and exits without reading the stdin.
# rexec must stop sending and report the cd failure, not wait on a window that never opens
# (that once ended in "the connection does not answer" after connect_timeout_s).
ws_add_action t.nocwd '{"risk": "L0", "command": "wc -c", "cwd": "/nonexistent-rexec-dir"}'
assert_exit 255 timeout 60 "$REXEC_BIN" --workspace "$WS" run lab1 t.nocwd --stdin "$d/sixteen" --json
[[ $(json error) == *"working directory /nonexistent-rexec-dir is missing"* ]] ||
    fail "cd failure with bulk stdin: error is: $(json error)"
assert_eq false "$(json executed)" "executed, cd failure with bulk stdin"

# ---- cancelled while the stdin is still arriving --------------------------------------------
# 64 MiB of stdin, the remote copier that stages it stopped (at this size the perl copier of
# remote/copier.sh, else dd), then Ctrl-C (SIGINT): rexec stops sending and closes the channel's
# stdin. Resumed, the copier sees EOF after fewer than N bytes: the wrapper must report a
# cancel and never start the command.
n=$((64 * 1024 * 1024))
truncate -s "$n" "$d/huge"
ws_add_action t.ran "{\"risk\": \"L0\", \"command\": \"touch '$RX_TMP/ran'; wc -c\"}"
# cancel_mid_stdin ACTION: runs ACTION with the 64 MiB as stdin (--json into $OUT), stops the
# remote dd that copies it as soon as it appears (a tight poll: python, no process per probe),
# so rexec blocks on the channel's window with most bytes unsent; then SIGINT to rexec, and dd
# goes on: it reaches EOF early. rexec must end, with 130.
# The stop is a race the test can lose: on a loaded machine dd may have read every byte before
# the poll finds it (the test once failed so: "the piped stdin was not cut: 67108864 of
# 67108864"). So before cancelling, the test reads what the stopped dd has taken
# (/proc/PID/io, rchar): only when at least CUT_MARGIN bytes are still unread -- more than the
# channel's window and the pipes can hold in flight (OpenSSH's 2 MiB window, a 64 KiB pipe,
# the TCP buffers), so rexec cannot have sent them all -- is the cut certain; otherwise (also
# when dd came and went between two looks) this attempt proves nothing: it is let finish,
# cleaned up and run again (at most 5 times). Only this lab's dd is stopped (REXEC_LAB_ID).
CUT_MARGIN=$((16 * 1024 * 1024))
CUT_OUT="" # piped: the file the command copies its stdin into (taken)
lab_id=$(<"$LAB_DIR/lab.id") # in the environment of every process the lab's sshd starts
# stop_dd: the pid of this lab's remote copier (dd count=$n, or perl ... -- $n), stopped
# (SIGSTOP) as soon as it appears; status 1 when none appeared while rexec ($1) was running.
stop_dd() {
    "$RX_PYTHON" - "$n" "$lab_id" "$1" <<'PY'
import os, signal, sys, time
# dd count=N, or the perl copier of remote/copier.sh (a stdin of 16 MiB or more): -- N SPLICE
def is_copier(argv):
    if argv[:1] == ["dd"]:
        return "count=" + sys.argv[1] in argv
    return argv[:2] == ["perl", "-e"] and argv[3:5] == ["--", sys.argv[1]]
env = b"REXEC_LAB_ID=" + sys.argv[2].encode()
rexec = sys.argv[3]
deadline = time.time() + 30
while time.time() < deadline and os.path.exists("/proc/" + rexec):
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0")[:-1]]
            if not is_copier(argv):
                continue
            with open("/proc/%s/environ" % p, "rb") as f:
                if env not in f.read().split(b"\0"):
                    continue  # another lab's (a test running beside this one)
        except OSError:
            continue
        os.kill(int(p), signal.SIGSTOP)
        print(p)
        sys.exit(0)
sys.exit(1)
PY
}
# taken PID: how many bytes the stopped copier has taken from the channel, at most. dd: what it
# read (rchar). perl moves them with splice(2), which rchar does not count: what it wrote,
# which is the staged file (its stdout) or, piped, what the command wrote out of the FIFO
# ($CUT_OUT) plus what the FIFO and the command's buffer can hold (2 MiB, generously).
taken() {
    local f=/proc/$1/fd/1 w
    if [[ $(cat "/proc/$1/comm" 2>/dev/null) == dd ]]; then
        awk '$1 == "rchar:" { print $2 }' "/proc/$1/io" 2>/dev/null
    elif [[ -f $f ]]; then
        stat -L -c %s "$f" 2>/dev/null
    else
        w=$(stat -c %s "$CUT_OUT" 2>/dev/null) || w=0
        echo $((w + 2 * 1024 * 1024))
    fi
}
# stopped_short PID: the copier is stopped with at least CUT_MARGIN bytes still unread
stopped_short() {
    local took
    [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) == T ]] || return 1
    took=$(taken "$1") || return 1
    [[ -n $took && $took -le $((n - CUT_MARGIN)) ]] || { echo "note: the copier had taken $took of $n bytes when stopped" >&2; return 1; }
}
cancel_attempt() {  # cancel_attempt ACTION: 0 when cancelled with the cut certain, 2 when not
    local pid dd_pid="" rc short=0
    "$REXEC_BIN" --workspace "$WS" run lab1 "$1" --stdin "$d/huge" --json >"$OUT" 2>"$ERR" &
    pid=$!
    dd_pid=$(stop_dd "$pid") || dd_pid=""
    [[ -n $dd_pid ]] && stopped_short "$dd_pid" && short=1
    if [[ $short == 0 ]]; then
        # the race was lost (dd came and went between two looks, or had read too much when
        # stopped): this attempt proves nothing; let it end as it will
        echo "note: $1: the remote dd was not stopped short of its stdin: again" >&2
        [[ -z $dd_pid ]] || kill -CONT "$dd_pid" 2>/dev/null || true
        timeout 60 tail --pid="$pid" -f /dev/null || { kill -KILL "$pid"; fail "$1: rexec did not end"; }
        wait "$pid" || true
        return 2
    fi
    kill -INT "$pid"
    # rexec waits for the wrapper's report; let dd go on: it reaches EOF early.
    kill -CONT "$dd_pid"
    rc=0
    timeout 30 tail --pid="$pid" -f /dev/null || rc=$?
    [[ $rc -eq 0 ]] || { kill -KILL "$pid"; fail "$1: rexec did not finish after SIGINT"; }
    rc=0; wait "$pid" || rc=$?
    assert_eq 130 "$rc" "$1: exit status after SIGINT during stdin"
}
no_call_left() { [[ -z $(remote_pgrep '^(dd |perl -e|sleep 2147483647|cat$)' || true) ]]; }
cancel_mid_stdin() {  # cancel_mid_stdin ACTION [FILES TO CLEAN BETWEEN ATTEMPTS...]
    local try rc action=$1
    shift
    for ((try = 1; try <= 5; try++)); do
        rc=0
        cancel_attempt "$action" || rc=$?
        [[ $rc == 2 ]] || return "$rc"
        wait_until 30 no_call_left
        rm -f -- "$@"
    done
    fail "$action: in 5 attempts the remote dd was never stopped with $CUT_MARGIN of its $n bytes unread"
}
cancel_mid_stdin t.ran "$RX_TMP/ran"
assert_eq false "$(json executed)" "executed, cancelled during stdin"
[[ $(json error) == *"did not run"* ]] || fail "cancel during stdin: error is: $(json error)"
[[ ! -e $RX_TMP/ran ]] || fail "the command ran on a truncated stdin"

# ---- a piped stdin cancelled while it is still arriving -------------------------------------
# The command has started and has taken part of its stdin, but it must never see EOF for it:
# it ignores TERM, so if its stdin ended it would go on and touch the file before kill-after.
ws_edit 'c["limits"]["kill_after_s"] = 1'
ws_add_action t.pran "{\"risk\": \"L0\", \"stdin\": \"piped\",
  \"command\": \"trap '' TERM; cat >'$RX_TMP/pgot'; touch '$RX_TMP/pran'\"}"
CUT_OUT=$RX_TMP/pgot
cancel_mid_stdin t.pran "$RX_TMP/pran" "$RX_TMP/pgot"
assert_eq true "$(json executed)" "executed, piped stdin cancelled"
[[ ! -e $RX_TMP/pran ]] || fail "the command took a piped stdin cut short for a whole one"
got=$(stat -c %s "$RX_TMP/pgot")
[[ $got -lt $n ]] || fail "the piped stdin was not cut: $got of $n bytes"
# Nothing of the call stays on the VM: not the command, not the feeder's dd or sleep.
wait_until 10 no_call_left
pass
