#!/usr/bin/env bash
# Runners (remote/runner.sh): calls through one `rexec serve` reuse one long-lived shell (`bash -c`, the script in one read).
#  - a secret exported by one call is not found by the next ones (env, set, declare -p,
#    /proc/*/environ, files in $TMPDIR), while the same search inside the secret's own call finds it;
#  - 300 calls on one runner leave no process behind but the runner's own;
#  - output shaped like a marker (any nonce) does not end a call early;
#  - a runner killed mid-call fails that call with 255, the call is not re-run, the next call
#    gets a fresh runner; when serve stops, nothing is left on the VM;
#  - "runner": false: calls take a channel each and nothing stays on the VM between calls;
#  - a simple command is exec'd by the call's shell (its parent is the slot), a compound one
#    is not.
tid="runner: isolation, 300 calls, markers, death, runner:false"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
# The runners' directory of this test's own: its sweep checks below plant dead runners' leftovers
# that a runner of another test's lab, started meanwhile, would otherwise sweep first.
mkdir -m 700 "$RX_TMP/vmtmp"
lab_set_tmpdir lab1 "$RX_TMP/vmtmp"
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'

no_remote_left() { ! remote_pgrep '.' >/dev/null; }

# The secret: a random needle inside it. The searching command names only the needle.
needle=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'rxs-%s-tail' "$needle" >"$WS/secrets/tok"
chmod 600 "$WS/secrets/tok"
ws_edit 'c["secrets"]["RUNNER_TOKEN"] = {"file": "secrets/tok"}'
search="{ env; set; declare -p; cat /proc/[0-9]*/environ; grep -rasF $needle \${TMPDIR:-/tmp}/.rexec-*; } 2>/dev/null | grep -caF $needle"
ws_add_action t.withsecret "{\"risk\": \"L0\", \"secrets\": [\"RUNNER_TOKEN\"],
  \"command\": \"x=\$RUNNER_TOKEN; cd /; umask 077; trap 'echo trapped' EXIT; set -o noglob; f() { :; }; $search\"}"
ws_add_action t.look "{\"risk\": \"L0\", \"command\": \"$search; pwd; umask; trap -p; [[ -o noglob ]] && echo noglob; declare -F\"}"
ws_add_action t.ok '{"risk": "L0", "command": "echo ok"}'
# marker-shaped output with made-up nonces, on both streams, then more output
ws_add_action t.fake '{"risk": "L0", "command": "n=0123456789abcdef0123456789abcdef; for s in 1 2; do printf \"\\036rexec:%s:end\\n\\036rexec:%s:end cmd 0 0 none 0 1\\n\" $n $n >&$s; done; printf \"\\036rexec-runner:x:ready y\\n\"; echo after; echo after-err >&2; exit 3"}'
# a background child and a setsid escapee; a call that times out with a background child.
# t.bg answers only once the escapee has left the call's session (it writes a flag after
# setsid(), then becomes `sleep`): else, on a loaded machine, the call's end can kill it before
# setsid() and the process-group case below would find no escapee. ($! can't be looked up in
# /proc: in a PID namespace it is the namespace's number and /proc is the VM's.)
ws_add_action t.bg '{"risk": "L0", "command": "f=$(mktemp); sleep 2719 & setsid bash -c \u0027echo x >\"$0\"; exec sleep 2720\u0027 \"$f\" </dev/null >/dev/null 2>&1 & for i in $(seq 1000); do [ -s \"$f\" ] && break; sleep 0.01; done; rm -f \"$f\"; echo bg"}'
ws_add_action t.slow '{"risk": "L0", "timeout_s": 1, "command": "echo s; sleep 2721 & sleep 2722"}'
# who started the command: sh prints its parent's pid and command line. A simple command is
# exec'd by the call's shell (src/shell/oneshot.c), so its parent is the slot (PID 1 of a PID
# namespace); anything else is forked by the call's shell (bash -c ...), as before.
parent_cmd="sh -c 'echo \$PPID; tr \"\\\\0\" \" \" </proc/\$PPID/cmdline'"
ws_edit 'c["actions"]["t.parent"] = {"risk": "L0", "command": args[0]}' "$parent_cmd"
ws_edit 'c["actions"]["t.parent2"] = {"risk": "L0", "command": args[0] + "; true"}' "$parent_cmd"
RUNS=$RX_TMP/runs
ws_edit 'c["actions"]["t.hold"] = {"risk": "L0", "command": "echo run >>" + args[0] + "; exec sleep 2718"}' "$RUNS"

SOCK=$RX_TMP/rexec.sock
start_serve

# ---- isolation -------------------------------------------------------------------------------
# t.look first (a fresh runner's state), then the secret's call, then t.look again: same state.
# (the first call to a host takes a channel of its own; runners start with the second)
mapfile -t res < <(calls t.ok t.look t.withsecret t.look t.look)
[[ ${#res[@]} -eq 5 ]] || fail "isolation: ${#res[@]} results"
res=("${res[@]:1}")
base=$(field "${res[0]}" stdout)
own=$(field "${res[1]}" stdout)
[[ ${own%%$'\n'*} -ge 1 ]] || fail "the search does not find the secret in its own call: $own"
[[ ${base%%$'\n'*} == 0 ]] || fail "the search finds the secret before it was used: $base"
for i in 2 3; do
    assert_eq "$base" "$(field "${res[$i]}" stdout)" "call $i after the secret's: state and traces"
done
runners=$(remote_pgrep "$RX_SHELL_RE" | wc -l)
[[ $runners -ge 1 ]] || fail "no runner on the VM between calls"

# ---- 300 calls on one runner (scripts/bench runs the long soak) -----------------------------------------------------------------
before=$(remote_pgrep '.' | sort)
t0=$(date +%s%N)
calls t.ok:300 >"$OUT" || fail "300 calls: $(cat "$OUT")"
echo "300 calls on one runner: $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
after=$(remote_pgrep '.' | sort)
n_after=$(wc -l <<<"$after")
[[ $(remote_pgrep "$RX_SHELL_RE" | wc -l) -eq $runners ]] || fail "runners: $runners before, now $(remote_pgrep "$RX_SHELL_RE" | wc -l)"
# between calls: each runner (R) and its two slots (unshare, the slot's bash, the next call's
# waiting shell), nothing else
[[ $n_after -le $((runners * 7)) ]] || fail "after 300 calls, on the VM: $(lab ps '.')"
lab ps '.' | grep -Ev ' (bash -c LC_ALL=C IFS= read -r -N [0-9]+ __rx_s .*|unshare --pid --fork --kill-child .*|bash -c .*|bash /[^ ]*/\.rexec-[0-9]+/r\.[^ /]*/slot .*)$' &&
    fail "after 300 calls, processes that are not runners: $(lab ps '.')"

# ---- marker-shaped output ----------------------------------------------------------------------
r=$(calls t.fake)
assert_eq 3 "$(field "$r" exit_code)" "marker-shaped output: exit code"
[[ $(field "$r" stdout) == *after* ]] || fail "marker-shaped output ended the call early: $r"
[[ $(calls t.ok) == *'"stdout": "ok\n"'* ]] || fail "the call after marker-shaped output"

# ---- a runner killed mid-call --------------------------------------------------------------------
calls t.hold >"$OUT" &
cpid=$!
wait_until 30 test -s "$RUNS"
sleep_pid=$(remote_pgrep '^sleep 2718$' | head -n1)
pgid=$(ps -o pgid= -p "$sleep_pid" | tr -d ' ')
kill -KILL -- "-$pgid"
wait "$cpid" || true
assert_eq None "$(field "$(cat "$OUT")" exit_code)" "a runner killed mid-call: no exit code (255)"
[[ $(field "$(cat "$OUT")" error) == *runner* ]] || fail "error: $(cat "$OUT")"
assert_eq True "$(field "$(cat "$OUT")" executed)" "a runner killed mid-call: executed"
[[ $(calls t.ok) == *'"stdout": "ok\n"'* ]] || fail "the call after a runner died"
assert_eq 1 "$(wc -l <"$RUNS")" "runs of the call whose runner died (never re-run)"

# ---- an idle runner SIGKILLed (every session shell, as scripts/soak does) --------------------------
# Its slots' waiting shells wait on FIFOs nobody will write any more: the parent-death signal
# (setpriv) must take each slot's unshare, and with it the slot and its namespace. And what a
# dead runner left anyway (the signal came too late, or the VM has no setpriv; made by hand
# here: a runner directory whose owner is dead, with a call's shell waiting on its FIFO, and a
# shell of a runner whose directory is gone) is swept by the next runner that starts: found
# through /proc by the directory its arguments name, and killed; the directory removed.
cat >"$RX_TMP/orphan.sh" <<'SH'
b=${TMPDIR:-/tmp}/.rexec-$(id -u)
d=$(umask 077 && mktemp -d "$b/r.XXXXXXXX")
mkfifo -m 600 "$d/c0" "$d/g0"
true & dead=$!; wait "$dead"; echo "$dead 1" >"$d/owner"
setsid bash -c 'read -r _ <"$1/g0"; :' rexec-orphan "$d" </dev/null >/dev/null 2>&1 &
setsid bash -c 'read -r _ <>"$2"; :' rexec-orphan "$b/r.gone0000" "$d/c0" </dev/null >/dev/null 2>&1 &
echo "$d"
SH
[[ $(calls t.ok) == *'"stdout": "ok\n"'* ]] || fail "a call before the kill"
orphan_dir=$(lab_ssh lab1 bash -s <"$RX_TMP/orphan.sh")
wait_until 20 bash -c '[[ $("$1" --dir "$2" ps "rexec-orphan" | grep -c .) == 2 ]]' _ "$RX_LAB" "$LAB_DIR"
for p in $(remote_pgrep "$RX_SHELL_RE"); do kill -KILL "$p" 2>/dev/null || true; done
[[ $(calls t.ok) == *'"stdout": "ok\n"'* ]] || fail "the call after the runners were killed"
if command -v setpriv >/dev/null; then # what the killed runner had started went with it
    # the new runner's two slots: unshare, the slot, the waiting shell
    wait_until 20 bash -c '[[ $("$1" --dir "$2" ps "^(unshare|bash -c IFS= |bash /.*/slot) " | grep -c .) -le 6 ]]' \
        _ "$RX_LAB" "$LAB_DIR" ||
        fail "left on the VM after its runner was killed: $(lab ps '.')"
fi
wait_until 20 bash -c '! "$1" --dir "$2" ps "rexec-orphan" >/dev/null' _ "$RX_LAB" "$LAB_DIR" ||
    fail "the new runner did not sweep the orphaned shells: $(lab ps '.')"
lab_ssh lab1 test ! -e "$orphan_dir" || fail "the dead runner's directory $orphan_dir is still there"

# ---- leftovers and deadlines on a runner, under both containments ------------------------------
# A call's background children are gone before its answer (a setsid escapee too, in a PID
# namespace), a timeout kills the call (timed_out, 124) and leaves nothing, and the runner
# takes the next call. Under process-group the setsid escapee survives: the documented limit.
no_sleeps() { ! remote_pgrep '^sleep 27(19|20|21|22)$' >/dev/null; }
for cont in pid-namespace process-group; do
    if [[ $cont == process-group ]]; then
        stop_serve
        wait_until 20 no_remote_left
        ws_edit 'c["hosts"]["lab1"]["containment"] = "process-group"'
        start_serve
    fi
    mapfile -t res < <(calls t.ok t.ok t.bg t.slow t.ok)
    [[ ${#res[@]} -eq 5 ]] || fail "$cont: ${#res[@]} results"
    assert_eq "$cont" "$(field "${res[2]}" containment)" "$cont: the call's containment (${res[2]})"
    assert_eq 0 "$(field "${res[2]}" exit_code)" "$cont: t.bg's exit code"
    assert_eq True "$(field "${res[3]}" timed_out)" "$cont: t.slow timed out"
    assert_eq 124 "$(field "${res[3]}" exit_code)" "$cont: t.slow's exit code"
    [[ $(field "${res[4]}" stdout) == ok* ]] || fail "$cont: the call after the timeout: ${res[4]}"
    remote_pgrep '^sleep 27(19|21|22)$' >/dev/null &&
        fail "$cont: a call's processes outlived it: $(lab ps 'sleep 27')"
    if [[ $cont == pid-namespace ]]; then
        remote_pgrep '^sleep 2720$' >/dev/null && fail "$cont: the setsid escapee outlived its call"
    else
        wait_until 20 remote_pgrep '^sleep 2720$' >/dev/null ||
            fail "$cont: no setsid escapee (the test proves nothing)"
        for p in $(remote_pgrep '^sleep 2720$'); do kill -KILL "$p" 2>/dev/null || true; done
    fi
    no_sleeps || fail "$cont: left on the VM: $(lab ps 'sleep 27')"
    # one process for a simple command: exec'd by the call's shell, not forked
    mapfile -t res < <(calls t.parent t.parent2)
    p1=$(field "${res[0]}" stdout) p2=$(field "${res[1]}" stdout)
    if [[ $cont == pid-namespace ]]; then
        [[ $p1 == $'1\n'* ]] || fail "$cont: a simple command was not exec'd: ${res[0]}"
        [[ $p2 != $'1\n'* && $p2 == [0-9]* ]] ||
            fail "$cont: a compound command did not run under the call's shell: ${res[1]}"
    else
        [[ $p1 == *'/slot '* ]] || fail "$cont: a simple command was not exec'd: ${res[0]}"
        [[ $p2 == *$'\n''bash -c '* ]] ||
            fail "$cont: a compound command did not run under the call's shell: ${res[1]}"
    fi
done
ws_edit 'del c["hosts"]["lab1"]["containment"]'

stop_serve
wait_until 20 no_remote_left

# ---- "runner": false ---------------------------------------------------------------------------
ws_edit 'c["hosts"]["lab1"]["runner"] = False'
start_serve
[[ $(calls t.ok) == *'"stdout": "ok\n"'* ]] || fail "runner:false: the call"
wait_until 20 no_remote_left
stop_serve
pass
