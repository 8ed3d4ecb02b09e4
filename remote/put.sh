# rexec put (docs/remote-contract.md, "Files: put and get"): what a put action runs on the VM.
# The renderer puts this file before the catalog's fixed line
#   __rx_put "PATH" "$content_sha256" "$content_size" 'MODE' 'OWNER'
# in the call's shell; PATH's placeholders and the two content values are bound as data like
# every parameter. Its stdin is the file's bytes (content_size of them), piped as they arrive,
# then a trailer: their SHA-256 as the controller took it while sending them, 64 lowercase hex
# and a newline (src/api/call_put.c). content_sha256 may be empty (rexec put sends none: it
# hashes the file on the one pass that sends it); when given, the trailer must equal it.
# The bytes go to a temporary file in the destination's directory; its size and SHA-256 are
# checked against the controller's trailer (and content_sha256), its owner and mode set, it is synced, and only then renamed
# over the destination (rename(2) is atomic and replaces the name, never what a link points
# to). A failure, or a stop (TERM from timeout, a cancel, a lost connection), removes the
# temporary file and leaves the destination as it was.
# Exit codes: 0 done; 2 refused (the path, or what is at the destination); 3 cannot write
# (directory missing or not writable, disk full, owner or mode refused, sync failed); 4 the
# bytes that arrived are not the controller's (size, SHA-256, or no trailer after them).

# The SHA-256 of stdin, hex first on the line: OpenSSL's where the VM has it (it uses the CPU's
# SHA instructions: a quarter of sha256sum's CPU time), else coreutils'.
__rx_put_hash() {
    if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r; else sha256sum; fi
}

# Writes stdin to the temporary file ($1) and the same bytes to stdout (the hash), as tee does,
# but without copying them through its own memory where the VM allows: tee(2) duplicates what
# is in the stdin pipe into the hash's pipe, splice(2) moves the same bytes into the file (the
# one copy a file write needs), never more than the file's size (the trailer follows), and every 8 MiB sync_file_range(2) starts their writeback, so
# that the sync before the rename has little left to wait for. tee(2) refusing (EINVAL: stdin
# is not a pipe) falls back to read/write. Exit 0 when stdin ended, 1 on an error. ARGV: the
# file, the file's size, then the syscall numbers of splice, tee and sync_file_range. The pipe to the hash is
# grown to 1 MiB as remote/copier.sh grows its own.
__rx_put_plcopy='binmode STDIN; binmode STDOUT; fcntl(STDOUT, 1031, 1048576); my ($f, $max, $sp, $te, $sf) = @ARGV; $max += 0; $sp += 0; $te += 0; $sf += 0;
open(my $o, "+<", $f) or exit 1; binmode $o; my $fd = fileno $o; my ($off, $done, $b) = (0, 0);
while ($off < $max) { my $r; my $w = $max - $off; $w = 1048576 if $w > 1048576;
if ($te) { $r = syscall($te, 0, 1, $w, 0); if ($r < 0) { exit 1 unless $! == 22 && !$off; $te = 0; next }
for (my $k = $r; $k > 0;) { my $s = syscall($sp, 0, 0, $fd, 0, $k, 0); exit 1 if $s <= 0; $k -= $s } }
else { $r = sysread(STDIN, $b, $w); exit 1 unless defined $r;
for my $h ($o, *STDOUT) { for (my $w = 0; $w < $r;) { my $n = syswrite($h, $b, $r - $w, $w); exit 1 unless $n; $w += $n } } }
last unless $r; $off += $r;
if ($sf && $off - $done >= 8388608) { syscall($sf, $fd, $done, $off - $done, 2); $done = $off } }
close $o or exit 1; exit 0'

# tee the file's SIZE ($1) bytes into it, with the perl above where it runs (tried first on
# nothing: a perl that cannot must not take the bytes), else head (which reads no more than
# it must) and coreutils' tee.
__rx_put_write() {
    local __rx_sys=
    case $HOSTTYPE in
    x86_64) __rx_sys='275 276 277' ;;
    aarch64) __rx_sys='76 77 84' ;;
    esac
    if [ -n "$__rx_sys" ] && command -v perl >/dev/null 2>&1 &&
        (unset PERL5OPT; exec perl -e "$__rx_put_plcopy" -- "$__rx_put_tmp" 0 $__rx_sys) </dev/null >/dev/null 2>&1; then
        (unset PERL5OPT; exec perl -e "$__rx_put_plcopy" -- "$__rx_put_tmp" "$1" $__rx_sys)
    else
        head -c "$1" | tee -- "$__rx_put_tmp"
    fi
}

__rx_put_clean() {
    [ -z "$__rx_put_tmp" ] || rm -f -- "$__rx_put_tmp"
    __rx_put_tmp=
}

# What is at the destination may be replaced only when it is a regular file (or nothing).
__rx_put_dest_ok() {
    if [ -L "$1" ]; then __rx_xfer_fail 2 "$1 is a symbolic link: refusing to replace it"; return; fi
    if [ -d "$1" ]; then __rx_xfer_fail 2 "$1 is a directory"; return; fi
    if [ -e "$1" ] && [ ! -f "$1" ]; then __rx_xfer_fail 2 "$1 is not a regular file"; return; fi
    return 0
}

# Owner, then mode: the given mode, else the old file's, else what `cat > file` would give.
__rx_put_attrs() { # dest mode owner
    local __rx_m
    if [ -n "$3" ] && ! chown -- "$3" "$__rx_put_tmp"; then
        __rx_xfer_fail 3 "cannot give $1 the owner $3"; return
    fi
    if [ -n "$2" ]; then
        __rx_m=$2
    elif [ -f "$1" ]; then
        __rx_m=$(stat -c %a -- "$1") || __rx_m=
    fi
    [ -n "$__rx_m" ] || printf -v __rx_m '%o' $((0666 & ~$(umask)))
    chmod -- "$__rx_m" "$__rx_put_tmp" || { __rx_xfer_fail 3 "cannot set the mode $__rx_m"; return; }
}

# The bytes that arrived must be the controller's: their size on disk, then the trailer that
# follows them must be the SHA-256 that __rx_put_hash took of them on their way in
# (__rx_put_sha), and content_sha256 when the caller gave one. The trailer is read in the C
# locale, so that read -N counts bytes.
__rx_put_verify() { # dest sha256 size
    local __rx_got __rx_t LC_ALL=C
    __rx_got=$(stat -c %s -- "$__rx_put_tmp") || { __rx_xfer_fail 3 "cannot stat what was written"; return; }
    if [ "$__rx_got" != "$3" ]; then
        __rx_xfer_fail 4 "received $__rx_got bytes, expected $3: $1 left as it was"; return
    fi
    __rx_got=${__rx_put_sha%% *}
    IFS= read -r -N 65 __rx_t || :
    if [ "${#__rx_t}" != 65 ] && [[ $__rx_t =~ ^[0-9a-f]*$ ]]; then
        __rx_xfer_fail 4 "the stream ended before the file's SHA-256 trailer (the controller stopped sending: the file changed, or the connection was lost): $1 left as it was"
        return
    fi
    if ! [[ $__rx_t =~ ^[0-9a-f]{64}$'\n'$ ]]; then
        __rx_xfer_fail 4 "what followed the $3 bytes is not the SHA-256 trailer (more bytes than content_size arrived?): $1 left as it was"
        return
    fi
    __rx_t=${__rx_t%$'\n'}
    if [ "$__rx_got" != "$__rx_t" ]; then
        __rx_xfer_fail 4 "the SHA-256 of what arrived is $__rx_got, not the controller's $__rx_t: $1 left as it was"
        return
    fi
    if [ -n "$2" ] && [ "$2" != "$__rx_t" ]; then
        __rx_xfer_fail 4 "the SHA-256 of what arrived is $__rx_t, not the controller's content_sha256 $2: $1 left as it was"
        return
    fi
}

__rx_put() { # path sha256 size mode owner
    local __rx_put_dest=$1 __rx_put_dir __rx_put_rc
    __rx_xfer_op='put'
    __rx_xfer_path_ok "$__rx_put_dest" || return
    __rx_put_dest_ok "$__rx_put_dest" || return
    __rx_put_dir=${__rx_put_dest%/*}
    [ -n "$__rx_put_dir" ] || __rx_put_dir=/
    [ -d "$__rx_put_dir" ] || { __rx_xfer_fail 2 "directory $__rx_put_dir does not exist"; return; }
    # A lost connection leaves stderr a broken pipe: bash's own note that cat was terminated
    # would kill it with SIGPIPE before its TERM trap removed the temporary file.
    trap '' PIPE
    trap '__rx_put_clean; exit 143' TERM
    trap '__rx_put_clean; exit 129' HUP
    trap '__rx_put_clean; exit 130' INT
    __rx_put_tmp=$(mktemp -- "$__rx_put_dir/.rexec-put.XXXXXXXXXX" 2>/dev/null) || {
        __rx_put_tmp=
        __rx_xfer_fail 3 "cannot create a file in $__rx_put_dir (not writable?)"; return
    }
    # tee writes the file and hands the same bytes to the hash, which takes them as they arrive
    # (on another CPU) instead of reading the whole file again afterwards.
    if ! __rx_put_sha=$(__rx_put_write "$3" | __rx_put_hash; exit "${PIPESTATUS[0]}"); then
        __rx_put_clean
        __rx_xfer_fail 3 "writing the file in $__rx_put_dir failed (disk full?): $__rx_put_dest left as it was"
        return
    fi
    __rx_put_verify "$__rx_put_dest" "$2" "$3" && __rx_put_attrs "$__rx_put_dest" "$4" "$5"
    __rx_put_rc=$?
    if [ "$__rx_put_rc" != 0 ]; then
        __rx_put_clean
        return "$__rx_put_rc"
    fi
    if ! sync -- "$__rx_put_tmp"; then
        __rx_put_clean
        __rx_xfer_fail 3 "cannot sync the file in $__rx_put_dir: $__rx_put_dest left as it was"; return
    fi
    __rx_put_dest_ok "$__rx_put_dest" || { __rx_put_rc=$?; __rx_put_clean; return "$__rx_put_rc"; }
    if ! mv -T -f -- "$__rx_put_tmp" "$__rx_put_dest"; then
        __rx_put_clean
        __rx_xfer_fail 3 "cannot rename the file into $__rx_put_dest: left as it was"; return
    fi
    __rx_put_tmp=
    trap - TERM HUP INT
    # the rename itself is durable once the directory is synced
    sync -- "$__rx_put_dir" 2>/dev/null
    return 0
}
