#!/usr/bin/env bash
# Oneshot calls in a fork of the runner's slot (docs/remote-contract.md, "Oneshot calls in a
# fork of the slot"), through `rexec serve` and sshd:
#  - a oneshot command that may run in a fork (`env`, `find /proc/self/fd ...`, `sh -c '...'`
#    with a cwd) sees the same environment (sorted, without `_` and SHLVL, which an exec'd
#    command sees one lower also in a fresh shell), the same open descriptors, the same working
#    directory, umask and limits as the same command made non-oneshot (`CMD; :`), which runs
#    in a fresh call shell; a secret of the call is there in both, redacted;
#  - once its slots ran oneshot calls, what a runner's slots start in advance for the next call
#    is a fork of themselves, not a fresh bash, and a fresh bash again after other calls (in a
#    PID namespace; under process-group containment the slots start fresh shells as before,
#    and calls give the same results).
tid="runner: oneshot calls in a fork of the slot"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'

printf 'rxs-%s-tail' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$WS/secrets/tok"
chmod 600 "$WS/secrets/tok"
ws_edit 'c["secrets"]["FORK_TOKEN"] = {"file": "secrets/tok"}'
# each probe twice: oneshot (may run in a fork) and not (": " after it: a fresh call shell)
add_probe() { # NAME COMMAND [CWD]
    ws_edit 'c["actions"][args[0]] = {"risk": "L0", "command": args[1], "secrets": ["FORK_TOKEN"]}
if args[2]: c["actions"][args[0]]["cwd"] = args[2]' "t.$1" "$2" "${3:-}"
    ws_edit 'c["actions"][args[0]] = {"risk": "L0", "command": args[1] + "; :", "secrets": ["FORK_TOKEN"]}
if args[2]: c["actions"][args[0]]["cwd"] = args[2]' "t.$1.fresh" "$2" "${3:-}"
}
add_probe env 'env'
add_probe fds "find /proc/self/fd/ -mindepth 1 -maxdepth 1 -printf '%f %l\\n'"
add_probe cwd "sh -c 'pwd; umask; ulimit -a; test -n \"\$FORK_TOKEN\" && echo token'" /usr
ws_add_action t.uname '{"risk": "L0", "command": "uname -a"}'

# norm PROBE OUTPUT: what both runs must agree on
norm() {
    case $1 in
    env) grep -Ev '^(_|SHLVL)=' <<<"$2" | sort ;;
    fds) grep -v ' /proc/' <<<"$2" | sort ;;
    *) printf '%s\n' "$2" ;;
    esac
}

# What the slots of the one runner started in advance for their next call, once each waits
# for it (blocked in a read of their FIFO n<k>, fd 4, which each reaches only after it started
# that and told the runner it is ready: a call then goes to slot 0) and each such process is
# ready: "K:bash" (slot K has a fresh call's shell, exec'd) or "K:fork" (a fork of the slot,
# blocked in a read of g<k>, fd 7). A read is told from /proc/PID/syscall (read is
# 0 on x86_64, 63 on aarch64), or where Yama keeps that to the process's ancestors, from its
# wchan: the only pipes these block in a read of are those.
waiters_ready() { # writes the sorted kinds to $RX_TMP/kinds; 1 if not ready
    local s k pp slots=() kinds=()
    for s in $(remote_pgrep "$RX_SLOT_RE"); do
        pp=$(awk '{ print $4 }' "/proc/$s/stat" 2>/dev/null) || return 1
        [[ $(proc_cmdline "$pp") =~ $RX_SLOT_RE ]] || slots+=("$s") # (not a fork of a slot)
    done
    [[ ${#slots[@]} -ge 1 ]] || return 1
    for s in "${slots[@]}"; do proc_blocked "$s" 4 || return 1; done
    for s in "${slots[@]}"; do
        pp=$(proc_cmdline "$s") && pp=${pp#bash /*/slot /* } && pp=${pp%% *} # the slot's number
        for k in $(cat "/proc/$s/task/$s/children" 2>/dev/null); do
            if [[ $(proc_cmdline "$k") == "bash -c "* ]]; then
                kinds+=("$pp:bash")
            elif [[ $(proc_cmdline "$k") =~ $RX_SLOT_RE ]] && proc_blocked "$k" 7 && [[ $(proc_cmdline "$k") =~ $RX_SLOT_RE ]]; then
                kinds+=("$pp:fork") # (read again: a fresh shell's, before its exec, is the slot's)
            else
                return 1
            fi
        done
    done
    printf '%s\n' "${kinds[@]}" | sort | paste -sd' ' >"$RX_TMP/kinds"
}
waiters() { wait_until 30 waiters_ready; cat "$RX_TMP/kinds"; }

for cont in pid-namespace process-group; do
    [[ $cont == pid-namespace ]] || ws_edit 'c["hosts"]["lab1"]["containment"] = "process-group"'
    start_serve
    # (the first call to a host takes a channel of its own; then one runner, two slots)
    calls t.uname:6 >"$OUT" || fail "$cont: warm-up: $(cat "$OUT")"
    for probe in env fds cwd; do
        mapfile -t res < <(calls "t.$probe" "t.$probe" "t.$probe.fresh")
        [[ ${#res[@]} == 3 ]] || fail "$cont: $probe: ${#res[@]} results"
        assert_eq "$cont" "$(field "${res[0]}" containment)" "$cont: $probe: containment"
        want=$(norm "$probe" "$(field "${res[2]}" stdout)")
        [[ $want == *REDACTED:FORK_TOKEN* || $want == *token* || $probe == fds ]] ||
            fail "$cont: $probe: the secret is not in its call: $want"
        for i in 0 1; do
            assert_eq 0 "$(field "${res[$i]}" exit_code)" "$cont: $probe: exit code"
            got=$(norm "$probe" "$(field "${res[$i]}" stdout)")
            [[ $got == "$want" ]] ||
                fail "$cont: $probe: the oneshot command saw other than in a fresh shell:$(diff <(echo "$want") <(echo "$got"))"
        done
    done
    calls t.uname:4 >"$OUT" || fail "$cont: $(cat "$OUT")"
    if [[ $cont == pid-namespace ]]; then
        # each call once the slots wait: it goes to slot 0, whose next shell then shows
        for i in 1 2; do waiters >/dev/null && calls t.uname >"$OUT" || fail "$cont: $(cat "$OUT")"; done
        [[ " $(waiters)" == *" 0:fork"* ]] || fail "$cont: after oneshot calls slot 0 has waiting: $(waiters)"
        waiters >/dev/null && calls t.env.fresh >"$OUT" || fail "$cont: $(cat "$OUT")"
        [[ " $(waiters)" == *" 0:bash"* ]] || fail "$cont: after another call slot 0 has waiting: $(waiters)"
    fi
    stop_serve
done
pass
