# rexec bulk stdin copier (docs/remote-contract.md, "Stdin of unknown length"): sent after
# remote/wrapper.sh only for a framed stdin or one of 16 MiB or more (render.c), so a small
# call does not pay for its perl start (the probe below: a few ms).
#
# One perl process copies every frame (or the N bytes) from the channel (stdin) to stdout
# instead of one dd per 4 MiB frame, and pipe to pipe it moves the pages with splice(2) rather
# than through its own memory: the copy costs the VM, which shares its CPUs with sshd and the
# command, about a fifth of the dd loop's CPU (docs/PERFORMANCE.md). It keeps the dd loop's
# contract: a header is read byte by byte and a frame's bytes with reads of at most what is
# left of it, so nothing past the end frame (or byte N) is taken from the channel; exit 0 when
# all came, 2 when the channel ended first (or a header was not one), 1 on a write error (or
# SIGPIPE: nobody reads any more). ARGV: N (-1: frames), splice(2)'s syscall number (0: none;
# EINVAL, when an end is not a pipe, falls back to read/write). perl-base only (no modules);
# every syscall argument is a number (perl would pass a string as a pointer). With frames, a
# third argument F says that the first frame's header was read already and announced F bytes.
# Both pipes are first grown to 1 MiB (F_SETPIPE_SZ, 1031; pipe-max-size's default; refused
# quietly where a limit says no): sshd, the copier and the command then wake each other a
# sixteenth as often as with 64 KiB pipes, which brought the VM's CPU for a piped sha256sum
# down to the bare libssh2 writer's (docs/PERFORMANCE.md).
__rx_plcopy='binmode STDIN; binmode STDOUT; fcntl(STDIN, 1031, 1048576); fcntl(STDOUT, 1031, 1048576); my ($n, $sp, $first) = @ARGV; $sp += 0; my ($b, $c, $h);
sub cp { my $left = 0 + shift; while ($left > 0) {
my $k = $left < 1048576 ? $left : 1048576; my $r;
if ($sp) { $r = syscall($sp, 0, 0, 1, 0, $k, 0); if ($r < 0) { exit 1 unless $! == 22; $sp = 0; next } }
else { $r = sysread(STDIN, $b, $k); exit 1 unless defined $r;
for (my $o = 0; $o < $r;) { my $w = syswrite(STDOUT, $b, $r - $o, $o); exit 1 unless $w; $o += $w } }
exit 2 unless $r; $left -= $r } }
if ($n >= 0) { cp($n); exit 0 }
cp($first) if $first;
while (1) { $h = ""; while (1) { sysread(STDIN, $c, 1) or exit 2; last if $c eq "\n"; $h .= $c; exit 2 if length $h > 10 }
exit 2 unless $h =~ /^(0|[1-9][0-9]*)$/; exit 0 if $h eq "0"; cp($h) }'

# splice(2)'s number where it is known (x86_64, aarch64), else read/write.
case $HOSTTYPE in
x86_64) __rx_splice=275 ;;
aarch64) __rx_splice=76 ;;
*) __rx_splice=0 ;;
esac

# Run as __rx_copy's body when __rx_pl=1, in the background as the dd it replaces ($__rx_cp, so the
# caller's TERM trap can KILL it); PERL5OPT could load anything, so it goes. $1: with frames,
# the first frame's length when __rx_copy has read its header.
__rx_copy_pl() {
    local __rx_n=$__rx_stdin_len
    [ "${__rx_stdin_framed:-0}" != 1 ] || __rx_n=-1
    (unset PERL5OPT; exec perl -e "$__rx_plcopy" -- "$__rx_n" "$__rx_splice" "${1:-0}") <&7 &
    __rx_cp=$!
    wait "$__rx_cp"
}

# Picked once, before a byte of the stdin is copied: a perl that cannot run the copier (none,
# or broken) is found then, not once the command runs (where its failure could not be told from
# a command that stopped reading its stdin), and the dd loop is used instead. A stdin of known
# length (16 MiB or more, or the copier would not be here) is probed now; frames (a pipe, whose
# length nobody knows) when __rx_copy has read the first frame's header and that frame is bulk
# (RX_COPIER_FRAME bytes or more): a small pipe (`echo x | rexec run ... --stdin -`) then never
# pays for starting perl (the probe and the copier: ~10 ms).
__rx_pl_probe() {
    __rx_pl=0
    if command -v perl >/dev/null 2>&1 &&
        (unset PERL5OPT; exec perl -e "$__rx_plcopy" -- 0 0) </dev/null >/dev/null 2>&1; then
        __rx_pl=1
    fi
}
__rx_pl_frame=1048576
[ "${__rx_stdin_framed:-0}" = 1 ] || __rx_pl_probe
