#!/usr/bin/env bash
# remote/provision.sh — prepare a fresh tool VM for rexec. Run it as root ON THE VM:
#
#     scp remote/provision.sh keys/id_ed25519.pub root@vm:
#     ssh root@vm bash provision.sh id_ed25519.pub
#
# It creates the account rexec runs actions as (default `rexec`, a system user with bash and no
# password), installs the controller's public key for it in a root-owned file with the
# `restrict` option (no pty, no forwarding, no ~/.ssh/rc; exec still works, which is all rexec
# uses), adds an sshd drop-in for that account only (keys only, MaxSessions, ClientAliveInterval,
# SetEnv SHLVL=1), checks it with `sshd -t` and reloads sshd, checks what the wrapper needs
# (bash >= 5, coreutils timeout, head and dd, setsid, unshare) and whether unprivileged user
# namespaces work for the account, and prints the containment the VM will offer and a
# rexec.json host entry. Idempotent: a second run changes nothing and says so. Nothing of this
# script is embedded in rexec (scripts/embed.cmake skips it); see docs/remote-contract.md.
set -euo pipefail
shopt -s extglob
umask 022

PROG=provision.sh
USER_NAME=rexec
HOME_DIR=""
FROM=""
MAX_SESSIONS=32
ALIVE=15
DRY_RUN=0
RELOAD=1
KEY_ARG=""
SSHD_CONFIG=/etc/ssh/sshd_config
DROPIN_DIR=/etc/ssh/sshd_config.d
KEYS_DIR=/etc/ssh/rexec

usage() {
    cat <<EOF
usage: $PROG [OPTIONS] KEY

Prepares this machine (a tool VM) for rexec. Run as root on the VM.

KEY is the controller's public key: a .pub file, '-' for stdin, or the key text itself
("ssh-ed25519 AAAA... comment"). One key; it is installed with the options
'restrict' (and 'from="..."' with --from).

Options:
  --user NAME          the account rexec logs in as (default: rexec; never root)
  --home DIR           its home directory when it is created (default: /var/lib/NAME)
  --from PATTERNS      only accept the key from these addresses (sshd 'from=' list,
                       e.g. 10.0.0.5,10.0.1.0/24)
  --max-sessions N     sshd MaxSessions for the account (default: 32; keep rexec's
                       max_channels for this host below it)
  --client-alive S     sshd ClientAliveInterval (default: 15; with ClientAliveCountMax 3 a
                       vanished controller is noticed within 3*S seconds and its commands stop)
  --no-reload          do not reload sshd (the drop-in takes effect at its next reload)
  --dry-run            check and show what would change; change nothing
  -h, --help           this text

Exit status: 0 done (or nothing to do), 1 a check or a step failed, 2 usage error.
EOF
}

say() { printf '%s\n' "$*"; }
note() { printf '  %-12s %s\n' "$1" "$2"; }
warn() { printf '%s: warning: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit 1; }
die_usage() { printf '%s: %s (see --help)\n' "$PROG" "$*" >&2; exit 2; }

# ---- arguments -------------------------------------------------------------------------------

while [[ $# -gt 0 ]]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --dry-run) DRY_RUN=1 ;;
        --no-reload) RELOAD=0 ;;
        --user|--home|--from|--max-sessions|--client-alive)
            [[ $# -ge 2 ]] || die_usage "$1 needs a value"
            case $1 in
                --user) USER_NAME=$2 ;;
                --home) HOME_DIR=$2 ;;
                --from) FROM=$2 ;;
                --max-sessions) MAX_SESSIONS=$2 ;;
                --client-alive) ALIVE=$2 ;;
            esac
            shift ;;
        --user=*) USER_NAME=${1#*=} ;;
        --home=*) HOME_DIR=${1#*=} ;;
        --from=*) FROM=${1#*=} ;;
        --max-sessions=*) MAX_SESSIONS=${1#*=} ;;
        --client-alive=*) ALIVE=${1#*=} ;;
        --) shift; break ;;
        -) [[ -z $KEY_ARG ]] || die_usage "one KEY only"; KEY_ARG=- ;;
        -*) die_usage "unknown option $1" ;;
        *) [[ -z $KEY_ARG ]] || die_usage "one KEY only"; KEY_ARG=$1 ;;
    esac
    shift
done
if [[ $# -gt 0 ]]; then
    [[ -z $KEY_ARG && $# -eq 1 ]] || die_usage "one KEY only"
    KEY_ARG=$1
fi
[[ -n $KEY_ARG ]] || die_usage "missing KEY (the controller's public key)"
[[ $USER_NAME =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] || die_usage "--user: '$USER_NAME' is not a valid account name"
[[ $USER_NAME != root ]] || die_usage "--user root: rexec needs an account of its own (unprivileged user namespaces give it pid-namespace containment without root)"
if ! [[ $MAX_SESSIONS =~ ^[0-9]{1,4}$ ]] || (( MAX_SESSIONS < 1 || MAX_SESSIONS > 1024 )); then
    die_usage "--max-sessions: a number from 1 to 1024"
fi
if ! [[ $ALIVE =~ ^[0-9]{1,4}$ ]] || (( ALIVE < 1 || ALIVE > 3600 )); then
    die_usage "--client-alive: seconds, 1 to 3600"
fi
[[ -z $FROM || $FROM =~ ^[][0-9A-Za-z.:/*?,!_-]+$ ]] || die_usage "--from: a comma-separated list of address patterns"
HOME_DIR=${HOME_DIR:-/var/lib/$USER_NAME}
[[ $HOME_DIR == /* ]] || die_usage "--home: an absolute path"
KEYS_FILE=$KEYS_DIR/$USER_NAME.keys
DROPIN=$DROPIN_DIR/50-rexec-$USER_NAME.conf

if [[ $DRY_RUN == 1 ]]; then
    say "$PROG: dry run: nothing will be changed"
elif [[ $EUID -ne 0 ]]; then
    die "run me as root on the tool VM (or use --dry-run)"
fi

# ---- the key ---------------------------------------------------------------------------------

read_key() {
    local text
    if [[ $KEY_ARG == - ]]; then
        text=$(cat)
    elif [[ -f $KEY_ARG ]]; then
        text=$(cat -- "$KEY_ARG")
    elif [[ $KEY_ARG == @(ssh-|ecdsa-|sk-)* ]]; then
        text=$KEY_ARG
    else
        die "KEY: no such file: $KEY_ARG"
    fi
    # one line, no options of its own: "TYPE BASE64 [COMMENT]"
    text=${text%$'\n'}
    [[ $text != *PRIVATE\ KEY* ]] || die "KEY: this is a PRIVATE key; give the .pub file"
    [[ $text != *$'\n'* ]] || die "KEY: give exactly one public key (one line)"
    [[ $text =~ ^(ssh-[a-z0-9-]+|ecdsa-sha2-[a-z0-9-]+|sk-[a-z0-9@.-]+)\ ([A-Za-z0-9+/]+=*)(\ [^\"]*)?$ ]] ||
        die "KEY: not a public key line ('TYPE BASE64 [COMMENT]', without options)"
    KEY_TYPE=${BASH_REMATCH[1]}
    KEY_BLOB=${BASH_REMATCH[2]}
    KEY_COMMENT=${BASH_REMATCH[3]# }
    if command -v ssh-keygen >/dev/null 2>&1; then
        KEY_FP=$(printf '%s %s\n' "$KEY_TYPE" "$KEY_BLOB" | ssh-keygen -l -E sha256 -f - 2>/dev/null |
                 awk '{ print $2 }') || true
        [[ -n $KEY_FP ]] || die "KEY: ssh-keygen does not accept it as a public key"
    else
        KEY_FP="(ssh-keygen missing: not verified)"
    fi
}

key_line() {
    local opts=restrict
    [[ -z $FROM ]] || opts+=",from=\"$FROM\""
    printf '%s %s %s%s\n' "$opts" "$KEY_TYPE" "$KEY_BLOB" "${KEY_COMMENT:+ $KEY_COMMENT}"
}

# ---- the sshd drop-in ------------------------------------------------------------------------

dropin_text() {
    cat <<EOF
# Written by rexec's remote/provision.sh for the account rexec runs actions as.
# Re-run provision.sh to change it; docs/remote-contract.md explains each line.
Match User $USER_NAME
    # the controller's key, in a root-owned file the account cannot add keys to
    AuthorizedKeysFile $KEYS_FILE
    AuthenticationMethods publickey
    # rexec runs 'bash -s' on exec channels: no terminal, no forwarding of any kind
    PermitTTY no
    DisableForwarding yes
    PermitTunnel no
    PermitUserRC no
    # rexec multiplexes calls as channels of one connection
    MaxSessions $MAX_SESSIONS
    # a controller that vanished is noticed, its channels closed, and the wrapper stops
    # the commands (EOF on their channel)
    ClientAliveInterval $ALIVE
    ClientAliveCountMax 3
    # Debian's bash sources ~/.bashrc for commands sshd runs when SHLVL is unset
    SetEnv SHLVL=1
Match all
EOF
}

# ---- checks (read-only) ----------------------------------------------------------------------

FAILED=0
problem() { printf '%s: %s\n' "$PROG" "$*" >&2; FAILED=1; }

check_tools() {
    local b v
    b=$(command -v bash 2>/dev/null) || { problem "bash is missing (rexec runs 'bash -s')"; return; }
    # shellcheck disable=SC2016 # expanded by that bash
    v=$("$b" -c 'echo "${BASH_VERSINFO[0]}.${BASH_VERSINFO[1]} ${EPOCHREALTIME:+yes}"')
    BASH_VER=${v% *}
    if (( ${BASH_VER%%.*} < 5 )) || [[ $v != *yes ]]; then
        problem "bash $BASH_VER: rexec needs bash >= 5.0 (EPOCHREALTIME tells a real timeout from an exit 124)"
    fi
    if ! command -v timeout >/dev/null 2>&1; then
        problem "coreutils timeout is missing"
    elif ! timeout --kill-after=1 5 true 2>/dev/null; then
        problem "timeout does not support --kill-after (coreutils too old)"
    fi
    if ! command -v head >/dev/null 2>&1 || [[ $(printf 'abc' | head -c 2) != ab ]]; then
        problem "head -c (coreutils) is missing or broken"
    fi
    # the wrapper copies a call's stdin with dd's count_bytes (coreutils >= 8.20)
    if ! command -v dd >/dev/null 2>&1 ||
        [[ $(printf 'abcd' | dd bs=65536 iflag=fullblock,count_bytes count=3 status=none 2>/dev/null) != abc ]]; then
        problem "dd with iflag=fullblock,count_bytes and status=none (coreutils >= 8.20) is missing"
    fi
    command -v setsid >/dev/null 2>&1 || warn "setsid (util-linux) is missing"
    UNSHARE=yes
    if ! command -v unshare >/dev/null 2>&1; then
        UNSHARE=no
    elif ! unshare --help 2>&1 | grep -q -- '--kill-child'; then
        UNSHARE="too old (no --kill-child)"
    elif ! unshare --help 2>&1 | grep -q -- '--map-current-user'; then
        UNSHARE="too old (no --map-current-user: util-linux >= 2.38)"
    fi
}

check_sshd() {
    SSHD=$(command -v sshd 2>/dev/null || echo /usr/sbin/sshd)
    [[ -x $SSHD ]] || { problem "sshd is missing (openssh-server)"; return; }
    [[ -f $SSHD_CONFIG ]] || { problem "$SSHD_CONFIG is missing"; return; }
    if ! grep -Eiq "^[[:space:]]*Include[[:space:]]+(\"?)$DROPIN_DIR/\*\.conf" "$SSHD_CONFIG"; then
        problem "$SSHD_CONFIG does not include $DROPIN_DIR/*.conf: add the line
    Include $DROPIN_DIR/*.conf
  at its top (OpenSSH >= 8.2), then run me again"
    fi
    if grep -Eiq '^[[:space:]]*PermitUserEnvironment[[:space:]]+yes' "$SSHD_CONFIG"; then
        warn "PermitUserEnvironment yes: ~/.ssh/environment could change the wrapper's environment"
    fi
}

# The kernel's say on unprivileged user namespaces (the same sysctls the wrapper reads).
userns_sysctls() {
    local v
    if read -r v 2>/dev/null </proc/sys/user/max_user_namespaces && [[ $v == 0 ]]; then
        echo "user.max_user_namespaces = 0"; return
    fi
    if read -r v 2>/dev/null </proc/sys/kernel/unprivileged_userns_clone && [[ $v == 0 ]]; then
        echo "kernel.unprivileged_userns_clone = 0"; return
    fi
    if read -r v 2>/dev/null </proc/sys/kernel/apparmor_restrict_unprivileged_userns && [[ $v == 1 ]]; then
        echo "kernel.apparmor_restrict_unprivileged_userns = 1"; return
    fi
}

# Sets CONTAINMENT and WHY: what the wrapper will pick for the account, tried for real.
probe_containment() {
    local as=$1 off
    CONTAINMENT=process-group
    if [[ $UNSHARE != yes ]]; then
        WHY="unshare: $UNSHARE"
        return
    fi
    off=$(userns_sysctls)
    if [[ -n $off ]]; then
        WHY="unprivileged user namespaces are off ($off)"
        return
    fi
    if [[ $EUID -ne 0 ]]; then
        WHY="not tried (run as root to try it as $as)"
        CONTAINMENT="pid-namespace (untried)"
        return
    fi
    if ! command -v runuser >/dev/null 2>&1; then
        WHY="not tried (runuser is missing)"
        CONTAINMENT="pid-namespace (untried)"
        return
    fi
    if runuser -u "$as" -- unshare --user --map-current-user --pid --fork --kill-child -- true \
            </dev/null >/dev/null 2>&1; then
        CONTAINMENT="pid-namespace"
        WHY="unprivileged user namespaces work for $as"
    else
        WHY="unshare --user --pid fails for $as (a container or an LSM refuses it)"
    fi
}

# ---- steps -----------------------------------------------------------------------------------

CHANGED_SSHD=0

# install_file PATH MODE CONTENT: writes PATH atomically unless it already holds CONTENT.
install_file() {
    local path=$1 mode=$2 content=$3 tmp
    if [[ -f $path ]] && [[ $(cat -- "$path"; echo x) == "$content"x ]] &&
        [[ $(stat -c %a -- "$path") == "$mode" ]]; then
        note unchanged "$path"
        return 1
    fi
    if [[ $DRY_RUN == 1 ]]; then
        note would-write "$path (mode $mode):"
        printf '%s' "$content" | sed 's/^/      | /'
        return 0
    fi
    tmp=$(mktemp "$path.XXXXXX")
    printf '%s' "$content" >"$tmp"
    chmod "$mode" "$tmp"
    chown root:root "$tmp"
    mv -f -- "$tmp" "$path"
    note wrote "$path"
    return 0
}

ensure_user() {
    local entry shell
    if entry=$(getent passwd "$USER_NAME"); then
        IFS=: read -r _ _ USER_UID _ _ USER_HOME shell <<<"$entry"
        (( USER_UID != 0 )) || die "account $USER_NAME has uid 0: refusing"
        note unchanged "account $USER_NAME (uid $USER_UID, home $USER_HOME)"
        if [[ $shell != */bash && $shell != */sh ]]; then
            if [[ $DRY_RUN == 1 ]]; then
                note would-run "usermod -s /bin/bash $USER_NAME   (its shell is $shell)"
            else
                usermod -s /bin/bash "$USER_NAME"
                note changed "shell of $USER_NAME: $shell -> /bin/bash"
            fi
        fi
    else
        USER_HOME=$HOME_DIR
        if [[ $DRY_RUN == 1 ]]; then
            note would-run "useradd --system --user-group --create-home --home-dir $HOME_DIR --shell /bin/bash --no-log-init $USER_NAME"
            USER_UID="(new)"
        else
            useradd --system --user-group --create-home --home-dir "$HOME_DIR" --shell /bin/bash \
                --no-log-init --comment "rexec actions" "$USER_NAME"
            chmod 0750 "$HOME_DIR"
            USER_UID=$(id -u "$USER_NAME")
            note created "account $USER_NAME (uid $USER_UID, home $HOME_DIR)"
        fi
    fi
    # No password, and not "locked" ('!'): sshd without PAM refuses a locked account even for
    # a key. '*' matches no password.
    local pw
    pw=$(getent shadow "$USER_NAME" 2>/dev/null | cut -d: -f2) || true
    if [[ -n $pw && $pw != '*' ]]; then
        if [[ $DRY_RUN == 1 ]]; then
            note would-run "usermod -p '*' $USER_NAME   (no password, not locked)"
        else
            usermod -p '*' "$USER_NAME"
            note changed "password of $USER_NAME: none ('*')"
        fi
    fi
}

ensure_keys() {
    if [[ ! -d $KEYS_DIR ]]; then
        if [[ $DRY_RUN == 1 ]]; then
            note would-run "mkdir -m 0755 $KEYS_DIR"
        else
            mkdir -p "$KEYS_DIR"
            chmod 0755 "$KEYS_DIR"
            chown root:root "$KEYS_DIR"
        fi
    fi
    # root-owned and 0644: sshd reads it as the account; the account cannot change it
    install_file "$KEYS_FILE" 644 "$(key_line)"$'\n' || true
}

ensure_dropin() {
    local old="" had=0
    if [[ -f $DROPIN ]]; then
        old=$(cat -- "$DROPIN"; echo x)
        had=1
    fi
    install_file "$DROPIN" 644 "$(dropin_text)"$'\n' || return 0
    [[ $DRY_RUN == 0 ]] || return 0
    # sshd -t reads the whole configuration, drop-ins included: a failure undoes the change.
    local out
    if ! out=$("$SSHD" -t 2>&1); then
        if [[ $had == 1 ]]; then printf '%s' "${old%x}" >"$DROPIN"; else rm -f -- "$DROPIN"; fi
        printf '%s\n' "$out" | sed 's/^/  sshd -t: /' >&2
        die "sshd -t refused the configuration with $DROPIN: undone, sshd untouched"
    fi
    note checked "sshd -t accepts the configuration"
    CHANGED_SSHD=1
}

reload_sshd() {
    if [[ $CHANGED_SSHD == 0 ]]; then
        return
    fi
    if [[ $RELOAD == 0 ]]; then
        note not-reloaded "sshd (--no-reload): the drop-in applies from its next reload"
        return
    fi
    if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; then
        if systemctl reload ssh.service 2>/dev/null || systemctl reload sshd.service 2>/dev/null; then
            note reloaded "sshd (systemctl reload)"
            return
        fi
    fi
    local pid
    for f in /run/sshd.pid /var/run/sshd.pid; do
        if [[ -r $f ]] && read -r pid <"$f" && [[ $pid =~ ^[0-9]+$ ]] && kill -HUP "$pid" 2>/dev/null; then
            note reloaded "sshd (SIGHUP to $pid)"
            return
        fi
    done
    warn "could not reload sshd: reload it yourself for $DROPIN to apply"
}

# ---- main ------------------------------------------------------------------------------------

read_key
check_tools
check_sshd
[[ $FAILED == 0 ]] || die "the checks above failed: nothing was changed"

say "$PROG: account $USER_NAME"
ensure_user
ensure_keys
ensure_dropin
reload_sshd

if getent passwd "$USER_NAME" >/dev/null; then
    probe_containment "$USER_NAME"
else
    probe_containment nobody
    WHY="$WHY (tried as nobody: $USER_NAME does not exist yet)"
fi

hostkey=""
if [[ -r /etc/ssh/ssh_host_ed25519_key.pub ]] && command -v ssh-keygen >/dev/null 2>&1; then
    hostkey=$(ssh-keygen -l -E sha256 -f /etc/ssh/ssh_host_ed25519_key.pub 2>/dev/null | awk '{ print $2 }')
fi

say ""
if [[ $DRY_RUN == 1 ]]; then say "$PROG: dry run done (nothing changed)"; else say "$PROG: done"; fi
note user "$USER_NAME (uid $USER_UID, home ${USER_HOME:-$HOME_DIR})"
note key "$KEYS_FILE: restrict${FROM:+,from=\"$FROM\"} $KEY_TYPE $KEY_FP${KEY_COMMENT:+ ($KEY_COMMENT)}"
note sshd "$DROPIN (MaxSessions $MAX_SESSIONS, ClientAliveInterval $ALIVE)"
note tools "bash $BASH_VER, timeout, head, dd, setsid, unshare: $UNSHARE"
note containment "$CONTAINMENT: $WHY"
[[ -z $hostkey ]] || note host-key "$hostkey (ed25519)"
say ""
say "rexec.json host entry (fill in the address; check with 'rexec check HOST'):"
entry="\"address\": \"ADDRESS\", \"user\": \"$USER_NAME\", \"key\": \"keys/id_ed25519\""
if [[ -n $hostkey ]]; then entry+=", \"host_key\": \"$hostkey\""; fi
entry+=", \"max_channels\": $(( MAX_SESSIONS > 8 ? 8 : MAX_SESSIONS ))"
if [[ $CONTAINMENT == process-group ]]; then entry+=", \"containment\": \"process-group\""; fi
say "  \"HOST\": {$entry}"
if [[ $CONTAINMENT == process-group ]]; then
    say "(process-group: a command's setsid or nested-timeout children can outlive a call here,"
    say " and actions that require \"pid-namespace\" are refused on this host)"
fi
