#!/usr/bin/env bash
# The remote contract: secrets travel only as `export NAME=...` lines of the script on the
# channel's stdin (docs/remote-contract.md).
#  - while a call runs, no process on the VM (= this machine: every /proc/*/cmdline) has the
#    secret's value in its arguments, while the command text naming it ($DEMO_TOKEN) is visible
#    and the command's environment does hold the value (positive controls for both scans);
#  - rexec's own argv and environment never hold it; neither do --json, audit or evidence;
#  - values are any bytes but NUL (quotes, $, backticks, newlines, high bytes) and arrive exact;
#  - dangerous or malformed names are refused when the workspace loads (exit 78), and a value
#    too large for one environment entry is refused before anything is sent, naming the secret.
# The token is never put on a command line by this test either: grep reads it with -f.
tid="remote: secrets never on a command line"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
tokfile=$WS/secrets/demo_token
[[ -s $tokfile ]] || fail "the lab has no demo token"

# pids (one a line) whose /proc/PID/FILE contains the token
procs_with_token() {
    grep -lsaF -f "$tokfile" /proc/[0-9]*/"$1" 2>/dev/null | cut -d/ -f3 || true
}

fifo=$RX_TMP/release
mkfifo "$fifo"
# The command holds the token in its environment (sleep inherits it) and waits on a fifo until
# the test has looked at every process.
ws_add_action t.secret "{\"risk\": \"L1\", \"secrets\": [\"DEMO_TOKEN\"],
  \"command\": \"sleep 322 & read -r _ <'$fifo'; kill \$!; printf 'len=%s\\\\n' \\\"\${#DEMO_TOKEN}\\\"\"}"

"$REXEC_BIN" --workspace "$WS" run lab1 t.secret --json >"$OUT" 2>"$ERR" &
pid=$!
# Scan every process's arguments from the start of the call until the command is running.
while :; do
    leaks=$(procs_with_token cmdline)
    [[ -z $leaks ]] || { echo x >"$fifo"; fail "the token is in the command line of: $(for p in $leaks; do tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-200; echo; done)"; }
    has_remote '^sleep 322$' && break
    if ! kill -0 "$pid" 2>/dev/null; then
        _rx_show stderr "$ERR"
        fail "rexec ended before the command ran"
    fi
done
sleep_pid=$(remote_pgrep '^sleep 322$')
# The command is running: one more scan of every process, then the positive controls.
[[ -z $(procs_with_token cmdline) ]] || fail "the token is in a command line while the command runs"
# (-q: a match wins over errors from processes that vanish during the scan)
# (a runner's contained shell gets the command text through a FIFO, on no command line at all:
# the control is the command's own sleep, which the scan must see)
grep -qsaF '322' /proc/[0-9]*/cmdline 2>/dev/null ||
    fail "control: the command's sleep is in no command line: is the scan blind?"
in_env=$(procs_with_token environ)
grep -qx "$sleep_pid" <<<"$in_env" ||
    fail "control: the token is not in the environment of the remote command ($sleep_pid): $in_env"
# rexec itself: not in its arguments, not in its environment.
grep -qaF -f "$tokfile" "/proc/$pid/cmdline" && fail "the token is in rexec's command line"
grep -qaF -f "$tokfile" "/proc/$pid/environ" && fail "the token is in rexec's environment"
grep -qx "$pid" <<<"$in_env" && fail "the token is in rexec's environment"
echo go >"$fifo"
rc=0
timeout 20 tail --pid="$pid" -f /dev/null || fail "rexec did not finish"
wait "$pid" || rc=$?
assert_eq 0 "$rc" "exit status of t.secret"
"$RX_PYTHON" - "$OUT" "$(wc -c <"$tokfile")" <<'PY' || fail "--json of t.secret"
import json, sys
o = json.loads(open(sys.argv[1]).readline())
assert o["stdout"] == "len=%s\n" % sys.argv[2], o["stdout"]
assert o["exit_code"] == 0 and o["executed"] is True, o
PY
# Nothing rexec wrote holds the value.
if grep -rlsaF -f "$tokfile" "$OUT" "$ERR" "$WS/audit" "$WS/evidence"; then
    fail "the token is in rexec's output, audit or evidence"
fi

# ---- values: any byte but NUL ----------------------------------------------------------------
# (the workspace drops one trailing newline of a secret file; this value ends in "x")
printf '%s' "quote' dq\" \$HOME \`id\` \$(id) \\ {x} %s
line2	tab \r cr \xff\xfe\x80 \036rexec: x" >"$WS/secrets/odd"
chmod 600 "$WS/secrets/odd"
ws_edit 'c["secrets"]["ODD_SECRET"] = {"file": "secrets/odd"}'
ws_add_action t.odd '{"risk": "L0", "secrets": ["ODD_SECRET"],
  "command": "printf %s \"$ODD_SECRET\" | sha256sum | cut -d\" \" -f1"}'
assert_exit 0 rx run lab1 t.odd
assert_eq "$(sha256sum <"$WS/secrets/odd" | cut -d' ' -f1)" "$(cat "$OUT")" "sha256 of the odd secret remotely"

# ---- sizes -----------------------------------------------------------------------------------
# A large value still travels (on stdin, not argv): 60000 bytes arrive whole.
head -c 45000 /dev/urandom | base64 -w0 | head -c 60000 >"$WS/secrets/large"
chmod 600 "$WS/secrets/large"
ws_edit 'c["secrets"]["LARGE_SECRET"] = {"file": "secrets/large"}'
ws_add_action t.large '{"risk": "L0", "secrets": ["LARGE_SECRET"],
  "command": "printf %s \"$LARGE_SECRET\" | sha256sum | cut -d\" \" -f1"}'
assert_exit 0 rx run lab1 t.large
assert_eq "$(sha256sum <"$WS/secrets/large" | cut -d' ' -f1)" "$(cat "$OUT")" "sha256 of a 60000-byte secret"
# Too large for the VM's environment (128 KiB an entry; the workspace caps secrets lower):
# a configuration error naming the secret, never "Argument list too long" from the VM.
head -c 150000 /dev/urandom | base64 -w0 >"$WS/secrets/huge"
chmod 600 "$WS/secrets/huge"
ws_edit 'c["secrets"]["HUGE_SECRET"] = {"file": "secrets/huge"}'
ws_add_action t.huge '{"risk": "L0", "secrets": ["HUGE_SECRET"], "command": "echo ran"}'
assert_exit 78 rx run lab1 t.huge --json
"$RX_PYTHON" - "$OUT" <<'PY' || fail "--json of t.huge"
import json, sys
o = json.loads(open(sys.argv[1]).readline())
assert o["executed"] is False and o["exit_code"] is None, o
assert "HUGE_SECRET" in o["error"] and "larger than" in o["error"], o["error"]
assert "Argument list" not in o["error"], o["error"]
PY
ws_edit 'del c["actions"]["t.huge"]; del c["secrets"]["HUGE_SECRET"]'

# ---- names -----------------------------------------------------------------------------------
# A name is shell syntax too: the workspace refuses it on load (exit 78), whatever uses it.
for name in BASH_ENV ENV PATH IFS PS4 SHELLOPTS LD_PRELOAD BASH_FUNC_x%% __rx_cmd TMOUT FUNCNEST \
            'A-B' '1ABC' 'A B'; do
    ws_edit 'c["secrets"][args[0]] = {"file": "secrets/odd"}' "$name"
    assert_exit 78 rx actions
    assert_contains "$ERR" "$name"
    ws_edit 'del c["secrets"][args[0]]' "$name"
done
assert_exit 0 rx actions
pass
