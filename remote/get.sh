# rexec get (docs/remote-contract.md, "Files: put and get"): what a get action runs on the VM.
# The renderer puts remote/xfer.sh and this file before the catalog's fixed line
#   __rx_get "PATH"
# in the call's shell. The file's bytes are its stdout. It is opened once and read through that
# descriptor; its size and times are taken before and after the read, and a change in between
# (the file was written to while it was read) fails the call: the download is not whole.
# Exit codes: 0 done; 2 refused (the path, or not a regular file); 3 cannot read; 4 the file
# changed while it was read.

__rx_get_stat() {
    stat -L -c '%s %y %z' /dev/fd/3
}

# For a file of 16 MiB or more, the pipe to sshd (stdout) is grown to 1 MiB first, as
# remote/copier.sh grows the stdin pipes (F_SETPIPE_SZ; perl where there is one, else as it is):
# sshd and cat then wake each other a sixteenth as often.
__rx_get_bigpipe() { # size
    [ "$1" -ge 16777216 ] && command -v perl >/dev/null 2>&1 || return 0
    (unset PERL5OPT; exec perl -e 'fcntl(STDOUT, 1031, 1048576)') 2>/dev/null
    return 0
}

__rx_get() { # path
    local __rx_src=$1 __rx_before __rx_after
    __rx_xfer_op='get'
    __rx_xfer_path_ok "$__rx_src" || return
    if [ -d "$__rx_src" ]; then __rx_xfer_fail 2 "$__rx_src is a directory"; return; fi
    if [ ! -e "$__rx_src" ]; then __rx_xfer_fail 2 "$__rx_src: no such file"; return; fi
    if [ ! -f "$__rx_src" ]; then __rx_xfer_fail 2 "$__rx_src is not a regular file"; return; fi
    exec 3<"$__rx_src" || { __rx_xfer_fail 3 "cannot open $__rx_src (permission denied?)"; return; }
    __rx_before=$(__rx_get_stat) || { __rx_xfer_fail 3 "cannot stat $__rx_src"; return; }
    __rx_get_bigpipe "${__rx_before%% *}"
    cat <&3 || { __rx_xfer_fail 3 "reading $__rx_src failed"; return; }
    __rx_after=$(__rx_get_stat)
    exec 3<&-
    if [ "$__rx_before" != "$__rx_after" ]; then
        __rx_xfer_fail 4 "$__rx_src changed while it was read (size, mtime, ctime before: $__rx_before; after: $__rx_after): the download is not whole"
        return
    fi
}
