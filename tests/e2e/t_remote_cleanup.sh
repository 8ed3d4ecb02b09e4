#!/usr/bin/env bash
# The remote contract: nothing outlives a call (docs/remote-contract.md).
#  - background children, with and without stdout, are gone when the call returns, and a child
#    holding stdout does not keep the call open;
#  - under pid-namespace, setsid and nested-timeout escapees die too; a host capped to
#    process-group reports process-group, and there such an escapee survives (the documented
#    limit of that level);
#  - the caller cancelling (SIGINT to rexec: exit 130), rexec killed outright (kill -9) and the
#    connection dropped on the server side (lab drop) each stop the remote command.
# Every run is under `timeout 20`, so a hang fails the test instead of hanging CI.
tid="remote: nothing outlives a call"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c["hosts"]["lab1"]["allow"] = "L0"'

# ---- helpers ---------------------------------------------------------------------------------

# json FIELD: a field of the --json object in $OUT (strings raw, others as JSON).

# exited PID: PID (a child of this shell) has exited: gone, or a zombie waiting to be reaped.
exited() {
    local st
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 0
    [[ -z $st || $st == Z ]]
}

# cap LEVEL: the host's containment cap ("" removes it: the VM's best).

# A fifo handshake makes each escape deterministic: the escapee writes to it only after setsid()
# (or timeout's own setpgid()) has happened, and the command waits for that line.
ws_add_action t.bg '{"risk": "L0", "command": "sleep 301 & echo started"}'
ws_add_action t.bgnull '{"risk": "L0", "command": "sleep 302 >/dev/null 2>&1 </dev/null & echo started"}'
ws_add_action t.setsid '{"risk": "L0", "command": "f=$(mktemp -u) && mkfifo \"$f\" && { setsid sh -c '"'"'echo x >\"$1\"; exec sleep 303'"'"' _ \"$f\" & read -r _ <\"$f\"; rm -f \"$f\"; echo escaped; }"}'
ws_add_action t.nested '{"risk": "L0", "command": "f=$(mktemp -u) && mkfifo \"$f\" && { timeout 300 sh -c '"'"'echo x >\"$1\"; exec sleep 304'"'"' _ \"$f\" >/dev/null 2>&1 & read -r _ <\"$f\"; rm -f \"$f\"; echo escaped; }"}'
ws_add_action t.long '{"risk": "L0", "command": "echo go; exec sleep 305"}'

# ---- background children ---------------------------------------------------------------------

for level in "" process-group; do
    cap "$level"
    want=${level:-pid-namespace}
    # holding stdout: the call still returns, and the child is gone
    assert_exit 0 timeout 20 "$REXEC_BIN" --workspace "$WS" run lab1 t.bg --json
    assert_eq started "$(json stdout | tr -d '\n')" "t.bg stdout ($want)"
    assert_eq "$want" "$(json containment)" "t.bg containment"
    wait_until 10 no_remote '^sleep 301$'
    # not holding stdout: same
    assert_exit 0 timeout 20 "$REXEC_BIN" --workspace "$WS" run lab1 t.bgnull --json
    assert_eq "$want" "$(json containment)" "t.bgnull containment"
    wait_until 10 no_remote '^sleep 302$'
done

# ---- escapees: setsid and a nested timeout ---------------------------------------------------

cap ""
for a in t.setsid t.nested; do
    assert_exit 0 timeout 20 "$REXEC_BIN" --workspace "$WS" run lab1 "$a" --json
    assert_eq escaped "$(json stdout | tr -d '\n')" "$a stdout"
    assert_eq pid-namespace "$(json containment)" "$a containment"
done
# init of the namespace is gone, so is every process in it
wait_until 10 no_remote '^sleep 30[34]$'

# Capped to process-group: reported as such, and an escapee that left the process group is
# beyond its reach (it holds stdout too: the call still returns, after the drain period).
cap process-group
assert_exit 0 timeout 20 "$REXEC_BIN" --workspace "$WS" run lab1 t.setsid --json
assert_eq escaped "$(json stdout | tr -d '\n')" "t.setsid stdout (process-group)"
assert_eq process-group "$(json containment)" "t.setsid containment (process-group)"
escapee=$(remote_pgrep '^sleep 303$') || fail "process-group: the setsid escapee did not survive (has this level become stronger? update docs/remote-contract.md)"
kill -KILL $escapee
wait_until 10 no_remote '^sleep 303$'

# ---- the caller cancels, rexec dies, the connection drops ------------------------------------

for level in "" process-group; do
    cap "$level"
    # SIGINT (Ctrl-C): rexec stops the remote command and exits 130
    "$REXEC_BIN" --workspace "$WS" run lab1 t.long >"$OUT" 2>"$ERR" &
    pid=$!
    wait_until 15 has_remote '^sleep 305$'
    kill -INT "$pid"
    wait_until 10 exited "$pid"
    rc=0; wait "$pid" || rc=$?
    assert_eq 130 "$rc" "exit status after SIGINT (${level:-pid-namespace})"
    assert_eq go "$(cat "$OUT")" "stdout before SIGINT"
    assert_contains "$ERR" "cancelled"
    wait_until 10 no_remote '^sleep 305$'

    # kill -9 of rexec: sshd sees the connection close, closes the channel, the wrapper sees EOF
    "$REXEC_BIN" --workspace "$WS" run lab1 t.long >"$OUT" 2>"$ERR" &
    pid=$!
    wait_until 15 has_remote '^sleep 305$'
    kill -KILL "$pid"
    { wait "$pid"; } 2>/dev/null || true
    wait_until 30 no_remote '^sleep 305$'

    # the call's shell (the wrapper, sshd's child) killed on the VM: sshd closes the
    # channel's stdin, and the watchdog, finding the wrapper gone, kills the command itself
    "$REXEC_BIN" --workspace "$WS" run lab1 t.long >"$OUT" 2>"$ERR" &
    pid=$!
    wait_until 15 has_remote '^sleep 305$'
    wrapper=$(session_shells)
    [[ -n $wrapper ]] || fail "no wrapper shell under sshd (${level:-pid-namespace})"
    kill -KILL $wrapper
    poll_until 20 no_remote '^sleep 305$' ||
        fail "wrapper killed (${level:-pid-namespace}): left on the VM: $(lab ps '.')"
    wait_until 30 exited "$pid"
    { wait "$pid"; } 2>/dev/null || true

    # the server side of the connection dies (lab drop): rexec reports a lost connection (255),
    # and the wrapper's watchdog sees EOF on its stdin and stops the command
    "$REXEC_BIN" --workspace "$WS" run lab1 t.long >"$OUT" 2>"$ERR" &
    pid=$!
    wait_until 15 has_remote '^sleep 305$'
    lab drop lab1 >/dev/null
    wait_until 20 exited "$pid"
    rc=0; wait "$pid" || rc=$?
    assert_eq 255 "$rc" "exit status after lab drop (${level:-pid-namespace})"
    wait_until 30 no_remote '^sleep 305$'
done

# Nothing at all is left of any of these calls.
wait_until 10 no_remote 'sleep 30[0-9]'
pass
