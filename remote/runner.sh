# rexec remote runner: one long-lived shell per channel (its script taken in one read: docs/remote-contract.md) that runs call after call.
# See docs/remote-contract.md ("The runner") for the whole protocol. In short:
#
# The controller sends this file after wrapper.sh (whose __rx_userns_ok and __rx_pick it uses),
# preceded by `__rx_rnonce=<hex> __rx_max_rank=<n>` and followed by the line `__rx_runner; exit`.
# The runner answers one line on stdout, `\036rexec-runner:<rnonce>:ready <containment>` (or
# `... :none <why>`, then it exits having read nothing more), and then reads frames:
#   C <nonce> <min_rank> <stdin_len> <code_len>[ o]<spaces>\n<code bytes><stdin bytes>
#                                         ("o": a oneshot call, which may run in a fork of its
#                                         slot: __rx_fk)
#   K\n                                   stop the running call (timeout or cancel)
# A C frame's header is 96 bytes (spaces pad it before its newline), so that the runner reads
# it with read -N: two bytes ("C " or "K\n"), then the other 94 in one read, where a line read
# would take one read() per byte.
# EOF stops everything. A call is acknowledged by `\036rexec:<nonce>:start` on stderr as soon as
# its header is read. Each call ends with `\036rexec:<nonce>:end` on stdout and
# `\036rexec:<nonce>:end <phase> <rc> 0 <containment> <killed> <started> <desync>` on stderr,
# both written after every process of the call is gone. desync 1 (and phase desync: the call's
# code was never run) says a slot found on its FIFOs bytes that were not its call's: the
# controller then discards the runner.
#
# Processes: the runner (R) keeps up to two slots and hands a call to slot 0 when it waits
# for one (it writes a byte on its FIFO r<k> each time it does: __rx_slot_ready), to slot 1
# only when slot 0 is still busy with the call before (its reap, end markers, next shell's
# start): calls spaced apart keep one slot; the first call that finds slot 0 busy starts slot
# 1, after its hand-over. A slot lives as long as the runner:
#   unshare --pid --fork --kill-child -> bash (the slot, PID 1 of its namespace for the runner's
#                                  life) -> bash -c "$__rx_ns" (the next call's shell, started
#                                  in advance, waiting on the slot's FIFOs; after a oneshot
#                                  call a fork of the slot instead: __rx_fk)
# Where there is no PID namespace the slot is a plain `bash -c`, and the call's shell is
# `setsid bash -c` (its own process group, killed whole at the end). The slot reads its FIFO
# n<k> ("n <nonce>", "o <nonce>", "k", or "quit"/EOF when the runner is gone), lets the
# waiting shell go (after an "o" call a fork of the slot: __rx_fk),
# waits for it (SIGUSR1 from the runner kills it), kills whatever the call left, reads the
# call's status from s<k> (with no deadline: up to a line the slot writes there itself), writes
# the end markers and starts the next call's shell: one process start per call, while the other slot
# takes the next call. The slot is started under `setpriv --pdeathsig KILL` where setpriv
# exists: if the runner is killed, the slot and its namespace go too.
# The runner keeps nothing of a call: the code (with the exports) passes through one local
# variable that is unset before the frame's handling ends.
# A slot runs only the code of the call it was given: the code reaches the call's shell behind
# a header with the call's nonce, which the shell checks against the nonce the slot gives it
# with its go-ahead; a call stopped before its shell read its frame has the frame read off by
# the slot, through the same header, so nothing of it reaches the next call.

# The call's shell. It opens nothing by name: fd 7 is the read end of the slot's go-ahead FIFO
# g<k>, fd 9 that of the code FIFO c<k>. The go-ahead is the call's nonce and a newline (the
# slot has taken it off n<k>, so the command cannot read it there); the code comes framed as
# "<nonce> <length in bytes, 10 digits>\n<code>". Each part has a known length, so read -N
# (in the C locale for the code) takes it in one read, where a delimiter would make bash read
# it a byte at a time: this is on every call's path. A frame whose nonce is not the
# go-ahead's (what a stopped call left, bytes someone else wrote) is never run: exit 125 before
# any status, which the slot reports as desync (a length that is not a number fails read -N
# the same way). The fds are closed and the nonce unset before the code runs: its variables,
# traps, options, functions, cwd and umask are a fresh bash's.
# (One line: it is the shell's command line, which process listings show.)
__rx_ns='IFS= read -r -N 33 -u 7 __rx_g && IFS= read -r -N 44 -u 9 __rx_h && [ "${__rx_h:0:32}" = "${__rx_g:0:32}" ] && LC_ALL=C IFS= read -r -N "${__rx_h:33:10}" -u 9 __rx_c || exit 125; exec 7<&- 9<&-; unset __rx_g __rx_h; set --; eval "$__rx_c"'

# A oneshot call ("o <nonce>" on n<k>: the controller found its command one that `exec` runs
# and that reads no variable a fork of the slot would give another value than a fresh bash;
# src/shell/oneshot.c) may run in a fork of the slot (PID 1 of its namespace and a bash
# already) instead of a fresh bash: one fork (~0.4 ms of CPU with its exit) where a fresh bash
# costs that and an exec, ld.so and its start (~0.9 ms more). After a oneshot call the slot
# starts, in advance as ever, not a fresh bash but this fork, which waits for its go-ahead and
# reads its frame as the call's shell does (__rx_ns) and, before the code runs, makes itself
# what that shell would be: the same fds (8 becomes 2, the slot's others closed), no variable
# or function of the slot (its locals, __rx_sv, every __rx_*, the nonces among them), no
# positional parameter, $0 "rexec", no trap. What is left differs only in bash's own dynamic variables
# ($PPID, $BASHPID, $SHLVL, $BASH_SUBSHELL, $LINENO, ...), which the controller's check keeps
# out of the command's words; the command's environment is the same (SHLVL included: `exec`
# lowers it by one in a fresh shell and in a { } & child, not in a ( ) subshell). The
# function is one line, read by the slot from the file "rexec" in the runner's directory: bash
# names a function's file and the line in its messages (`rexec: line 3: exec: jq: not found`),
# as it names a fresh call's shell by $0 and counts its lines from its one-line command.
# The code's own variable (__rx_c) is unset with every other __rx_* inside the eval, whose
# string holds the code by then (the code unsets it too: a fresh call shell keeps it).
__rx_fk='__rx_slot_fork() { { exec 2>&8 3<&- 4<&- 5<&- 6<&- 8>&- {__rx_s_rd}>&- || exit 125; BASH_ARGV0=rexec; IFS= read -r -N 33 -u 7 __rx_g && IFS= read -r -N 44 -u 9 __rx_h && [ "${__rx_h:0:32}" = "${__rx_g:0:32}" ] && LC_ALL=C IFS= read -r -N "${__rx_h:33:10}" -u 9 __rx_c || exit 125; exec 7<&- 9<&-; trap - USR1; unset -f $__rx_sf __rx_slot_fork; unset -v $__rx_sv __rx_g __rx_h REPLY; set --; eval "unset -v \"\${!__rx_@}\"; $__rx_c"; } & }'
# The slot's functions (written to its file) and its variables (one list: __rx_slot declares
# them local with it, the fork unsets them with it).
__rx_sf='__rx_slot __rx_slot_take __rx_slot_status __rx_slot_line __rx_slot_clean __rx_slot_refuse __rx_slot_end __rx_slot_kill __rx_slot_reap __rx_slot_envok __rx_slot_src __rx_slot_bash'
__rx_sv='__rx_s_e __rx_s_d __rx_s_k __rx_s_cont __rx_s_line __rx_s_c __rx_s_nonce __rx_s_st __rx_s_rc __rx_s_killed __rx_s_incall __rx_s_phase __rx_s_started __rx_s_bad __rx_s_desync __rx_s_kind __rx_s_fk __rx_s_wk __rx_s_l __rx_s_i'

# The slot: `bash DIR/slot DIR K CONTAINMENT [PREFIX...]` (DIR/slot holds these functions,
# __rx_ns, __rx_sf and __rx_sv, and calls __rx_slot_envok and __rx_slot), where PREFIX starts
# the call's shell (setsid under process-group containment). As
# PID 1 of a namespace ($$ = 1) it ends a call's leftovers with kill -1, which there reaches
# the namespace only; otherwise it kills the call's process group.
# No open here can block: each FIFO is opened read-write first, so that its read-only open
# finds a writer. n<k> is then held read-only: the runner holds its only writer, so the
# runner's death (or its exit before this slot got going) reads as EOF, and the slot goes.
__rx_slot() { # envok (__rx_slot_envok's status, taken before these locals hide the environment) DIR K CONTAINMENT [PREFIX...]
    local $__rx_sv __rx_s_rd # (and r<k>'s descriptor: the fork unsets it with every __rx_*)
    __rx_s_e=$1 __rx_s_d=$2 __rx_s_k=$3 __rx_s_cont=$4
    shift 4
    trap '[ -z "$__rx_s_incall" ] || { __rx_s_killed=1; __rx_slot_kill "$__rx_s_c"; }' USR1
    # fd 8 is the channel's stderr (the call's, and the end marker's); the slot's own stderr is
    # /dev/null, so its kill and wait need no redirection each (each costs syscalls a call).
    exec </dev/null 8>&2 2>/dev/null 3<>"$__rx_s_d/c$__rx_s_k" 4<>"$__rx_s_d/n$__rx_s_k" 5<>"$__rx_s_d/s$__rx_s_k" 6<>"$__rx_s_d/g$__rx_s_k" || exit 0
    exec 4<"$__rx_s_d/n$__rx_s_k" 7<"$__rx_s_d/g$__rx_s_k" 9<"$__rx_s_d/c$__rx_s_k" || exit 0
    # r<k>, where the slot says it is ready for a call, on a descriptor above 9 that bash picks
    # (__rx_s_rd): a fixed one there may be one bash uses for itself
    exec {__rx_s_rd}<>"$__rx_s_d/r$__rx_s_k" || exit 0
    # Held open, the FIFOs that carry calls need no name: without one, nothing can be written
    # into them by path (the runner holds n<k>, c<k> and r<k> already; s<k> keeps its name,
    # which the call's code writes its status to).
    rm -f -- "$__rx_s_d/c$__rx_s_k" "$__rx_s_d/n$__rx_s_k" "$__rx_s_d/g$__rx_s_k" "$__rx_s_d/r$__rx_s_k"
    # Oneshot calls run in a fork only as PID 1 (its reap ends whatever the fork left) and when
    # nothing in the environment makes a fork differ from a fresh bash (__rx_slot_envok).
    [ "$$/$__rx_s_e" != 1/0 ] || ! __rx_slot_src "$__rx_s_d" || __rx_s_fk=1
    __rx_s_wk=b
    while :; do
        __rx_s_nonce= __rx_s_kind=
        # The next call's shell, started in advance: a fresh bash, or after a oneshot call a
        # fork of the slot (wk f), as the next call is likely the same action.
        if [ "$__rx_s_wk" = f ]; then
            __rx_slot_fork
        else
            __rx_slot_bash "$@"
        fi
        __rx_s_c=$!
        printf . >&"$__rx_s_rd" # ready for a call (r<k>: the runner hands calls to a slot that is)
        if ! __rx_slot_take; then __rx_slot_kill "$__rx_s_c"; return 0; fi
        if [ -n "$__rx_s_bad" ]; then __rx_slot_refuse "$__rx_s_c"; continue; fi
        # A fork waits for a oneshot call only: any other gets a fresh bash in its place (the
        # fork has read nothing yet: its go-ahead comes below).
        if [ "$__rx_s_wk/$__rx_s_kind" = f/n ]; then
            kill -KILL "$__rx_s_c"
            wait "$__rx_s_c"
            __rx_slot_bash "$@"
            __rx_s_c=$!
        fi
        __rx_s_wk=b
        [ "$__rx_s_kind/$__rx_s_fk" != o/1 ] || __rx_s_wk=f
        __rx_s_incall=1 __rx_s_killed=0 __rx_s_st= __rx_s_started=0 __rx_s_desync=0
        # A status line on s<k> now is not this call's (a command wrote it).
        __rx_s_i=0
        while read -r -t 0 -u 5 && [ $((__rx_s_i += 1)) -le 1000 ]; do __rx_slot_line 5 4096; done
        # A kill sent before incall was set has left its "k" line behind.
        if read -r -t 0 -u 4; then __rx_s_killed=1; __rx_slot_kill "$__rx_s_c"; else printf '%s\n' "$__rx_s_nonce" >&6; fi
        # wait returns early when a trapped signal came (the USR1 trap: killed 1); the call is
        # over only once kill -0 fails: until then its shell may still read the frame, and the
        # slot must not read off or report anything.
        wait "$__rx_s_c"; __rx_s_rc=$?
        while kill -0 "$__rx_s_c"; do wait "$__rx_s_c"; __rx_s_rc=$?; done
        [ "$__rx_s_killed/$__rx_s_rc" != 1/138 ] || { wait "$__rx_s_c"; __rx_s_rc=$?; }
        __rx_s_incall=
        __rx_slot_reap "$__rx_s_c"
        __rx_slot_status || __rx_s_desync=1
        [ ! -s "$__rx_s_d/in" ] || : >"$__rx_s_d/in" # its stdin is not left for the next call
        __rx_slot_clean || __rx_s_desync=1
        case $__rx_s_st in
        ok) __rx_s_phase=cmd __rx_s_started=1 ;;
        cd | stdin) __rx_s_phase=$__rx_s_st ;;
        *) __rx_s_phase=setup ;;
        esac
        # 125 before any status, not killed: the call's shell refused a frame not its call's
        [ "$__rx_s_phase/$__rx_s_rc/$__rx_s_killed" != setup/125/0 ] || __rx_s_phase=desync __rx_s_desync=1
        [ "$__rx_s_desync" = 0 ] || __rx_s_bad=1
        __rx_slot_end "$__rx_s_nonce" "$__rx_s_phase" "$__rx_s_rc" "$__rx_s_killed" "$__rx_s_started" "$__rx_s_desync"
    done
}

# The next call's shell, a fresh bash started in the background (its pid in $!): PREFIX... (the
# slot's), the channel's stderr as its 2, none of the slot's other fds.
__rx_slot_bash() {
    "$@" bash -c "$__rx_ns" rexec "$__rx_s_d" 2>&8 3<&- 4<&- 5<&- 6<&- 8>&- {__rx_s_rd}>&- &
}

# The next call's nonce from n<k>, into nonce, and its kind ("n", or "o": a oneshot call) into
# kind; 1 on "quit" or EOF (the runner is gone). A line the runner does not write (a command
# wrote it) makes the slot refuse every later call. The runner's lines have known lengths
# ("n <32 hex digits>\n", "o <32 hex digits>\n", "k\n", "quit\n"): read -N takes
# the first two bytes, then the nonce's 33, two read()s where a line read takes one a byte.
# Once anything else was found the lines are read as lines (no length can be trusted then).
__rx_slot_take() {
    while [ -z "$__rx_s_bad" ]; do
        IFS= read -r -N 2 -u 4 __rx_s_line || return 1
        case $__rx_s_line in
        $'k\n') continue ;; # a kill that came after its call had ended
        qu) return 1 ;;
        "n " | "o ")
            __rx_s_kind=${__rx_s_line:0:1}
            IFS= read -r -N 33 -u 4 __rx_s_line || return 1
            __rx_s_nonce=${__rx_s_line%$'\n'}
            case $__rx_s_nonce in
            *[!0-9a-f]*) ;;
            *) [ "${#__rx_s_nonce}/${#__rx_s_line}" != 32/33 ] || return 0 ;;
            esac
            __rx_s_bad=1 __rx_s_nonce=
            ;;
        *) __rx_s_bad=1 ;;
        esac
        # out of step: the rest of this line is read off; lines are read as lines from now on
        case $__rx_s_line in *$'\n') ;; *) IFS= read -r -u 4 _ ;; esac
    done
    while IFS= read -r -u 4 __rx_s_line; do
        case $__rx_s_line in
        k) ;; # a kill that came after its call had ended
        quit) return 1 ;;
        [no]" " | [no]" "*[!0-9a-f]*) __rx_s_bad=1 ;;
        [no]" "*) __rx_s_kind=${__rx_s_line:0:1} __rx_s_nonce=${__rx_s_line:2}; return 0 ;;
        *) __rx_s_bad=1 ;;
        esac
    done
    return 1
}

# The call's status, into st: "ok", "cd" or "stdin" (the call's shell writes it, with a newline,
# in one write before its command starts), or nothing. Read once every process of the call is
# gone (after the reap), and with no deadline: the slot first ends what is on s<k> with a line
# of its own, "--", so each read below finds all its bytes there and none can wait. A deadline
# would pass on a loaded machine (the slot not scheduled for a second) with the status there:
# a call that ran would be reported as never run (phase setup), and a read -N it cut short
# would leave what it had taken in bash's one read buffer, for the slot's next read -N, or its
# fork's read of its go-ahead, to return first (that fork's nonce then wrong: desync). The
# status and the slot's line come in two reads of three bytes (three for "stdin"), where a
# line read would take one read() a byte. Bytes the call's shell did not write (a command
# wrote into s<k>) are read off by lines up to the slot's line (bounded), and 1 is returned:
# the call ends with desync set. So does a write of the slot's line that fails (s<k> full:
# only a K, SIGUSR1, ends that wait).
__rx_slot_status() {
    local __rx_s_h __rx_s_l __rx_s_i=0
    __rx_s_st=
    printf -- '--\n' >&5 || return 1
    IFS= read -r -N 3 -u 5 __rx_s_h || return 1
    # (no byte of "ok\n", "cd\n", "std" or "in\n" can be one of the slot's line: each is
    # the call's, and three more bytes follow it)
    case $__rx_s_h in
    $'--\n') return 0 ;;
    $'ok\n' | $'cd\n') __rx_s_st=${__rx_s_h%$'\n'} ;;
    std) IFS= read -r -N 3 -u 5 __rx_s_h && [ "$__rx_s_h" = $'in\n' ] && __rx_s_st=stdin ;;
    esac
    [ -z "$__rx_s_st" ] || { IFS= read -r -N 3 -u 5 __rx_s_h && [ "$__rx_s_h" = $'--\n' ] && return 0; }
    # Not the call's alone: read off by lines (__rx_slot_line) up to the slot's line, or while
    # anything is there. The call's status, written whole, ends a line: one found among the
    # bytes is taken ("ok" first), as a call that may have run is never reported as not run.
    case $__rx_s_h in *$'\n') __rx_s_h= ;; esac
    while read -r -t 0 -u 5 && [ $((__rx_s_i += 1)) -le 1000 ]; do
        __rx_slot_line 5 4096
        __rx_s_h+=$__rx_s_l
        case $__rx_s_st/$__rx_s_h in
        */*ok) __rx_s_st=ok ;;
        ok/*) ;;
        */*cd | */*stdin) __rx_s_st=${__rx_s_h: -2}; [ "$__rx_s_st" = cd ] || __rx_s_st=stdin ;;
        esac
        case $__rx_s_h in *--) break ;; esac
        __rx_s_h=
    done
    return 1
}

# A line from fd $1 into l (without its newline), of at most $2 bytes, taken a byte at a time
# while bytes are there: 0 if it ended with a newline. With no deadline: on a loaded machine a
# read -t deadline passes with the bytes there, even after the line's newline was taken (the
# read then fails all the same); and read -N 1 takes one byte a read(), so nothing is left in
# bash's read buffer. For the slot's FIFOs where what is there is not known in advance.
__rx_slot_line() {
    local __rx_s_b LC_ALL=C
    __rx_s_l=
    while [ "${#__rx_s_l}" -lt "$2" ] && read -r -t 0 -u "$1"; do
        IFS= read -r -N 1 -u "$1" __rx_s_b || return 1
        [ "$__rx_s_b" != $'\n' ] || return 0
        __rx_s_l+=$__rx_s_b
    done
    return 1
}

# What the call left on the slot's FIFOs, read off before its end is reported. A call stopped
# before its command started (killed, no "ok" status) leaves on c<k> its whole frame (its
# shell never read it: read off through its header) or the rest of it (the shell was killed
# while it read: read off to the end, as the runner wrote the whole frame before it sent the
# kill), and on g<k> the go-ahead, or the rest of it. Otherwise c<k> and g<k> hold nothing.
# n<k> holds only "k" (a kill that came after the call ended) or "quit". Anything else was not
# written for this call (a frame its shell refused, bytes a command wrote): it is read off as
# well (bounded), and the call ends with desync set. Returns 1 then.
__rx_slot_clean() {
    local __rx_s_h __rx_s_l __rx_s_n __rx_s_i=0 __rx_s_r=0 __rx_s_own=0
    [ "$__rx_s_killed" = 0 ] || [ "$__rx_s_st" = ok ] || __rx_s_own=1
    if [ "$__rx_s_own" = 1 ] && read -r -t 0 -u 3; then
        # (the code read off in a subshell, as below: a read -N with a deadline)
        __rx_slot_line 3 44 && __rx_s_h=${__rx_s_l%% *} __rx_s_n=${__rx_s_l#* } &&
            [ "$__rx_s_h" = "$__rx_s_nonce" ] && [[ $__rx_s_n =~ ^[0-9]+$ ]] &&
            (LC_ALL=C read -r -N "$__rx_s_n" -t 5 -u 3 _)
    fi
    while read -r -t 0 -u 3 && [ $((__rx_s_i += 1)) -le 1000 ]; do
        [ "$__rx_s_own" = 1 ] || __rx_s_r=1
        # In a subshell: a read -N that times out keeps what it took from the FIFO but did not
        # hand out in bash's one read buffer, which the slot's next read -N, on any fd (n<k>'s
        # fixed-length reads), would return first. The subshell's copy goes with it.
        (LC_ALL=C read -r -N 65536 -t 0.001 -u 3 _)
    done
    # g<k> and n<k> by lines (__rx_slot_line: no deadline), each written whole by the slot or
    # the runner: one that does not end with its newline was not.
    while read -r -t 0 -u 6 && [ $((__rx_s_i += 1)) -le 2000 ]; do
        __rx_slot_line 6 64 || __rx_s_r=1
        [ "$__rx_s_own" = 1 ] || __rx_s_r=1
        case $__rx_s_nonce in *"$__rx_s_l") ;; *) __rx_s_r=1 ;; esac
    done
    while read -r -t 0 -u 4 && [ $((__rx_s_i += 1)) -le 3000 ]; do
        __rx_slot_line 4 64 || { [ -z "$__rx_s_l" ] || __rx_s_r=1; break; } # EOF: the runner is gone
        case $__rx_s_l in k | quit) ;; *) __rx_s_r=1 ;; esac
    done
    [ "$__rx_s_i" -le 1000 ] || __rx_s_r=1
    return "$__rx_s_r"
}

# A slot that found on its FIFOs what the runner did not write runs no call any more: each
# call it is given ends as desync at once, never run, and the controller discards the runner.
# It reads c<k> off until the runner writes n<k> again (or is gone), so a runner writing a
# frame there never waits on it.
__rx_slot_refuse() { # the waiting call's shell
    __rx_slot_kill "$1"
    wait "$1"
    __rx_slot_end "$__rx_s_nonce" desync 1 0 0 1
    until read -r -t 0 -u 4; do (LC_ALL=C read -r -N 65536 -t 0.2 -u 3 _); done # (see clean)
}

# 0 if the environment holds nothing that would make a fork of the slot differ from a fresh
# bash for a oneshot command: a fresh bash keeps what the environment gives the names the fork
# unsets (the slot's variables, REPLY, __rx_*), and reads BASH_ENV, ENV, SHELLOPTS, BASHOPTS
# and POSIXLY_CORRECT at its start, which the fork would not. Any of them: no fork.
__rx_slot_envok() {
    local __rx_s_v
    for __rx_s_v in $__rx_sv REPLY; do [ -z "${!__rx_s_v+x}" ] || return 1; done
    for __rx_s_v in BASH_ENV ENV SHELLOPTS BASHOPTS POSIXLY_CORRECT "${!__rx_@}"; do
        [[ ${!__rx_s_v@a} != *x* ]] || return 1
    done
}

# Defines __rx_slot_fork from DIR/rexec, read as "rexec" from DIR (see __rx_fk): one cd there
# and back at the slot's start, which leaves PWD as it was and OLDPWD as a fresh bash has it
# (exported, no value). Not where the way back could fail: a working directory that its path
# does not reach. If the way back fails anyway the slot goes (the runner starts another).
__rx_slot_src() {
    local __rx_s_o=$PWD
    [ -n "$__rx_s_o" ] && [ "$__rx_s_o" -ef . ] && [ -x . ] && builtin cd -- "$1" || return 1
    shopt -u sourcepath
    . rexec
    shopt -s sourcepath
    builtin cd -- "$__rx_s_o" || exit 0
    unset -v OLDPWD
    export OLDPWD
    declare -F __rx_slot_fork >/dev/null
}

__rx_slot_end() { # nonce phase rc killed started desync: the markers, after everything is gone
    printf '\036rexec:%s:end\n' "$1"
    printf '\036rexec:%s:end %s %s 0 %s %s %s %s\n' "$1" "$2" "$3" "$__rx_s_cont" "$4" "$5" "$6" >&8
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
    local __rx_s_i=0
    if [ "$$" = 1 ]; then
        while kill -KILL -1 && [ $((__rx_s_i += 1)) -lt 200 ]; do
            read -r -t 0.005 -u 6 _
        done
    else
        kill -KILL -- "-$1" || return 0
        while kill -0 -- "-$1" && [ $((__rx_s_i += 1)) -lt 200 ]; do
            read -r -t 0.005 -u 6 _
        done
    fi
}

# Starts slot $1. The runner keeps n<k>, c<k> and r<k> open read-write: the slot's opens never
# block and a write to a slot that is gone never raises SIGPIPE; it holds the only writer of
# n<k>, so when the runner dies (or exits while the slot is still starting) the slot reads EOF.
__rx_slot_start() {
    local __rx_r_d=$__rx_dir
    # A slot removes the names of its FIFOs once it has them open: one started again (the one
    # before it is gone) gets new FIFOs.
    if [ -n "${__rx_sp[$1]}" ]; then
        rm -f -- "$__rx_r_d/n$1" "$__rx_r_d/c$1" "$__rx_r_d/g$1" "$__rx_r_d/r$1" &&
            mkfifo -m 600 -- "$__rx_r_d/n$1" "$__rx_r_d/c$1" "$__rx_r_d/g$1" "$__rx_r_d/r$1" || return 1
    fi
    case $1 in
    0) exec 20>&- 22>&- 24>&- 20<>"$__rx_dir/n0" 22<>"$__rx_dir/c0" 24<>"$__rx_dir/r0" ;;
    1) exec 21>&- 23>&- 25>&- 21<>"$__rx_dir/n1" 23<>"$__rx_dir/c1" 25<>"$__rx_dir/r1" ;;
    esac
    __rx_hand[$1]=0 __rx_rdy[$1]=0 # (a new FIFO: nothing of the slot before it is counted)
    # (the runner's fd 1 is the channel's stderr, 19 its stdout: the slot gets them as 2 and 1)
    "${__rx_guard[@]}" "${__rx_pre[@]}" bash "$__rx_dir/slot" "$__rx_dir" "$1" "$__rx_cont" \
        ${__rx_cpre[@]+"${__rx_cpre[@]}"} </dev/null 2>&1 1>&19 7<&- 19>&- 20>&- 21>&- 22>&- 23>&- 24>&- 25>&- &
    __rx_sp[$1]=$!
}

# 0 if slot $1 waits for a call with its next shell started. A slot writes one byte on r<k>
# each time it does (at its start, and after each call once its next shell is started), so it
# does when it wrote one byte more than it was handed calls (__rx_hand). The runner reads the
# bytes as they come (__rx_rdy), one read -N 1 each (a longer read -N with a timeout could
# leave bytes in bash's one read buffer, for its next read -N of a frame), and no more than
# one past that count: a byte a command forged is taken as the slot's, and counted off again
# once the slot is waiting (a count never above the handed calls' + 1). A hint only: a call
# handed to a slot that is not ready waits on n<k> for it, as it did when calls went in turn.
__rx_slot_ready() {
    local __rx_r_f=$((24 + $1))
    while [ "${__rx_rdy[$1]}" -le "$((__rx_hand[$1] + 1))" ] && read -r -t 0 -u "$__rx_r_f"; do
        IFS= read -r -N 1 -u "$__rx_r_f" _ || return 1
        __rx_rdy[$1]=$((__rx_rdy[$1] + 1))
    done
    [ "${__rx_rdy[$1]}" -le "$((__rx_hand[$1] + 1))" ] || __rx_rdy[$1]=$((__rx_hand[$1] + 1))
    [ "${__rx_rdy[$1]}" -gt "${__rx_hand[$1]}" ]
}

# The slot for the next call, into __rx_r_s: slot 0 when it is ready for it; slot 1 only when
# slot 0 is not (still in its call's reap, its end markers, its next shell's start) and slot 1
# is; when slot 1 is not started yet, slot 0 anyway, and __rx_r_more is set (the caller starts
# slot 1 once the call is handed over, never on the call's path); when neither is ready, the
# slot that did not take the previous call. So calls spaced apart keep one slot, where calls in
# turn started the second with the first call and kept it (its `unshare`, the slot, its shell).
__rx_slot_choose() {
    if __rx_slot_ready 0; then
        __rx_r_s=0
    elif [ -z "${__rx_sp[1]}" ]; then
        __rx_r_s=0 __rx_r_more=1
    elif __rx_slot_ready 1; then
        __rx_r_s=1
    else
        __rx_r_s=$((1 - ${__rx_cur:-1}))
    fi
}

__rx_slot_up() { # k: starts slot k if it is not running
    [ -n "${__rx_sp[$1]}" ] && kill -0 "${__rx_sp[$1]}" || __rx_slot_start "$1"
}

# Stops the running call: "k" on its slot's FIFO, then SIGUSR1 to the slot (in a namespace, the
# child of unshare). A slot that has not taken its call yet finds the "k" line first; so does
# one that is still starting, which gets no signal: until its trap is set, SIGUSR1 would kill it.
__rx_kill_cur() {
    local __rx_r_s=$__rx_cur __rx_r_u __rx_r_p=
    [ -n "$__rx_r_s" ] || return 0
    __rx_send "$__rx_r_s" k
    __rx_r_u=${__rx_sp[$__rx_r_s]}
    if [ "$__rx_cont" != pid-namespace ]; then
        __rx_r_p=$__rx_r_u
    elif [ -r "/proc/$__rx_r_u/task/$__rx_r_u/children" ]; then
        read -r __rx_r_p _ 2>/dev/null <"/proc/$__rx_r_u/task/$__rx_r_u/children" # no final newline
    else
        kill -KILL "$__rx_r_u" 2>/dev/null # no children file: the slot and its namespace go
    fi
    [ -z "$__rx_r_p" ] || ! __rx_usr1_caught "$__rx_r_p" || kill -USR1 "$__rx_r_p" 2>/dev/null
}

# 0 if process $1 has a handler for SIGUSR1 (bit 9 of SigCgt in its status): the slot's trap.
__rx_usr1_caught() {
    local __rx_r_k __rx_r_v
    while read -r __rx_r_k __rx_r_v; do
        [ "$__rx_r_k" = SigCgt: ] || continue
        (((16#$__rx_r_v & 0x200) != 0))
        return
    done 2>/dev/null <"/proc/$1/status"
    return 1
}

__rx_send() { # slot line
    case $1 in
    0) printf '%s\n' "$2" >&20 ;;
    1) printf '%s\n' "$2" >&21 ;;
    esac
}

__rx_marks() { # nonce phase rc (a call that never reached a slot)
    printf '\036rexec:%s:end\n' "$1" >&19
    printf '\036rexec:%s:end %s %s 0 %s 0 0 0\n' "$1" "$2" "$3" "$__rx_cont"
}

# Exactly $1 bytes of code from the channel (in the C locale a character is a byte; the code
# holds no NUL). Sets code in the caller.
__rx_read_code() {
    local LC_ALL=C
    IFS= read -r -N "$1" -u 7 __rx_r_code
    [ "${#__rx_r_code}" = "$1" ]
}

# One call frame: "nonce min_rank stdin_len code_len [o]" (its header after "C ") was read
# into $@.
__rx_call() {
    local __rx_r_nonce=$1 __rx_r_min=$2 __rx_r_inlen=$3 __rx_r_clen=$4 __rx_r_code __rx_r_in= __rx_r_s __rx_r_more= __rx_r_i __rx_r_how=n
    # a fifth field "o": a oneshot call, which a slot in a PID namespace may run in its fork
    [ "$#" = 4 ] || { [ "$#" = 5 ] && [ "$5" = o ]; } || return 1
    [ "$#/$__rx_cont" != 5/pid-namespace ] || __rx_r_how=o
    case "$__rx_r_nonce/$__rx_r_min/$__rx_r_inlen/$__rx_r_clen" in
    *[!0-9a-f/-]* | *//* | */ | /*) return 1 ;;
    esac
    [ "${#__rx_r_nonce}" = 32 ] || return 1 # the call's shell reads it with a fixed length
    # The acknowledgement (fd 1 is the channel's stderr): the controller's set-up deadline (a
    # frozen peer) ends here.
    printf '\036rexec:%s:start\n' "$__rx_r_nonce"
    __rx_read_code "$__rx_r_clen" || return 1
    if [ "$__rx_r_inlen" -ge 0 ]; then
        __rx_r_in=$__rx_dir/in
        head -c "$__rx_r_inlen" <&7 >"$__rx_r_in" || return 1
        # Nothing follows the stdin bytes until the call ends, so a readable channel now is a
        # kill line (cancel) or EOF, maybe cutting the stdin short: the call does not start.
        if read -r -t 0 -u 7; then
            : >"$__rx_r_in"
            __rx_marks "$__rx_r_nonce" cancel 1
            return 0
        fi
    fi
    if [ "$__rx_rank" -lt "$__rx_r_min" ]; then
        __rx_r_code=
        [ -z "$__rx_r_in" ] || : >"$__rx_r_in"
        __rx_marks "$__rx_r_nonce" contain 1
        return 0
    fi
    __rx_slot_choose
    __rx_slot_up "$__rx_r_s" || return 1
    # The nonce first: the call's shell waits for the slot's go-ahead before it reads the code,
    # and a code larger than a FIFO's buffer is written only as fast as that shell reads it
    # (or, for a call stopped before that, as the slot reads it off). The frame on c<k> is
    # "<nonce> <length in bytes, 10 digits>\n" and the code, after the line naming the call's
    # status FIFO and stdin (__rx_fp, with its length in bytes in __rx_fl); it takes the place
    # of the code in the one variable and goes out in one echo (printf writes a line at a time).
    # (Writing a small frame before the nonce, so that the slot and the shell wake once, was
    # measured: no faster, docs/PERFORMANCE.md.)
    __rx_send "$__rx_r_s" "$__rx_r_how $__rx_r_nonce"
    __rx_hand[__rx_r_s]=$((__rx_hand[__rx_r_s] + 1))
    __rx_r_i=$__rx_r_s
    [ -z "$__rx_r_in" ] || __rx_r_i=$((__rx_r_s + 2))
    printf -v __rx_r_code '%s %010d\n%s%s' "$__rx_r_nonce" "$((__rx_fl[__rx_r_i] + __rx_r_clen))" "${__rx_fp[__rx_r_i]}" "$__rx_r_code"
    case $__rx_r_s in
    0) builtin echo -n "$__rx_r_code" >&22 ;;
    1) builtin echo -n "$__rx_r_code" >&23 ;;
    esac
    __rx_r_code=
    unset __rx_r_code
    __rx_cur=$__rx_r_s
    # slot 1 starts, for a later call, once a call found slot 0 busy (a slot that died starts
    # again when a call is handed to it)
    [ -z "$__rx_r_more" ] || __rx_slot_start 1
}

# The line before a call's code, for slot 0 and 1 without stdin, then with: computed once, with
# its length in bytes (the C locale), as a frame's header counts bytes.
__rx_frame_lines() {
    local LC_ALL=C __rx_r_i __rx_r_l
    __rx_fp=() __rx_fl=()
    for __rx_r_i in 0 1 2 3; do
        __rx_r_l=
        [ "$__rx_r_i" -lt 2 ] || __rx_r_l=$__rx_dir/in
        printf -v "__rx_fp[$__rx_r_i]" '__rx_st=%q __rx_in=%q\n' "$__rx_dir/s$((__rx_r_i % 2))" "$__rx_r_l"
        __rx_fl[__rx_r_i]=${#__rx_fp[__rx_r_i]}
    done
}

# The runners' directory, ${TMPDIR:-/tmp}/.rexec-<uid>: made 0700 by the first runner, and
# trusted only if it is a directory (not a symlink) that this user owns and nobody else may
# enter; then all in it is this user's own. Otherwise no runner starts here (":none base") and
# calls take a channel each: nothing another user plants in /tmp can steer or stop a runner.
__rx_base_ok() {
    local __rx_r_m
    __rx_base=${TMPDIR:-/tmp}/.rexec-$EUID
    [ -e "$__rx_base" ] || [ -L "$__rx_base" ] || mkdir -m 700 -- "$__rx_base" 2>/dev/null
    [ -d "$__rx_base" ] && [ ! -L "$__rx_base" ] && [ -O "$__rx_base" ] || return 1
    __rx_r_m=$(stat -c %a -- "$__rx_base" 2>/dev/null) && [ "$__rx_r_m" = 700 ]
}

# The start time of process $1 (clock ticks after boot) into __rx_t, with its pid a process's
# identity; 1 if there is no such process.
__rx_stime() {
    local __rx_r_l
    __rx_t=
    { read -r __rx_r_l <"/proc/$1/stat"; } 2>/dev/null || return 1
    __rx_r_l=${__rx_r_l##*) }
    set -- $__rx_r_l # the fields after the command's name: a state letter and numbers
    __rx_t=${20}
    [ -n "$__rx_t" ]
}

# A runner directory whose runner is alive ("owner": its pid and start time), or still starting
# (no owner yet). Follows no symlink.
__rx_live() {
    local __rx_r_o __rx_r_t
    [ -d "$1" ] && [ ! -L "$1" ] || return 1
    [ -f "$1/owner" ] && [ ! -L "$1/owner" ] || return 0
    read -r __rx_r_o __rx_r_t 2>/dev/null <"$1/owner"
    case $__rx_r_o in '' | *[!0-9]*) return 0 ;; esac
    __rx_stime "$__rx_r_o" && [ "$__rx_t" = "$__rx_r_t" ]
}

# What dead runners of this user left, once per runner start: their directories (a SIGKILLed
# runner could not remove its own), and any of their processes still there, found through
# /proc even when the directory is gone: a process of this user (bash, unshare, setsid or
# setpriv) whose arguments name a directory under the base that is gone or whose runner is
# dead (a slot, `bash DIR/slot DIR ...`, or a call's shell, `bash -c ... rexec DIR`). The
# FIFOs' EOF and the parent-death signal end them in the normal case; this is for when both
# came too late. It reads only the base (this user's alone), follows no symlink, opens no FIFO
# and writes nothing: it removes and it sends SIGKILL.
# /proc is read only when a dead runner's directory was found: a runner that ends normally
# removes its own after its slots were told to quit, so leftovers come with a dead runner's
# directory (a SIGKILLed runner removes nothing). Reading every process's command line at each
# runner start would cost O(processes) per start, O(runners^2) when many start on one machine.
# A start checks at most 64 runner directories, from a random one on (all of them when there
# are fewer): checking every one made each start O(runners), 2,000 runners starting on one
# machine O(runners^2) (minutes of CPU); with more, one of the next starts finds a dead one.
__rx_sweep() {
    local __rx_r_d __rx_r_p __rx_r_w __rx_r_i __rx_r_n __rx_r_o=0 __rx_r_dead=''
    local -a __rx_r_a
    local -a __rx_r_ds=("$__rx_base"/r.*)
    __rx_r_n=${#__rx_r_ds[@]}
    [ "$__rx_r_n" -le 64 ] || __rx_r_o=$((RANDOM % __rx_r_n))
    for ((__rx_r_i = 0; __rx_r_i < __rx_r_n && __rx_r_i < 64; __rx_r_i++)); do
        __rx_r_d=${__rx_r_ds[(__rx_r_i + __rx_r_o) % __rx_r_n]}
        [ "$__rx_r_d" = "$__rx_dir" ] || __rx_live "$__rx_r_d" || [ ! -d "$__rx_r_d" ] || [ -L "$__rx_r_d" ] ||
            { rm -rf -- "$__rx_r_d"; __rx_r_dead=1; }
    done
    [ -n "$__rx_r_dead" ] || return 0
    for __rx_r_p in /proc/[1-9]*; do
        [ -O "$__rx_r_p" ] || continue
        mapfile -d '' -t __rx_r_a 2>/dev/null <"$__rx_r_p/cmdline" || continue
        case ${__rx_r_a[0]##*/} in bash | unshare | setsid | setpriv) ;; *) continue ;; esac
        for __rx_r_w in "${__rx_r_a[@]:1}"; do
            case $__rx_r_w in "$__rx_base"/r.*) ;; *) continue ;; esac
            __rx_r_w=${__rx_r_w#"$__rx_base"/}
            __rx_r_w=$__rx_base/${__rx_r_w%%/*}
            [ "$__rx_r_w" = "$__rx_dir" ] || __rx_live "$__rx_r_w" || kill -KILL "${__rx_r_p#/proc/}" 2>/dev/null
            break
        done
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
    __rx_why=base
    __rx_base_ok || return 1
    __rx_why=setup
    # "in": a call's stdin, private; "owner": for __rx_sweep; "slot": the slots' code;
    # "rexec": the function that runs a oneshot call in a fork of its slot
    __rx_dir=$(umask 077 && mktemp -d "$__rx_base/r.XXXXXXXX" 2>/dev/null) &&
        [ -n "$__rx_dir" ] &&
        mkfifo -m 600 "$__rx_dir/c0" "$__rx_dir/c1" "$__rx_dir/n0" "$__rx_dir/n1" \
            "$__rx_dir/s0" "$__rx_dir/s1" "$__rx_dir/g0" "$__rx_dir/g1" "$__rx_dir/r0" "$__rx_dir/r1" 2>/dev/null &&
        __rx_stime "$$" &&
        (umask 077 && : >"$__rx_dir/in" && printf '%s %s\n' "$$" "$__rx_t" >"$__rx_dir/owner" &&
            { declare -p __rx_ns __rx_sf __rx_sv && declare -f $__rx_sf &&
                printf '__rx_slot_envok; __rx_slot "$?" "$@"\n'; } >"$__rx_dir/slot" &&
            printf '%s\n' "$__rx_fk" >"$__rx_dir/rexec") &&
        __rx_frame_lines &&
        __rx_sweep
}

__rx_runner() {
    local __rx_r_hdr __rx_r_k
    exec 7<&0 </dev/null
    if ! __rx_runner_setup; then
        printf '\036rexec-runner:%s:none %s\n' "$__rx_rnonce" "$__rx_why"
        [ -z "$__rx_dir" ] || rm -rf -- "$__rx_dir"
        return
    fi
    __rx_cur= __rx_sp=() __rx_hand=() __rx_rdy=()
    # From here fd 1 is the channel's stderr (the acknowledgement, on every call's path, needs
    # no redirection), 19 its stdout, and 2 /dev/null (a failing kill -0 needs none either).
    exec 19>&1 1>&2 2>/dev/null
    shopt -u xpg_echo # echo -n writes a frame as it is
    __rx_slot_start 0
    printf '\036rexec-runner:%s:ready %s\n' "$__rx_rnonce" "$__rx_cont" >&19
    # A frame starts "C " or is "K\n": two bytes, then a C frame's other 94 header bytes (the
    # fields, spaces, a newline), each with one read -N.
    while IFS= read -r -N 2 -u 7 __rx_r_hdr; do
        case $__rx_r_hdr in
        $'K\n') __rx_kill_cur ;;
        "C ")
            IFS= read -r -N 94 -u 7 __rx_r_hdr && [ "${__rx_r_hdr:93}" = $'\n' ] || break
            __rx_call $__rx_r_hdr || break
            ;;
        *) break ;;
        esac
    done
    # EOF (or a frame that makes no sense): stop the call and the slots, and go.
    __rx_kill_cur
    for __rx_r_k in 0 1; do [ -z "${__rx_sp[$__rx_r_k]}" ] || __rx_send "$__rx_r_k" quit; done
    exec 20>&- 21>&- 22>&- 23>&- 24>&- 25>&-
    rm -rf -- "$__rx_dir"
}
