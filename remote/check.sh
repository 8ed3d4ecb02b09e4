# rexec remote probe: what `rexec check HOST` runs (after wrapper.sh, whose __rx_pick it shares).
# Prints one "key=value" line per fact; the controller parses them.
__rx_check() {
    local __rx_t
    printf 'bash=%s\n' "$BASH_VERSION"
    printf 'user=%s\n' "${USER:-$(id -un 2>/dev/null)}"
    printf 'uid=%s\n' "$EUID"
    for __rx_t in timeout base64 head dd setsid unshare systemd-run; do
        if command -v "$__rx_t" >/dev/null 2>&1; then printf '%s=yes\n' "$__rx_t"; else printf '%s=no\n' "$__rx_t"; fi
    done
    if [ -n "$EPOCHREALTIME" ]; then printf 'epochrealtime=yes\n'; else printf 'epochrealtime=no\n'; fi
    __rx_pick
    # A namespace that sysctls allow may still be refused (containers, LSMs): try it once.
    if [ "$__rx_cont" = pid-namespace ] && ! "${__rx_pre[@]}" true </dev/null >/dev/null 2>&1; then
        __rx_cont=process-group
    fi
    printf 'containment=%s\n' "$__rx_cont"
    printf '\036rexec:%s:start\n' "$__rx_nonce" >&2
    __rx_end cmd 0 0
}
