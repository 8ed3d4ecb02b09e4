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
# Processes: the runner (R) keeps two slots and hands calls to them in turn. A slot lives as
# long as the runner:
#   unshare --pid --fork --kill-child -> bash (the slot, PID 1 of its namespace for the runner's
#                                  life) -> bash -c "$__rx_ns" (the next call's shell, started
#                                  in advance, waiting on the slot's FIFOs)
# Where there is no PID namespace the slot is a plain `bash -c`, and the call's shell is
# `setsid bash -c` (its own process group, killed whole at the end). The slot reads its FIFO
# n<k> ("n <nonce>", "k", or "quit"/EOF when the runner is gone), lets the waiting shell go,
# waits for it (SIGUSR1 from the runner kills it), kills whatever the call left, writes the end
# markers and starts the next call's shell: one process start per call, while the other slot
# takes the next call. The slot is started under `setpriv --pdeathsig KILL` where setpriv
# exists: if the runner is killed, the slot and its namespace go too.
# The runner keeps nothing of a call: the code (with the exports) passes through one local
# variable that is unset before the frame's handling ends.

# The call's shell: waits for the slot's go-ahead on the FIFO named by $2 (the slot has then
# taken the nonce off its FIFO, so the command cannot read it there), reads the code from the
# FIFO named by $1 (a line with its length in bytes, then the code: read -N takes it in one
# read where a delimiter would make bash read it a byte at a time), then runs it. Its
# variables, traps, options, functions, cwd and umask are those of a fresh bash.
__rx_ns='read -r _ <"$2"; { read -r __n; LC_ALL=C IFS= read -r -N "$__n" __c; } <"$1"; unset __n; set --; eval "$__c"'

# The slot: `bash DIR/slot DIR K CONTAINMENT [PREFIX...]` (DIR/slot holds these functions and
# __rx_ns), where PREFIX starts the call's shell (setsid under process-group containment). As PID 1 of a namespace
# ($$ = 1) it ends a call's leftovers with kill -1, which there reaches the namespace only;
# otherwise it kills the call's process group.
__rx_slot() {
    local d=$1 k=$2 cont=$3 line c nonce st rc killed incall= phase started
    shift 3
    trap '[ -z "$incall" ] || { killed=1; __rx_slot_kill "$c"; }' USR1
    # fd 8 is the channel's stderr (the call's, and the end marker's); the slot's own stderr is
    # /dev/null, so its kill and wait need no redirection each (each costs syscalls a call).
    exec 4<"$d/n$k" 5<>"$d/s$k" 6<>"$d/g$k" </dev/null 8>&2 2>/dev/null
    while :; do
        "$@" bash -c "$__rx_ns" rexec "$d/c$k" "$d/g$k" 2>&8 4<&- 5<&- 6<&- 8>&- &
        c=$! nonce=
        while IFS= read -r -u 4 line; do
            case $line in
            k) ;; # a kill that came after its call had ended
            "n "*) nonce=${line#n }; break ;;
            *) break ;;
            esac
        done
        if [ -z "$nonce" ]; then __rx_slot_kill "$c"; return 0; fi
        incall=1 killed=0 st= started=0
        # A kill sent before incall was set has left its "k" line behind.
        if read -r -t 0 -u 4; then killed=1; __rx_slot_kill "$c"; else printf 'go\n' >&6; fi
        # wait returns early only when the USR1 trap ran (killed 1); the call is over once
        # kill -0 fails.
        wait "$c"; rc=$?
        if [ "$killed" = 1 ]; then
            while kill -0 "$c"; do wait "$c"; rc=$?; done
            [ "$rc" != 138 ] || { wait "$c"; rc=$?; }
        fi
        incall=
        read -r -t 0 -u 5 && read -r -t 1 -u 5 st
        __rx_slot_reap "$c"
        # Nothing of this call is left for the next one: its stdin, and what its processes
        # might have written to the slot's FIFOs (the runner writes n<k> again only after
        # these markers).
        [ ! -s "$d/in" ] || : >"$d/in"
        while read -r -t 0 -u 4; do read -r -t 0.01 -u 4 _ || break; done
        while read -r -t 0 -u 5; do read -r -t 0.01 -u 5 _ || break; done
        while read -r -t 0 -u 6; do read -r -t 0.01 -u 6 _ || break; done
        case $st in
        ok) phase=cmd started=1 ;;
        cd | stdin) phase=$st ;;
        *) phase=setup ;;
        esac
        printf '\036rexec:%s:end\n' "$nonce"
        printf '\036rexec:%s:end %s %s 0 %s %s %s\n' "$nonce" "$phase" "$rc" "$cont" \
            "$killed" "$started" >&8
    done
}

__rx_slot_kill() { # the call's shell (the slot's stderr is /dev/null)
    if [ "$$" = 1 ]; then
        kill -KILL -1
    else
        kill -KILL -- "-$1" || kill -KILL "$1"
    fi
}

# Waits (without a process: read -t on the slot's own FIFO) until every process of the call is
# gone, at most about a second. In a namespace PID 1 reaps what was reparented to it.
__rx_slot_reap() {
    local i=0
    if [ "$$" = 1 ]; then
        while kill -KILL -1 && [ $((i += 1)) -lt 200 ]; do
            read -r -t 0.005 -u 6 _
        done
    else
        kill -KILL -- "-$1" || return 0
        while kill -0 -- "-$1" && [ $((i += 1)) -lt 200 ]; do
            read -r -t 0.005 -u 6 _
        done
    fi
}

# Starts slot $1. The runner keeps n<k> and c<k> open read-write: the slot's and the call
# shell's opens never block, a write to a slot that is gone never raises SIGPIPE, and when the
# runner dies the slot reads EOF.
__rx_slot_start() {
    case $1 in
    0) exec 20>&- 22>&- 20<>"$__rx_dir/n0" 22<>"$__rx_dir/c0" ;;
    1) exec 21>&- 23>&- 21<>"$__rx_dir/n1" 23<>"$__rx_dir/c1" ;;
    esac
    "${__rx_guard[@]}" "${__rx_pre[@]}" bash "$__rx_dir/slot" "$__rx_dir" "$1" "$__rx_cont" \
        ${__rx_cpre[@]+"${__rx_cpre[@]}"} </dev/null 7<&- 20>&- 21>&- 22>&- 23>&- &
    __rx_sp[$1]=$!
}

__rx_slot_up() { # k: starts slot k if it is not running
    [ -n "${__rx_sp[$1]}" ] && kill -0 "${__rx_sp[$1]}" 2>/dev/null || __rx_slot_start "$1"
}

# Stops the running call: "k" on its slot's FIFO, then SIGUSR1 to the slot (in a namespace, the
# child of unshare). A slot that has not taken its call yet finds the "k" line first.
__rx_kill_cur() {
    local s=$__rx_cur u p=
    [ -n "$s" ] || return 0
    __rx_send "$s" k
    u=${__rx_sp[$s]}
    if [ "$__rx_cont" != pid-namespace ]; then
        p=$u
    elif [ -r "/proc/$u/task/$u/children" ]; then
        read -r p _ 2>/dev/null <"/proc/$u/task/$u/children" # no final newline
    else
        kill -KILL "$u" 2>/dev/null # no children file: the slot and its namespace go
    fi
    [ -z "$p" ] || kill -USR1 "$p" 2>/dev/null
}

__rx_send() { # slot line
    case $1 in
    0) printf '%s\n' "$2" >&20 ;;
    1) printf '%s\n' "$2" >&21 ;;
    esac
}

__rx_marks() { # nonce phase rc (a call that never reached a slot)
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
    local nonce=$2 min=$3 inlen=$4 clen=$5 code in= s=$__rx_next pre
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
    __rx_slot_up "$s"
    # The nonce first: the call's shell waits for the slot's go-ahead before it reads the code,
    # and a code larger than a FIFO's buffer is written only as fast as that shell reads it.
    __rx_send "$s" "n $nonce"
    printf -v pre '__rx_st=%q __rx_in=%q\n' "$__rx_dir/s$s" "$in"
    case $s in # the length in bytes ($pre is ASCII: mktemp's path, "in" or nothing)
    0) printf '%s\n%s%s' "$((${#pre} + clen))" "$pre" "$code" >&22 ;;
    1) printf '%s\n%s%s' "$((${#pre} + clen))" "$pre" "$code" >&23 ;;
    esac
    code=
    unset code
    __rx_cur=$s __rx_next=$((1 - s))
    __rx_slot_up "$__rx_next" # only the first call starts the second slot
}

# What a runner killed together with its slots can leave behind, when the parent-death signal
# came too late or the VM has no setpriv: a call's shell blocked on its FIFOs, which nobody will
# write any more. Each runner that starts ends those of the same user's dead runners (the
# runner's pid is in "owner"): "go" and "exit 0" on the FIFOs unblock the shell, which runs it;
# then the directory goes.
__rx_sweep() {
    local d o k
    for d in "${TMPDIR:-/tmp}"/.rexec-runner.*; do
        [ -d "$d" ] && [ -O "$d" ] && [ "$d" != "$__rx_dir" ] || continue
        o=
        read -r o 2>/dev/null <"$d/owner"
        case $o in '' | *[!0-9]*) continue ;; esac
        ! kill -0 "$o" 2>/dev/null || continue
        for k in 0 1; do
            [ ! -p "$d/g$k" ] || printf 'go\n' 2>/dev/null 1<>"$d/g$k"
            [ ! -p "$d/c$k" ] || printf '6\nexit 0' 2>/dev/null 1<>"$d/c$k"
        done
        rm -rf -- "$d"
    done
    return 0
}

__rx_runner_setup() {
    __rx_pick
    # If the runner is SIGKILLed (a whole `bash -s` killed on the VM), its slots must not stay:
    # setpriv's parent-death signal, kept across exec, kills a slot's unshare (and with it the
    # namespace) or the slot's bash when the runner dies; under process-group containment the
    # call's shell is started the same way, so it goes with its slot.
    __rx_guard=()
    if command -v setpriv >/dev/null 2>&1 && setpriv --pdeathsig KILL true </dev/null >/dev/null 2>&1; then
        __rx_guard=(setpriv --pdeathsig KILL)
    fi
    if [ "$__rx_rank" -ge 3 ] && ! "${__rx_pre[@]}" true </dev/null >/dev/null 2>&1; then
        __rx_cont=process-group __rx_rank=1 __rx_pre=()
    fi
    __rx_cpre=()
    if [ "$__rx_rank" -lt 3 ]; then
        __rx_pre=()
        command -v setsid >/dev/null 2>&1 && __rx_cpre=("${__rx_guard[@]}" setsid)
    fi
    __rx_dir=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/.rexec-runner.XXXXXXXX" 2>/dev/null) &&
        [ -n "$__rx_dir" ] &&
        mkfifo -m 600 "$__rx_dir/c0" "$__rx_dir/c1" "$__rx_dir/n0" "$__rx_dir/n1" \
            "$__rx_dir/s0" "$__rx_dir/s1" "$__rx_dir/g0" "$__rx_dir/g1" 2>/dev/null &&
        (umask 077 && : >"$__rx_dir/in" && printf '%s\n' "$$" >"$__rx_dir/owner" &&
            { declare -p __rx_ns && declare -f __rx_slot __rx_slot_kill __rx_slot_reap &&
                printf '__rx_slot "$@"\n'; } >"$__rx_dir/slot") &&
        __rx_sweep # "in": a call's stdin, private; "owner": for __rx_sweep; "slot": the slots' code
}

__rx_runner() {
    local hdr k
    exec 7<&0 </dev/null
    if ! __rx_runner_setup; then
        printf '\036rexec-runner:%s:none setup\n' "$__rx_rnonce"
        [ -z "$__rx_dir" ] || rm -rf -- "$__rx_dir"
        return
    fi
    __rx_cur= __rx_next=0 __rx_sp=()
    __rx_slot_start 0
    printf '\036rexec-runner:%s:ready %s\n' "$__rx_rnonce" "$__rx_cont"
    while IFS= read -r -u 7 hdr; do
        case $hdr in
        K) __rx_kill_cur ;;
        "C "*) __rx_call $hdr || break ;;
        *) break ;;
        esac
    done
    # EOF (or a frame that makes no sense): stop the call and the slots, and go.
    __rx_kill_cur
    for k in 0 1; do [ -z "${__rx_sp[$k]}" ] || __rx_send "$k" quit; done
    exec 20>&- 21>&- 22>&- 23>&-
    rm -rf -- "$__rx_dir"
}
