# rexec put and get: what both share (remote/put.sh, remote/get.sh). The renderer puts this file
# before either.

__rx_xfer_fail() { # code message
    printf 'rexec %s: %s\n' "$__rx_xfer_op" "$2" >&2
    return "$1"
}

# The controller's path rules (src/config/transfer.c) again, for a catalog edited by hand.
__rx_xfer_path_ok() {
    case $1 in
    /*) ;;
    *) __rx_xfer_fail 2 "$1: not an absolute path"; return ;;
    esac
    case $1/ in
    */./* | */../* | *//*) __rx_xfer_fail 2 "$1: a '.', '..' or empty path component"; return ;;
    *[[:cntrl:]]*) __rx_xfer_fail 2 "the path holds a control character"; return ;;
    esac
}
