# shellcheck shell=bash
# tests/e2e/lib.sh — sourced by the end-to-end tests (tests/e2e/t_*.sh). CTest runs each test as
# `bash tests/e2e/t_x.sh` with REXEC_BIN (the rexec binary) and REXEC_SRC (the source tree) set.
#
# A test looks like OpenSSH's regress scripts:
#
#     tid="remote exit status"
#     . "$REXEC_SRC/tests/e2e/lib.sh"
#     lab_start 1
#     for s in 0 1 4 44; do
#         ws_add_action "t.exit$s" "{\"risk\": \"L0\", \"command\": \"exit $s\"}"
#         assert_exit "$s" rx run lab1 "t.exit$s"
#     done
#     pass
#
# Tests run under `set -euo pipefail`. They never sleep to synchronise: `wait_until` polls
# (bounded) for the few external effects that need waiting for. The temporary directory and the
# lab are removed on exit, also when the test is killed (a watchdog outside the test's process
# tree stops the lab if the test dies by SIGKILL, e.g. a CTest timeout).
# REXEC_E2E_KEEP=1 keeps the temporary directory (lab stopped, logs kept) when a test fails.
#
# Functions (see each one's comment):
#   lab_start [N]                  start an N-host lab (default 2); sets WS, LAB_DIR, LAB_HOSTS,
#                                  LAB_BASE_PORT, LAB_USER; lab down --purge on exit
#   lab ARGS...                    scripts/lab on this test's lab (lab status, lab drop lab1, ...)
#   lab_port HOST                  the port of lab1.. (stdout)
#   lab_log HOST                   the path of HOST's sshd log (stdout)
#   lab_ssh HOST [ARGS...]         OpenSSH's ssh to HOST with the workspace's key and known_hosts
#   rx ARGS...                     "$REXEC_BIN" --workspace "$WS" ARGS...
#   fail MSG... / pass / skip MSG...
#   assert_eq EXPECTED ACTUAL [WHAT]
#   assert_exit CODE CMD...        CMD's stdout/stderr into $OUT/$ERR; its status must be CODE
#   assert_contains FILE NEEDLE / assert_not_contains FILE NEEDLE   (fixed strings)
#   ws_edit PYCODE [ARGS...]       edit rexec.json: PYCODE runs with the dict `c`, `json`, `args`
#   ws_add_action NAME JSON        add or replace one catalog action
#   ws_set_json [JSON]             replace rexec.json (JSON or stdin), keeping the lab's hosts
#                                  unless JSON has "hosts"
#   ws_get PYEXPR                  print a value of rexec.json (strings raw, the rest as JSON)
#   remote_pgrep ERE               pids of processes on the "VM" started through the lab whose
#                                  command line matches ERE; status 1 if none (like pgrep)
#   established_conns PORT         number of ESTABLISHED TCP connections to 127.0.0.1:PORT
#   wait_until TIMEOUT_S CMD...    run CMD until it succeeds; fail the test after TIMEOUT_S
#   at_exit CODE                   shell code to run when the test exits (instead of a trap)
#   start_serve [VAR=VALUE...] [SERVE_OPTION...]
#                                  `rexec serve` on $SOCK, stderr to $SERVE_ERR; SERVE_PID once
#                                  its socket is there; stopped at exit
#   stop_serve [PID]               SIGTERM to it, wait; its exit status in SERVE_RC
#   calls ACTION[:N]... / field JSON KEY   calls through it (tests/e2e/serve_calls.py)

set -euo pipefail

tid=${tid:-$(basename "$0" .sh)}

if [[ -z ${REXEC_SRC:-} ]]; then
    REXEC_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fi
export REXEC_SRC
# rexec warns on stderr when the evidence volume has less than 10 % free; the tests check stderr
# and must not depend on the machine's free space (t_cli_json sets it where it tests the warning).
export REXEC_EVIDENCE_MIN_FREE_PCT=${REXEC_EVIDENCE_MIN_FREE_PCT:-0}
RX_LAB=$REXEC_SRC/scripts/lab
# shellcheck source=scripts/lib/lab_ports.sh
. "$REXEC_SRC/scripts/lib/lab_ports.sh"

# python3 for the rexec.json helpers (standard library only); prefer the system one: a pyenv shim
# costs ~0.4 s a call.
if [[ -n ${PYTHON:-} ]]; then
    RX_PYTHON=$PYTHON
elif [[ -x /usr/bin/python3 ]]; then
    RX_PYTHON=/usr/bin/python3
else
    RX_PYTHON=python3
fi

RX_TMP=$(mktemp -d "${TMPDIR:-/tmp}/rexec-e2e.XXXXXX")
OUT=$RX_TMP/out
ERR=$RX_TMP/err
: >"$OUT"
: >"$ERR"
LAB_DIR=""
WS=""
RX_WD_FD=""

# ---------------------------------------------------------------------------------------------
# results

# fail MSG...: print the test id and MSG on stderr, exit 1. (In a subshell, e.g. inside $(...),
# this exits only the subshell; the caller's `set -e` then stops the test.)
fail() {
    printf 'FAIL %s: %s\n' "$tid" "$*" >&2
    exit 1
}

# pass: print "ok TID" and exit 0.
pass() {
    printf 'ok %s\n' "$tid"
    exit 0
}

# skip MSG...: the test cannot run here; exit 77 (CTest: SKIP_RETURN_CODE 77).
skip() {
    printf 'SKIP %s: %s\n' "$tid" "$*" >&2
    exit 77
}

# ---------------------------------------------------------------------------------------------
# assertions

# assert_eq EXPECTED ACTUAL [WHAT]
assert_eq() {
    [[ $1 == "$2" ]] || fail "${3:-value}: expected '$1', got '$2'"
}

_rx_show() {  # _rx_show LABEL FILE: the file's first 200 lines, indented, on stderr
    printf '  --- %s (%s bytes) ---\n' "$1" "$(wc -c <"$2")" >&2
    head -n 200 -- "$2" | sed 's/^/  | /' >&2 || true
}

# assert_exit CODE CMD...: run CMD (a command or shell function) with stdout in $OUT and stderr in
# $ERR; fail, showing both, unless it exits with CODE. Sets RC to the status.
assert_exit() {
    local want=$1
    shift
    RC=0
    "$@" >"$OUT" 2>"$ERR" || RC=$?
    if [[ $RC != "$want" ]]; then
        printf 'FAIL %s: exit status %s, expected %s, from: %s\n' "$tid" "$RC" "$want" "$*" >&2
        _rx_show stdout "$OUT"
        _rx_show stderr "$ERR"
        exit 1
    fi
}

# assert_contains FILE NEEDLE: FILE contains the fixed string NEEDLE.
assert_contains() {
    if ! grep -qF -- "$2" "$1"; then
        _rx_show "$1" "$1"
        fail "$1 does not contain '$2'"
    fi
}

# assert_not_contains FILE NEEDLE: FILE does not contain the fixed string NEEDLE.
assert_not_contains() {
    if grep -qF -- "$2" "$1"; then
        _rx_show "$1" "$1"
        fail "$1 contains '$2'"
    fi
}

# wait_until TIMEOUT_S CMD...: run CMD (output untouched) until it succeeds, polling every 20 ms
# at first, then every 100 ms; fail the test after TIMEOUT_S seconds (may be fractional).
wait_until() {
    poll_until "$@" || fail "timed out after ${1}s waiting for: ${*:2}"
}

# poll_until SECONDS CMD...: like wait_until, but returns 1 when the time is up (the caller
# says what was wrong, e.g. what was still there).
poll_until() {
    local limit=$1 delay=0.02 now deadline
    shift
    now=${EPOCHREALTIME/[.,]/}
    deadline=$(( 10#$now + $(awk -v s="$limit" 'BEGIN { printf "%d", s * 1000000 }') ))
    while :; do
        "$@" && return 0
        now=${EPOCHREALTIME/[.,]/}
        (( 10#$now < deadline )) || return 1
        sleep "$delay"
        case $delay in 0.02) delay=0.05 ;; *) delay=0.1 ;; esac
    done
}

# stop_gently PID...: SIGCONT and SIGTERM, up to 10 s for each to exit, then SIGKILL what is
# left. A `rexec serve` stopped so cancels its calls and exits 0, which also lets a coverage
# build write its counts (a SIGKILLed process writes none). An exit status other than 0 or 143
# is reported on stderr (a crash or a leak found at exit), without failing the cleanup.
stop_gently() {
    local p i rc
    for p in "$@"; do
        [[ -z $p ]] || { kill -CONT "$p" && kill -TERM "$p"; } 2>/dev/null || true
    done
    for p in "$@"; do
        [[ -n $p ]] || continue
        for ((i = 0; i < 200; i++)); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.05
        done
        kill -KILL "$p" 2>/dev/null || true
        rc=0
        wait "$p" 2>/dev/null || rc=$?
        [[ $rc == 0 || $rc == 143 || $rc == 127 ]] ||
            printf 'note %s: process %s exited %s when stopped\n' "$tid" "$p" "$rc" >&2
    done
    return 0
}

# cov_env USER: sets RX_COV to the words to put before a command run as USER (setpriv ...
# "${RX_COV[@]}" CMD). Empty, except under scripts/coverage (REXEC_COVERAGE_FOREIGN): USER cannot
# write the build tree's .gcda files, so its counts go to a directory of its own, which
# scripts/coverage merges into the tree's afterwards.
cov_env() {
    RX_COV=()
    if [[ -n ${REXEC_COVERAGE_FOREIGN:-} ]]; then
        RX_COV=(env "GCOV_PREFIX=$REXEC_COVERAGE_FOREIGN/$1" GCOV_PREFIX_STRIP=0)
    fi
}

# ---------------------------------------------------------------------------------------------
# the lab

# at_exit CODE: shell code the test's exit runs (however the test ends), in the order given,
# once the serves of start_serve are stopped (so their clients have ended; users, mounts and
# the like they used can go) and before the lab goes down. Neither its failure nor an unset
# variable in it stops the cleanup or changes the test's status. Use it instead of an EXIT trap
# of the test's own.
at_exit() { _RX_AT_EXIT+=("$1"); }
_RX_AT_EXIT=()

_rx_cleanup() {
    local rc=$? down_rc=0 code
    trap - EXIT
    set +eu
    _rx_stop_serves
    for code in ${_RX_AT_EXIT[@]+"${_RX_AT_EXIT[@]}"}; do eval "$code"; done
    set -eu
    if [[ -n $LAB_DIR && -d $LAB_DIR ]]; then
        if [[ $rc -ne 0 && ${REXEC_E2E_KEEP:-0} == 1 ]]; then
            "$RX_LAB" down --dir "$LAB_DIR" >/dev/null || down_rc=$?
        else
            "$RX_LAB" down --purge --dir "$LAB_DIR" >/dev/null || down_rc=$?
        fi
        if [[ $down_rc -ne 0 ]]; then
            printf 'FAIL %s: lab down failed (exit %s)\n' "$tid" "$down_rc" >&2
            [[ $rc -ne 0 ]] || rc=1
        fi
    fi
    if [[ -n $RX_WD_FD ]]; then
        # tell the watchdog that cleanup happened, then let it go
        { printf 'done\n' 1>&"$RX_WD_FD"; } 2>/dev/null || true
        exec {RX_WD_FD}>&-
    fi
    if [[ $rc -ne 0 && ${REXEC_E2E_KEEP:-0} == 1 ]]; then
        printf 'kept %s\n' "$RX_TMP" >&2
    else
        rm -rf -- "$RX_TMP"
    fi
    exit "$rc"
}
trap _rx_cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# The watchdog runs outside this test's process tree (setsid) and waits on a FIFO this shell holds
# open. If the shell dies without its EXIT trap (SIGKILL), the FIFO reads EOF without "done" and
# the watchdog stops the lab and removes the temporary directory. Background processes of the test
# inherit the FIFO and would delay that EOF, so it also checks once a second that the test shell
# (pid and start time) still exists.
_rx_watchdog() {
    local fifo=$RX_TMP/.watchdog start
    command -v setsid >/dev/null 2>&1 || return 0
    mkfifo -m 600 "$fifo" || return 0
    start=$(_rx_starttime $$)
    # O_RDWR never blocks on a FIFO; this shell's copy closes when it exits, however it exits.
    exec {RX_WD_FD}<>"$fifo"
    # shellcheck disable=SC2016 # expanded by the watchdog's bash
    setsid -f bash -c '
        wd=$5; exec {wd}>&-      # its inherited copy of the writing end, or it never sees EOF
        exec <"$1" >/dev/null 2>&1
        starttime() { local l; { read -r l <"/proc/$1/stat"; } 2>/dev/null || return 0
                      l=${l##*) }; set -- $l; echo "${20}"; }
        while :; do
            if read -r -t 1 line; then
                [[ $line == done ]] && exit 0
            elif [[ $? -le 128 ]]; then
                break                                   # EOF: the test shell is gone
            fi
            [[ $(starttime "$6") == "$7" ]] || break    # the test shell is gone, children live on
        done
        "$2" down --purge --dir "$3"
        rm -rf -- "$4"
    ' rexec-e2e-watchdog "$fifo" "$RX_LAB" "$LAB_DIR" "$RX_TMP" "$RX_WD_FD" "$$" "$start" \
        </dev/null >/dev/null 2>&1
}

_rx_starttime() {  # the start time (clock ticks since boot) of process $1: pid reuse guard
    local l
    { read -r l <"/proc/$1/stat"; } 2>/dev/null || return 0
    l=${l##*) }
    # shellcheck disable=SC2086 # split the fields
    set -- $l
    echo "${20}"
}

# _rx_free_block N: a base port P with nothing listening on P..P+N-1 (scripts/lib/lab_ports.sh).
_rx_free_block() {
    rx_free_block "$1" || fail "no free block of $1 ports found"
}

# lab_start [N]: start an N-host lab (default 2) in a temporary directory on a free port block,
# retrying another block when a port turns out to be taken (a parallel run won the race).
# Sets and exports WS (the workspace), LAB_DIR, LAB_HOSTS, LAB_BASE_PORT, LAB_USER.
lab_start() {
    local n=${1:-2} base
    [[ -z $LAB_DIR ]] || fail "lab_start called twice"
    LAB_DIR=$RX_TMP/lab
    if ! rx_lab_up_free "$RX_LAB" "$LAB_DIR" "$n" "$RX_TMP/lab_up.out"; then
        _rx_show "lab up" "$RX_TMP/lab_up.out"
        fail "scripts/lab up failed (exit $rx_lab_rc)"
    fi
    LAB_HOSTS=$n
    LAB_BASE_PORT=$base
    LAB_USER=$(id -un)
    WS=$LAB_DIR/workspace
    export WS LAB_DIR LAB_HOSTS LAB_BASE_PORT LAB_USER
    _rx_watchdog
}

# lab ARGS...: scripts/lab on this test's lab.
lab() {
    [[ -n $LAB_DIR ]] || fail "lab: no lab (call lab_start first)"
    "$RX_LAB" --dir "$LAB_DIR" "$@"
}

_rx_host_index() {  # lab1 / 1 -> 1, checked against LAB_HOSTS
    local i=${1#lab}
    if ! [[ $i =~ ^[0-9]+$ ]] || (( 10#$i < 1 || 10#$i > ${LAB_HOSTS:-0} )); then
        fail "no lab host '$1'"
    fi
    echo "$((10#$i))"
}

# lab_port HOST: the port of HOST (lab1.. or its number).
lab_port() {
    local i
    i=$(_rx_host_index "$1")
    echo "$((LAB_BASE_PORT + i - 1))"
}

# lab_log HOST: the path of HOST's sshd log (LogLevel VERBOSE).
lab_log() {
    local i
    i=$(_rx_host_index "$1")
    echo "$LAB_DIR/hosts/lab$i/sshd.log"
}

# start_serve [VAR=VALUE...] [SERVE_OPTION...]: `rexec serve` in the background on $SOCK (default
# $RX_TMP/rexec.sock; a file left there is removed first), with those variables in its
# environment and its stderr appended to $SERVE_ERR (default $RX_TMP/serve.err). Returns once
# the socket is there, with the pid in SERVE_PID. Fails the test, showing serve's stderr, when
# serve exits before its socket appears, or no socket appears in 60 s. A serve still running
# when the test exits is stopped then (stop_gently). Another serve beside it:
# `SOCK=$RX_TMP/two.sock SERVE_ERR=$RX_TMP/serve2.err start_serve; SERVE2=$SERVE_PID`.
start_serve() {
    local sock=${SOCK:=$RX_TMP/rexec.sock} err=${SERVE_ERR:-$RX_TMP/serve.err} env=() rc=0
    while [[ ${1:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do env+=("$1"); shift; done
    rm -f -- "$sock"
    env ${env[@]+"${env[@]}"} "$REXEC_BIN" --workspace "$WS" serve --socket "$sock" "$@" 2>>"$err" &
    SERVE_PID=$!
    _RX_SERVES+=("$SERVE_PID:$(_rx_starttime "$SERVE_PID")")
    poll_until 60 _rx_serve_up "$SERVE_PID" "$sock" || true
    [[ ! -S $sock ]] || return 0
    _rx_show "serve's stderr" "$err"
    if kill -0 "$SERVE_PID" 2>/dev/null; then
        fail "rexec serve (pid $SERVE_PID) has no socket at $sock after 60 s"
    fi
    wait "$SERVE_PID" || rc=$?
    fail "rexec serve exited (status $rc) before its socket $sock appeared (its stderr: $err)"
}
_rx_serve_up() { [[ -S $2 ]] || ! kill -0 "$1" 2>/dev/null; }  # PID SOCK: up, or gone

# stop_serve [PID]: SIGTERM to the serve start_serve started as PID (default $SERVE_PID), and wait
# for it (60 s, then SIGKILL); its exit status in SERVE_RC. SERVE_PID is emptied if it was PID.
stop_serve() {
    local pid=${1:-$SERVE_PID} i
    kill -TERM "$pid"
    poll_until 60 _rx_gone "$pid" || {
        printf 'note %s: serve %s still runs 60 s after SIGTERM: SIGKILL\n' "$tid" "$pid" >&2
        kill -KILL "$pid" 2>/dev/null || true
    }
    SERVE_RC=0
    wait "$pid" || SERVE_RC=$?
    for i in "${!_RX_SERVES[@]}"; do
        [[ ${_RX_SERVES[$i]%%:*} != "$pid" ]] || unset "_RX_SERVES[$i]"
    done
    [[ $pid != "${SERVE_PID:-}" ]] || SERVE_PID=
}
_rx_gone() { ! kill -0 "$1" 2>/dev/null; }

# _rx_stop_serves: at the test's exit, stop the serves start_serve started that still run (the
# start time guards against a pid the system has given to another process since).
_rx_stop_serves() {
    local s pids=()
    for s in ${_RX_SERVES[@]+"${_RX_SERVES[@]}"}; do
        [[ -z ${s#*:} || $(_rx_starttime "${s%%:*}") != "${s#*:}" ]] || pids+=("${s%%:*}")
    done
    _RX_SERVES=()
    stop_gently ${pids[@]+"${pids[@]}"}
}
_RX_SERVES=()

# calls ACTION[:N]...: ACTION's calls one after the other on one connection to the serve on $SOCK
# (tests/e2e/serve_calls.py: a JSON line per call without a count; a counted call must exit 0);
# field JSON KEY: a key of such a line.
calls() { timeout 600 "$RX_PYTHON" "$REXEC_SRC/tests/e2e/serve_calls.py" "$SOCK" "$@"; }
field() { "$RX_PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# lab_set_tmpdir HOST DIR: HOST's sshd gives its sessions TMPDIR=DIR from now on (SetEnv, then a
# HUP: sshd re-executes itself and reads its config), so the runners there keep their directory
# (DIR/.rexec-<uid>) and sweep it apart from every other lab on the machine: runners of labs that
# tests run in parallel would otherwise share /tmp/.rexec-<uid>, and sweep each other's planted
# leftovers. DIR may be missing or hostile (tests of a runner that cannot start).
lab_set_tmpdir() {
    local cfg=$LAB_DIR/hosts/$1/sshd_config
    sed -i "s|^SetEnv \(TMPDIR=[^ ]* \)\{0,1\}SHLVL=1 |SetEnv TMPDIR=$2 SHLVL=1 |" "$cfg"
    grep -qF "SetEnv TMPDIR=$2 SHLVL=1 " "$cfg" || fail "$1's sshd_config has no SetEnv line to extend"
    kill -HUP "$(cat "$LAB_DIR/hosts/$1/sshd.pid")"
    wait_until 20 _lab_tmpdir_is "$1" "$2" || fail "$1's sessions did not get TMPDIR=$2"
}
# shellcheck disable=SC2016 # expanded on the VM
_lab_tmpdir_is() { [[ $(lab_ssh "$1" 'echo $TMPDIR' 2>/dev/null) == "$2" ]]; }

# lab_set_env HOST NAME=VALUE...: HOST's sshd gives its sessions these exported variables from
# now on (added to its SetEnv line, then a HUP, as lab_set_tmpdir does). VALUEs without spaces.
lab_set_env() {
    local host=$1 cfg=$LAB_DIR/hosts/$1/sshd_config last
    shift
    last=$(printf '%s' "${*: -1}")
    grep -q '^SetEnv .*SHLVL=1 ' "$cfg" || fail "$host's sshd_config has no SetEnv line to extend"
    sed -i "s|^SetEnv .*SHLVL=1 .*|& $*|" "$cfg"
    kill -HUP "$(cat "$LAB_DIR/hosts/$host/sshd.pid")"
    wait_until 20 _lab_env_has "$host" "$last" || fail "$host's sessions did not get $last"
}
# shellcheck disable=SC2016 # expanded on the VM
_lab_env_has() { lab_ssh "$1" 'env' 2>/dev/null | grep -qxF -- "$2"; }

# lab_ssh HOST [SSH_OPTIONS...] [COMMAND...]: OpenSSH's ssh to HOST as LAB_USER with the workspace's
# key and known_hosts (strict), ignoring ~/.ssh/config and agents. Leading options (-o X, -v, ...)
# go before the defaults, so they override them (ssh keeps the first value it sees).
lab_ssh() {
    local port
    local -a opts=()
    port=$(lab_port "$1")
    shift
    while [[ $# -gt 0 && $1 == -* ]]; do
        case $1 in
            -[bcDEeFIiJLlmOopQRSWw]) [[ $# -ge 2 ]] || fail "lab_ssh: $1 needs a value"
                                     opts+=("$1" "$2"); shift 2 ;;
            --) shift; break ;;
            *) opts+=("$1"); shift ;;
        esac
    done
    ssh ${opts[@]+"${opts[@]}"} -F /dev/null -p "$port" -i "$WS/keys/id_ed25519" \
        -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none \
        -o UserKnownHostsFile="$WS/known_hosts" -o GlobalKnownHostsFile=/dev/null \
        -o StrictHostKeyChecking=yes -o ConnectTimeout=10 -o LogLevel=ERROR \
        "$LAB_USER@127.0.0.1" "$@"
}

# tty_answer CMD...: CMD on a new pseudo-terminal (its controlling terminal); waits for rexec's
# approval prompt, then types $ANSWER if set, else the code the prompt shows. The terminal's text
# goes to stdout; the status is CMD's (99: no prompt came).
tty_answer() {
    "$RX_PYTHON" - "$@" <<'PY'
import os, pty, re, select, sys, time
cmd = sys.argv[1:]
answer = os.environ["ANSWER"].encode() if "ANSWER" in os.environ else None
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
buf, deadline = b"", time.time() + 30
def more():
    global buf
    if select.select([fd], [], [], 0.2)[0]:
        try:
            d = os.read(fd, 4096)
        except OSError:
            return False
        if not d:
            return False
        buf += d
    return True
while b"anything else refuses): " not in buf and time.time() < deadline:
    if not more():
        break
m = re.search(rb"type the code ([0-9A-Z]{3}-[0-9A-Z]{3})", buf)
if m:
    os.write(fd, (answer if answer is not None else m.group(1)) + b"\n")
    while time.time() < deadline and more():
        pass
_, st = os.waitpid(pid, 0)
sys.stdout.write(buf.decode("utf-8", "replace"))
sys.exit(os.waitstatus_to_exitcode(st) if m else 99)
PY
}

# rx ARGS...: the rexec under test on this test's workspace.
rx() {
    [[ -n ${REXEC_BIN:-} ]] || fail "REXEC_BIN is not set"
    [[ -n $WS ]] || fail "rx: no workspace (call lab_start first)"
    "$REXEC_BIN" --workspace "$WS" "$@"
}

# ---------------------------------------------------------------------------------------------
# the workspace's rexec.json (python3, standard library only)

# ws_edit PYCODE [ARGS...]: load $WS/rexec.json into the dict `c`, run PYCODE (statements; `json`
# and `args` (the ARGS) are available; assigning `c` replaces the whole document), write it back
# atomically (0600). Example: ws_edit 'c["hosts"]["lab1"]["allow"] = "L3"'
ws_edit() {
    [[ -n $WS ]] || fail "ws_edit: no workspace (call lab_start first)"
    "$RX_PYTHON" - "$WS/rexec.json" "$@" <<'PY' || fail "ws_edit failed: $1"
import json, os, sys
path, code, args = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(path, encoding="utf-8") as f:
    c = json.load(f)
g = {"c": c, "json": json, "args": args}
exec(code, g)
tmp = path + ".tmp"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w", encoding="utf-8") as f:
    json.dump(g["c"], f, indent=2)
    f.write("\n")
os.replace(tmp, path)
PY
}

# ws_add_action NAME JSON: add (or replace) the catalog action NAME, given as a JSON object.
# Example: ws_add_action t.false '{"risk": "L0", "command": "false"}'
ws_add_action() {
    ws_edit 'c.setdefault("actions", {})[args[0]] = json.loads(args[1])' "$1" "$2"
}

# ws_set_json [JSON]: replace rexec.json with JSON (the argument, else stdin). The lab's "hosts"
# are kept when JSON has no "hosts" key.
ws_set_json() {
    local doc
    if [[ $# -gt 0 ]]; then doc=$1; else doc=$(cat); fi
    ws_edit '
new = json.loads(args[0])
if "hosts" not in new:
    new["hosts"] = c["hosts"]
c = new' "$doc"
}

# ws_get PYEXPR: print the value of PYEXPR over the dict `c` (strings raw, other values as JSON).
# Example: ws_get 'c["hosts"]["lab1"]["port"]'
ws_get() {
    [[ -n $WS ]] || fail "ws_get: no workspace (call lab_start first)"
    "$RX_PYTHON" - "$WS/rexec.json" "$1" <<'PY' || fail "ws_get failed: $1"
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    c = json.load(f)
v = eval(sys.argv[2], {"c": c, "json": json})
print(v if isinstance(v, str) else json.dumps(v))
PY
}

# ---------------------------------------------------------------------------------------------
# the "VM" (this machine, seen through the lab)

# remote_pgrep ERE: pids (one a line) of processes owned by the lab user that were started through
# the lab's sshd — descendants of its listeners, and processes that left that tree (setsid,
# daemons) but carry the lab's id in their environment — whose command line (arguments joined by
# spaces) matches the extended regex ERE. sshd's own processes are not listed. Status 1 if none.
remote_pgrep() {
    lab ps "$1" | cut -d' ' -f1
}

# has_remote ERE / no_remote ERE: whether a process of the lab's matches (for wait_until).
has_remote() { remote_pgrep "$1" >/dev/null; }
no_remote() { ! remote_pgrep "$1" >/dev/null; }

# make_test_users NAME...: system users of this test's own (no home, no login shell); skips
# without root, useradd, userdel or setpriv. Other tests add users too, and useradd fails while
# one of them holds /etc/passwd's lock: it is tried again. remove_test_users (from the test's
# EXIT trap, once what runs as them has stopped) deletes them.
RX_USERS_MADE=()
make_test_users() {
    local t u
    [[ $(id -u) == 0 ]] || skip "needs root to create its users"
    for t in useradd userdel setpriv; do
        command -v "$t" >/dev/null 2>&1 || skip "needs $t"
    done
    for u in "$@"; do
        poll_until 60 useradd --system --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin "$u" 2>>"$RX_TMP/useradd.err" ||
            fail "useradd $u: $(cat "$RX_TMP/useradd.err")"
        RX_USERS_MADE+=("$u")
    done
}

remove_test_users() {
    local u
    for u in ${RX_USERS_MADE[@]+"${RX_USERS_MADE[@]}"}; do
        poll_until 60 userdel "$u" 2>/dev/null || echo "cleanup: userdel $u failed" >&2
    done
}

# RX_SHELL_RE: the command line of the shell a channel runs (a call's wrapper, a runner, a check):
# `bash -c 'LC_ALL=C IFS= read -r -N <bytes> __rx_s || exit 255; eval ...'` (docs/remote-contract.md,
# "The script in one read"); its subshells (a wrapper's watchdog) show the same line.
RX_SHELL_RE='^bash -c LC_ALL=C IFS= read -r -N [0-9]+ __rx_s '

# RX_SLOT_RE: a runner's slot on the VM (`bash DIR/slot DIR K ...`; its forks have the same
# command line). proc_blocked PID FD: PID is blocked in a read of FD (from /proc/PID/syscall, or
# its wchan where Yama hides that). proc_cmdline PID: its command line, NULs as spaces.
RX_SLOT_RE='^bash /[^ ]*/\.rexec-[0-9]+/r\.[^ /]*/slot '
_RX_READ_NR=$(case $(uname -m) in x86_64) echo 0 ;; aarch64) echo 63 ;; *) echo x ;; esac)
proc_blocked() {
    local sc
    if [[ $_RX_READ_NR != x ]] && read -r sc <"/proc/$1/syscall" 2>/dev/null; then
        [[ $sc == "$_RX_READ_NR 0x$2 "* ]]
    else
        read -r sc <"/proc/$1/wchan" 2>/dev/null && [[ $sc == *pipe_read ]]
    fi
}
proc_cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null; }

# session_shells: those shells that sshd started (a call's wrapper or a runner), not their
# subshells (a wrapper's watchdog shows the same command line, but is a child of the wrapper).
session_shells() {
    local p pp
    for p in $(remote_pgrep "$RX_SHELL_RE"); do
        pp=$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null) || continue
        [[ $(cat "/proc/$pp/comm" 2>/dev/null) == sshd* ]] && echo "$p"
    done
    return 0
}

# established_conns PORT: the number of ESTABLISHED TCP connections to 127.0.0.1:PORT (client side).
established_conns() {
    ss -Htn state established "( dport = :$1 and dst 127.0.0.1 )" | wc -l
}

# ---- reading results -------------------------------------------------------------------------

json() {  # json FIELD: a field of the --json object in $OUT (strings bare, the rest as JSON)
    "$RX_PYTHON" - "$OUT" "$1" <<'PY'
import json, sys
v = json.loads(open(sys.argv[1]).readline())[sys.argv[2]]
print(v if isinstance(v, str) else json.dumps(v))
PY
}

audit_field() {  # audit_field PHASE FIELD: FIELD of the PHASE record of the run in $OUT
    "$RX_PYTHON" - "$WS/audit/audit.log" "$(json run_id)" "$1" "$2" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in recs if x["run_id"] == sys.argv[2] and x["phase"] == sys.argv[3]]
assert len(r) == 1, (sys.argv[2:], r)
v = r[0][sys.argv[4]]
print(v if isinstance(v, str) else json.dumps(v))
PY
}

cap() {  # cap CONTAINMENT: caps lab1's containment ("" removes the cap)
    ws_edit 'h = c["hosts"]["lab1"]
if args[0]: h["containment"] = args[0]
else: h.pop("containment", None)' "$1"
}
