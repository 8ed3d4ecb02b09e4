# rexec remote wrapper: what the channel's shell runs on the tool VM for every call.
#
# The controller sends, on the channel's stdin: variable assignments (__rx_*), the action's
# secrets as `export NAME='value'` lines, this file, then the line `__rx_main; exit`, then the
# call's stdin bytes if it has any. bash reads a script from a pipe one byte at a time, so the
# stdin bytes after that line are left for the command; `; exit` on the same line makes sure
# bash never reads them as script.
#
# The channel's stdin stays open for the whole call: EOF on it means the controller cancelled
# or the connection dropped, and a watchdog then stops the command. The wrapper reports how the
# call ended on stderr with two marker lines carrying a per-call nonce, which the controller
# strips from the stream:
#   \036rexec:<nonce>:start                    the command really started (containment worked)
#   \036rexec:<nonce>:end <phase> <rc> <timed_out> <containment> <cancelled>
# phase is cmd (the command ran), cd (the working directory failed), contain (the required
# containment is not available here), stdin (staging the stdin bytes failed, or for a piped
# stdin the FIFO or dd could not be had) or cancel (EOF came before the command started: it
# never ran).
#
# Variables set by the controller before this file:
#   __rx_nonce __rx_cmd __rx_cwd __rx_timeout __rx_timeout_us __rx_kill_after __rx_stdin_len
#   __rx_min_rank __rx_max_rank (the host's cap: 1 keeps calls out of namespaces)

__rx_end() { # phase rc timed_out
    printf '\036rexec:%s:end %s %s %s %s %s\n' "$__rx_nonce" "$1" "$2" "$3" \
        "${__rx_cont:-none}" "${__rx_cancelled:-0}" >&2
}

# Unprivileged user namespaces: enabled unless a sysctl says otherwise.
__rx_userns_ok() {
    local __rx_v
    if read -r __rx_v 2>/dev/null </proc/sys/user/max_user_namespaces && [ "$__rx_v" = 0 ]; then return 1; fi
    if read -r __rx_v 2>/dev/null </proc/sys/kernel/unprivileged_userns_clone && [ "$__rx_v" = 0 ]; then return 1; fi
    if read -r __rx_v 2>/dev/null </proc/sys/kernel/apparmor_restrict_unprivileged_userns &&
        [ "$__rx_v" = 1 ]; then return 1; fi
    return 0
}

# Picks the strongest containment this VM offers without starting a process to find out:
# a PID namespace (its init's exit kills every process in it, setsid escapees included), else
# timeout's own process group. Ranks: 1 process-group, 3 pid-namespace.
__rx_pick() {
    __rx_cont=process-group __rx_rank=1 __rx_pre=()
    [ "${__rx_max_rank:-3}" -ge 3 ] || return 0
    command -v unshare >/dev/null 2>&1 || return 0
    if [ "$EUID" = 0 ]; then
        __rx_pre=(unshare --pid --fork --kill-child --)
    elif __rx_userns_ok; then
        __rx_pre=(unshare --user --map-current-user --pid --fork --kill-child --)
    else
        return 0
    fi
    __rx_cont=pid-namespace __rx_rank=3
}

# What timeout runs: the start line, then the command, in one `bash -c` (whose $$ is the
# command's own shell, as with ssh). In a PID namespace timeout itself is the namespace's init
# (unshare ... timeout ... bash -c): when it exits every process left in the namespace dies,
# setsid escapees included, and it already handles the signals an init must handle.
__rx_inner_script() {
    __rx_inner="printf '\\036rexec:%s:start\\n' $__rx_nonce >&2
$__rx_cmd"
}

# How a call's stdin is copied, staged or piped, given count=N: dd with count_bytes reads no
# more than it must, so the channel is left for the watchdog; in 64 KiB blocks it copies a GiB
# in about two thirds of the time head -c's 8 KiB pieces take.
__rx_dd=(dd bs=65536 iflag=fullblock,count_bytes status=none)

# Copies the call's stdin from the channel (fd 7) to stdout: exactly __rx_stdin_len bytes, or,
# with __rx_stdin_framed=1 (a stdin whose length nobody knows before its end: a pipe), frames
# "LEN\n" + LEN bytes up to the end frame "0\n". read takes a header byte by byte (bash never
# reads a pipe ahead), dd exactly one frame's bytes: nothing past the end frame is read. dd runs
# in the background ($__rx_cp) so that a TERM trap of the caller runs at once. Returns dd's status, or
# 2 when the frames stopped before the end frame (EOF: a cancel, or the connection lost).
# With a bulk stdin, remote/copier.sh (sent along) may have one perl process do it all instead:
# decided before the first byte is copied (__rx_pl=1), or, for frames, once the first header
# says the stdin is bulk (__rx_pl_frame bytes or more in that frame).
__rx_copy() {
    [ "${__rx_pl:-0}" != 1 ] || { __rx_copy_pl; return; }
    if [ "${__rx_stdin_framed:-0}" != 1 ]; then
        "${__rx_dd[@]}" count="$__rx_stdin_len" <&7 &
        __rx_cp=$!
        wait "$__rx_cp"
        return
    fi
    local __rx_n __rx_first=1
    while read -r __rx_n <&7 && [[ $__rx_n =~ ^[1-9][0-9]{0,9}$ ]]; do
        if [ -n "$__rx_first" ] && [ -n "${__rx_pl_frame:-}" ] && [ "$__rx_n" -ge "$__rx_pl_frame" ]; then
            __rx_pl_probe
            [ "$__rx_pl" != 1 ] || { __rx_copy_pl "$__rx_n"; return; }
        fi
        __rx_first=
        "${__rx_dd[@]}" count="$__rx_n" <&7 &
        __rx_cp=$!
        wait "$__rx_cp" || return 1
    done
    [ "$__rx_n" = 0 ] || return 2
}

# Copies the call's stdin from the channel into a private file the command reads. 2: its
# frames were cut short (the file is removed; the caller reports a cancel).
__rx_stage_stdin() {
    local __rx_cp __rx_r=0
    __rx_tmp=${TMPDIR:-/tmp}/.rexec-stdin-$__rx_nonce
    (umask 077 && set -C && exec >"$__rx_tmp" && __rx_copy) <&7 2>/dev/null || __rx_r=$?
    if [ "$__rx_r" = 2 ]; then rm -f -- "$__rx_tmp" </dev/null; fi
    [ "$__rx_r" = 0 ] || return "$__rx_r"
    exec 6<"$__rx_tmp" || return 1
    # Unlinked before the command starts, so it never sees the file by name (only as fd 0): one
    # rm on the path of a call with stdin (bulk stdin, or any stdin where no runner is used).
    rm -f -- "$__rx_tmp" </dev/null
}

# A piped stdin (__rx_stdin_piped=1, the action's "stdin": "piped"): the command reads a
# private FIFO that a feeder fills from the channel while the command runs, as with ssh, instead
# of a file staged before it starts. Tries dd's options first (once the command runs, a dd that
# refuses them could not be told from a command that stopped reading; where dd will not do, the
# perl copier of remote/copier.sh, sent along, takes every frame if it runs), then creates the
# FIFO (mkfifo never replaces what exists).
__rx_piped_fifo() {
    __rx_fifo=${TMPDIR:-/tmp}/.rexec-stdin-$__rx_nonce
    { [ "${__rx_pl:-0}" = 1 ] || "${__rx_dd[@]}" count=0 </dev/null >/dev/null 2>&1 ||
        { [ -n "${__rx_pl_frame:-}" ] && __rx_pl_probe && [ "$__rx_pl" = 1 ]; }; } &&
        (umask 077 && exec mkfifo -m 600 -- "$__rx_fifo") </dev/null 2>/dev/null
}

# The feeder, in the background with the FIFO's write end as fd 6 and the channel as fd 7:
# copies exactly __rx_stdin_len bytes (dd reads no more than it must), then watches the channel
# for EOF as the watchdog below does. It holds the FIFO's write end until it knows the copy was
# whole: if the channel ended first (cancel, connection lost), the command is stopped while its
# stdin is still open, so it never takes a stdin cut short for a whole one. dd fails only when
# nobody reads the FIFO any more (a pipe read does not fail, and dd's options were tried before
# the command started): the command closed its stdin or is gone, and the rest is dropped.
__rx_feed() {
    local __rx_cp __rx_frc=0
    trap 'kill -KILL "$__rx_cp" 2>/dev/null; exit 0' TERM
    if [ "$__rx_stdin_len" -gt 0 ] || [ "${__rx_stdin_framed:-0}" = 1 ]; then
        __rx_copy >&6 || __rx_frc=$?
    fi
    if [ "$__rx_frc" = 2 ] || { [ "$__rx_frc" = 0 ] && read -r -t 0 -u 7; }; then
        __rx_stop || exit 0
        exec sleep 2147483647 # keeps fd 6 open until the wrapper ends this process
    fi
    exec 6>&- # all of it is in the FIFO: the command sees EOF right after the last byte
    if [ "$__rx_frc" = 0 ]; then
        read -r -n 1 _ <&7
    else # what the command did not take is read and dropped, so EOF can still be seen
        local LC_ALL=C
        while read -r -N 65536 -u 7 _; do :; done
    fi
    __rx_stop
}

# Stops the command: timeout passes TERM on to its process group and sends KILL after
# --kill-after if the command is still there. In a PID namespace $__rx_pid is unshare, which
# does not pass signals on: signal timeout, its only child, found without starting a process.
__rx_cancel() {
    local __rx_tp=$__rx_pid
    __rx_cancelled=1
    if [ "$__rx_cont" = pid-namespace ]; then
        __rx_tp=
        read -r __rx_tp _ 2>/dev/null <"/proc/$__rx_pid/task/$__rx_pid/children" # no final newline
        # not forked yet, or no children file: killing unshare kills its child (--kill-child)
        [ -n "$__rx_tp" ] || { kill -KILL "$__rx_pid" 2>/dev/null; return; }
    fi
    kill -TERM "$__rx_tp" 2>/dev/null
}

# The watchdog's and the feeder's word to the wrapper: SIGUSR1. If the wrapper is gone
# (SIGKILLed on the VM: sshd reaps it and then closes the channel's stdin, which is how its
# watchdog got here), nobody else would stop the command, so this process does: in a PID
# namespace killing unshare ends it (--kill-child: the namespace's init goes, and everything in
# it), else KILL to timeout's process group. Returns 1 in that case.
__rx_stop() {
    kill -USR1 $$ 2>/dev/null && return 0
    kill -KILL -- "-$__rx_pid" 2>/dev/null || kill -KILL "$__rx_pid" 2>/dev/null
    return 1
}

__rx_main() {
    local __rx_rc __rx_t0 __rx_t1 __rx_to=0 __rx_infile=/dev/null
    __rx_fifo=
    exec 7<&0 </dev/null
    if [ -n "$__rx_cwd" ] && ! cd -- "$__rx_cwd" 2>/dev/null; then __rx_end cd 1 0; return; fi
    __rx_pick
    if [ "$__rx_rank" -lt "$__rx_min_rank" ]; then __rx_end contain 1 0; return; fi
    if [ "$__rx_stdin_len" -ge 0 ] && [ "${__rx_stdin_piped:-0}" = 1 ]; then
        __rx_piped_fifo || { __rx_end stdin 1 0; return; }
        __rx_infile=$__rx_fifo
    elif [ "$__rx_stdin_len" -ge 0 ]; then
        __rx_stage_stdin; __rx_rc=$?
        if [ "$__rx_rc" = 2 ]; then __rx_cancelled=1; __rx_end cancel 1 0; return; fi
        if [ "$__rx_rc" != 0 ]; then __rx_end stdin 1 0; return; fi
        __rx_infile=/dev/fd/6
    fi
    # Nothing follows the stdin bytes on the channel, so if it is readable now it is at EOF:
    # the call was cancelled (or the connection dropped) before the command started, maybe
    # while its stdin was still arriving (dd then stopped short). Never start it. (A piped
    # stdin's bytes are still to come here: its feeder tells a cancel from them.)
    if [ "$__rx_infile" != "$__rx_fifo" ] && read -r -t 0 -u 7 2>/dev/null; then
        __rx_cancelled=1; __rx_end cancel 1 0; return
    fi
    __rx_inner_script
    trap __rx_cancel USR1
    __rx_t0=${EPOCHREALTIME//[!0-9]/}
    # A piped stdin: both ends of the FIFO are opened here and its name removed before the
    # command starts, so the command never sees it by name. A read-write open waits for nobody;
    # with it held, the read end and a write-only end open at once, and the read-write one goes
    # (the feeder must hold a write end only: a dd writing to a FIFO nobody reads then fails).
    if [ "$__rx_infile" = "$__rx_fifo" ]; then
        exec 6<>"$__rx_fifo" 5<"$__rx_fifo" 4>"$__rx_fifo" 6<&- || { __rx_end stdin 1 0; return; }
        exec 6>&4 4>&-
        rm -f -- "$__rx_fifo"
    else
        exec 5<"$__rx_infile" || { __rx_end stdin 1 0; return; }
    fi
    "${__rx_pre[@]}" timeout --kill-after="$__rx_kill_after" "$__rx_timeout" \
        bash -c "$__rx_inner" rexec <&5 5<&- 6<&- 7<&- &
    __rx_pid=$!
    exec 5<&-
    if [ "$__rx_infile" = "$__rx_fifo" ]; then
        __rx_feed </dev/null >/dev/null 2>&1 &
    else
        { read -r -n 1 _ ; __rx_stop || :; } <&7 >/dev/null 2>&1 6<&- &
    fi
    __rx_wd=$!
    exec 6<&- 7<&-
    # wait returns early when the USR1 trap runs; the command is gone once kill -0 fails.
    wait "$__rx_pid" 2>/dev/null; __rx_rc=$?
    while kill -0 "$__rx_pid" 2>/dev/null; do wait "$__rx_pid" 2>/dev/null; __rx_rc=$?; done
    __rx_t1=${EPOCHREALTIME//[!0-9]/}
    kill "$__rx_wd" 2>/dev/null
    # A wait cut short by the USR1 trap returns 128+10, and if bash reaped the command in the
    # meantime the loop above never waits again: ask once more for the status bash kept.
    if [ "${__rx_cancelled:-0}" = 1 ] && [ "$__rx_rc" = 138 ]; then wait "$__rx_pid" 2>/dev/null; __rx_rc=$?; fi
    # What the command left in timeout's process group (background children) goes with it; in
    # a PID namespace they went with timeout, the namespace's init.
    kill -KILL -- "-$__rx_pid" 2>/dev/null
    # timeout exits 124 (or 137 after --kill-after); a command can exit 124 by itself, but only
    # a real timeout takes the full time.
    if { [ "$__rx_rc" = 124 ] || [ "$__rx_rc" = 137 ]; } && [ -n "$__rx_t0" ] &&
        [ $((__rx_t1 - __rx_t0)) -ge $((__rx_timeout_us - 20000)) ]; then __rx_to=1; fi
    __rx_end cmd "$__rx_rc" "$__rx_to"
    return "$__rx_rc"
}
