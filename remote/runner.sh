# rexec remote runner: one long-lived `bash -s` per channel that runs call after call.
# See docs/remote-contract.md ("The runner") for the whole protocol. In short:
#
# The controller sends this file after wrapper.sh (whose __rx_userns_ok and __rx_pick it uses),
# preceded by `__rx_rnonce=<hex> __rx_max_rank=<n>` and followed by the line `__rx_runner; exit`.
# The runner answers one line on stdout, `\036rexec-runner:<rnonce>:ready <containment>` (or
# `... :none <why>`, then it exits having read nothing more), and then reads frames:
#   C <nonce> <min_rank> <stdin_len> <code_len>\n<code bytes><stdin bytes>
#   K\n                                   stop the running call (timeout or cancel)
# EOF stops everything. A call is acknowledged by `\036rexec:<nonce>:start` on stderr as soon as
# its header is read. Each call ends with `\036rexec:<nonce>:end` on stdout and
# `\036rexec:<nonce>:end <phase> <rc> 0 <containment> <killed> <started>` on stderr, both written
# after every process of the call is gone.
#
# Processes: a call runs in a "spare" started in the background right after the previous call
# was handed over, so no process start is on a call's path. A spare is
#   S  (a subshell of the runner)  reads its slot's FIFO n<k> ("n <nonce>", or "quit", or EOF
#                                  when the runner is gone), waits for the contained shell
#                                  (SIGUSR1 from the runner kills it), prints the end markers
#   unshare --pid --fork --kill-child -> bash (PID 1) -> bash -c "$__rx_ns" (the call's shell),
#                                  waiting to open FIFO c<k>; reads the call's code from it and
#                                  evals it: the exports live only in this shell
# Where there is no PID namespace, `setsid bash -c` (its own process group) takes its place.
# Both are started under `setpriv --pdeathsig KILL` where setpriv exists: if S is killed, they
# go too.
# The runner keeps nothing of a call: the code (with the exports) passes through one local
# variable that is unset before the next spare is forked.

# The contained shell: reads the code (NUL-terminated) from the FIFO named by $1, then runs it.
# Its variables, traps, options, functions, cwd and umask are those of a fresh bash.
__rx_ns='IFS= read -r -d "" __c <"$1"; set --; eval "$__c"'

# In a PID namespace the contained shell is not PID 1 (which ignores every signal it has no
# handler for, so `kill $$` would do nothing): PID 1 is a shell that waits for it.
__rx_init='bash -c "$1" rexec "$2"; exit $?'

__rx_kill_call() { # pid of unshare (or of the process group leader)
    [ -n "$1" ] || return 0
    if [ "$__rx_cont" = pid-namespace ]; then
        kill -KILL "$1" 2>/dev/null # --kill-child: its death kills the namespace's init
    else
        kill -KILL -- "-$1" 2>/dev/null || kill -KILL "$1" 2>/dev/null
    fi
}

# What a process group leaves behind goes with it; wait (without a process: read -t on a FIFO
# nobody writes) until the group is empty, at most about a second.
__rx_reap_group() {
    local i=0
    [ "$__rx_cont" = pid-namespace ] && return 0
    kill -KILL -- "-$1" 2>/dev/null || return 0
    while kill -0 -- "-$1" 2>/dev/null && [ $((i += 1)) -lt 200 ]; do
        read -r -t 0.005 -u 5 _ 2>/dev/null
    done
}

# S: the spare of slot $1. Starts the contained shell, waits for the call's nonce ("n <nonce>"
# on FIFO n<k>), then waits for the contained shell; SIGUSR1 from the runner (K) kills it. At
# "quit" or EOF (the runner is gone) before the nonce, it kills what it started and ends.
__rx_spare() {
    local k=$1 line rc u nonce= killed=0 st= phase started=0
    trap 'killed=1; __rx_kill_call "$u"' USR1
    exec 5<>"$__rx_dir/s$k" 4<"$__rx_dir/n$k"
    if [ "$__rx_cont" = pid-namespace ]; then
        "${__rx_guard[@]}" "${__rx_pre[@]}" bash -c "$__rx_init" rexec "$__rx_ns" "$__rx_dir/c$k" \
            4<&- 5<&- &
    else
        "${__rx_guard[@]}" "${__rx_pre[@]}" bash -c "$__rx_ns" rexec "$__rx_dir/c$k" 4<&- 5<&- &
    fi
    u=$!
    while IFS= read -r -u 4 line; do
        case $line in
        "n "*) nonce=${line#n }; break ;;
        *) break ;;
        esac
    done
    exec 4<&-
    if [ -z "$nonce" ]; then __rx_kill_call "$u"; return 0; fi
    # wait returns early when the USR1 trap runs; the call is over once kill -0 fails.
    wait "$u" 2>/dev/null; rc=$?
    while kill -0 "$u" 2>/dev/null; do wait "$u" 2>/dev/null; rc=$?; done
    if [ "$killed" = 1 ] && [ "$rc" = 138 ]; then wait "$u" 2>/dev/null; rc=$?; fi
    read -r -t 0 -u 5 && read -r -u 5 st
    __rx_reap_group "$u"
    [ ! -s "$__rx_dir/in" ] || : >"$__rx_dir/in" # the call's stdin is not left behind
    case $st in
    ok) phase=cmd started=1 ;;
    cd | stdin) phase=$st ;;
    *) phase=setup ;;
    esac
    printf '\036rexec:%s:end\n' "$nonce"
    printf '\036rexec:%s:end %s %s 0 %s %s %s\n' "$nonce" "$phase" "$rc" "$__rx_cont" \
        "$killed" "$started" >&2
}

# Starts the spare of slot $1. The runner keeps n<k> open read-write: S's open never blocks, a
# write to an S that is gone never raises SIGPIPE, and when the runner dies S reads EOF.
__rx_spawn() {
    case $1 in
    0) exec 20>&- 22>&- 20<>"$__rx_dir/n0" ;;
    1) exec 21>&- 23>&- 21<>"$__rx_dir/n1" ;;
    esac
    __rx_spare "$1" </dev/null 7<&- 20>&- 21>&- 22>&- 23>&- &
    __rx_spare_pid=$!
}

__rx_send() { # slot line
    case $1 in
    0) printf '%s\n' "$2" >&20 ;;
    1) printf '%s\n' "$2" >&21 ;;
    esac
}

__rx_marks() { # nonce phase rc (a call that never reached a spare)
    printf '\036rexec:%s:end\n' "$1"
    printf '\036rexec:%s:end %s %s 0 %s 0 0\n' "$1" "$2" "$3" "$__rx_cont" >&2
}

# Exactly $1 bytes of code from the channel (in the C locale a character is a byte; the code
# holds no NUL). Sets code in the caller.
__rx_read_code() {
    local LC_ALL=C
    IFS= read -r -N "$1" -u 7 code 2>/dev/null
    [ "${#code}" = "$1" ]
}

# One call frame: "C nonce min_rank stdin_len code_len" was read into $@.
__rx_call() {
    local nonce=$2 min=$3 inlen=$4 clen=$5 code in= s=$__rx_next
    case "$nonce/$min/$inlen/$clen" in
    *[!0-9a-f/-]* | *//* | */ | /*) return 1 ;;
    esac
    # The acknowledgement: the controller's set-up deadline (a frozen peer) ends here.
    printf '\036rexec:%s:start\n' "$nonce" >&2
    __rx_read_code "$clen" || return 1
    if [ "$inlen" -ge 0 ]; then
        in=$__rx_dir/in
        head -c "$inlen" <&7 >"$in" || return 1
        # Nothing follows the stdin bytes until the call ends, so a readable channel now is a
        # kill line (cancel) or EOF, maybe cutting the stdin short: the call does not start.
        if read -r -t 0 -u 7; then
            : >"$in"
            __rx_marks "$nonce" cancel 1
            return 0
        fi
    fi
    if [ "$__rx_rank" -lt "$min" ]; then
        code=
        [ -z "$in" ] || : >"$in"
        __rx_marks "$nonce" contain 1
        return 0
    fi
    case $s in
    0) exec 22<>"$__rx_dir/c0"; printf '__rx_st=%q __rx_in=%q\n%s\0' "$__rx_dir/s0" "$in" "$code" >&22 ;;
    1) exec 23<>"$__rx_dir/c1"; printf '__rx_st=%q __rx_in=%q\n%s\0' "$__rx_dir/s1" "$in" "$code" >&23 ;;
    esac
    code=
    unset code
    __rx_send "$s" "n $nonce"
    __rx_cur_pid=$__rx_spare_pid __rx_next=$((1 - s))
    __rx_spawn "$__rx_next"
}

# What a runner killed together with its spare can leave behind, when the parent-death signal
# came too late or the VM has no setpriv: a contained shell blocked opening its FIFO, which
# nobody will open for writing any more. Each runner that starts ends those of the same user's
# dead runners (the runner's pid is in "owner"): "exit 0" on the FIFO unblocks the shell, which
# runs it; then the directory goes.
__rx_sweep() {
    local d o f
    for d in "${TMPDIR:-/tmp}"/.rexec-runner.*; do
        [ -d "$d" ] && [ -O "$d" ] && [ "$d" != "$__rx_dir" ] || continue
        o=
        read -r o 2>/dev/null <"$d/owner"
        case $o in '' | *[!0-9]*) continue ;; esac
        ! kill -0 "$o" 2>/dev/null || continue
        for f in "$d/c0" "$d/c1"; do
            [ ! -p "$f" ] || printf 'exit 0\0' 2>/dev/null 1<>"$f"
        done
        rm -rf -- "$d"
    done
    return 0
}

__rx_runner_setup() {
    __rx_pick
    # If S itself is SIGKILLed (with the runner: a whole `bash -s` pair killed on the VM), what
    # it started must not wait for ever on its FIFO: setpriv's parent-death signal, kept across
    # exec, kills unshare (and with it the namespace) or the contained shell when S dies.
    __rx_guard=()
    if command -v setpriv >/dev/null 2>&1 && setpriv --pdeathsig KILL true </dev/null >/dev/null 2>&1; then
        __rx_guard=(setpriv --pdeathsig KILL)
    fi
    if [ "$__rx_rank" -ge 3 ] && ! "${__rx_pre[@]}" true </dev/null >/dev/null 2>&1; then
        __rx_cont=process-group __rx_rank=1 __rx_pre=()
    fi
    if [ "$__rx_rank" -lt 3 ]; then
        __rx_pre=()
        command -v setsid >/dev/null 2>&1 && __rx_pre=(setsid)
    fi
    __rx_dir=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/.rexec-runner.XXXXXXXX" 2>/dev/null) &&
        [ -n "$__rx_dir" ] &&
        mkfifo -m 600 "$__rx_dir/c0" "$__rx_dir/c1" "$__rx_dir/n0" "$__rx_dir/n1" \
            "$__rx_dir/s0" "$__rx_dir/s1" 2>/dev/null &&
        (umask 077 && : >"$__rx_dir/in" && printf '%s\n' "$$" >"$__rx_dir/owner") &&
        __rx_sweep # "in": where a call's stdin is staged, private; "owner": for __rx_sweep
}

__rx_runner() {
    local hdr
    exec 7<&0 </dev/null
    if ! __rx_runner_setup; then
        printf '\036rexec-runner:%s:none setup\n' "$__rx_rnonce"
        [ -z "$__rx_dir" ] || rm -rf -- "$__rx_dir"
        return
    fi
    __rx_cur_pid= __rx_next=0
    __rx_spawn 0
    printf '\036rexec-runner:%s:ready %s\n' "$__rx_rnonce" "$__rx_cont"
    while IFS= read -r -u 7 hdr; do
        case $hdr in
        K) [ -z "$__rx_cur_pid" ] || kill -USR1 "$__rx_cur_pid" 2>/dev/null ;;
        "C "*) __rx_call $hdr || break ;;
        *) break ;;
        esac
    done
    # EOF (or a frame that makes no sense): stop the call and the spare, and go.
    [ -z "$__rx_cur_pid" ] || kill -USR1 "$__rx_cur_pid" 2>/dev/null
    __rx_send "$__rx_next" quit
    exec 20>&- 21>&- 22>&- 23>&-
    rm -rf -- "$__rx_dir"
}
