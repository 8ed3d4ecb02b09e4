#!/usr/bin/env bash
# completions/rexec completes commands, flags, host names, @groups (also after a comma) and action
# names from the workspace (the one --workspace names), and offers nothing from a bad workspace.
tid="completion: commands, flags, hosts, groups, actions"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

# A workspace needs no running sshd for listings: write one.
WS=$RX_TMP/ws
mkdir -m 700 "$WS"
cat >"$WS/rexec.json" <<'JSON'
{"hosts": {"web1": {"address": "127.0.0.1", "user": "u", "key": "k"},
           "web2": {"address": "127.0.0.1", "user": "u", "key": "k"},
           "db1":  {"address": "127.0.0.1", "user": "u", "key": "k"}},
 "groups": {"web": ["web1", "web2"], "all": ["web1", "web2", "db1"]},
 "actions": {"sys.uname": {"risk": "L0", "command": "uname -a"},
             "sys.uptime": {"risk": "L0", "command": "uptime"},
             "svc.restart": {"risk": "L2", "command": "echo {unit}",
                             "params": {"unit": {"type": "string"}}}}}
JSON
chmod 600 "$WS/rexec.json"
bindir=$(dirname "$REXEC_BIN")

# comp LINE: COMPREPLY for LINE (cursor at the end), sorted, on one line
comp() {
    PATH=$bindir:$PATH bash -c '. "$1"; COMP_LINE=$2; COMP_POINT=${#2}; COMP_WORDS=(); COMP_CWORD=0
        _rexec; printf "%s\n" "${COMPREPLY[@]}" | LC_ALL=C sort | xargs' _ "$REXEC_SRC/completions/rexec" "$1"
}
check() { assert_eq "$2" "$(comp "$1")" "completion of '$1'"; }

bash -c '. "$1"; complete -p rexec' _ "$REXEC_SRC/completions/rexec" | grep -q -- '-F _rexec rexec' \
    || fail "the script does not register _rexec for rexec"
check "rexec r" "run"
check "rexec a" "actions approvals approve audit"
comp "rexec " >"$OUT"
for c in run eval check hosts actions groups approve approvals audit serve help; do
    grep -qw -- "$c" "$OUT" || fail "'rexec <TAB>' does not offer $c: $(cat "$OUT")"
done
grep -q __complete "$OUT" && fail "the hidden __complete helper is offered"
check "rexec --w" "--workspace"
check "rexec run --pa" "--parallel --param"
check "rexec approvals --p" "--prune"
check "rexec audit " "head prune recover show verify"
check "rexec audit recover --inc" "--include-unregistered"
# each subcommand offers its own flags only (verify rejects --reset, --before, --host: 64)
check "rexec audit verify --" "--head --help --json --key"
check "rexec audit show --" "--action --help --host --json --run --since"
check "rexec evidence " "prune"
check "rexec evidence prune --" "--help --json --keep --older-than"
check "rexec hosts " "import-ansible import-ssh-config"
check "rexec hosts import-ansible --" "--groups --help"
check "rexec hosts import-ansible $WS/rexec.js" "$WS/rexec.json"
check "rexec serve --" "--help --idle-timeout --log --metrics-file --metrics-interval-s --socket --stdin-timeout"
check "rexec serve --log " ""
check "rexec -w $WS run " "@all @web db1 web1 web2"
check "rexec -w $WS run w" "web1 web2"
# '@' breaks words for bash (COMP_WORDBREAKS): the reply is what follows it
check "rexec --workspace=$WS check @w" "web"
check "rexec -w $WS run web1,d" "web1,db1"
check "rexec -w $WS run web1 sys.u" "sys.uname sys.uptime"
check "rexec -w $WS run --json @web s" "svc.restart sys.uname sys.uptime"
check "rexec -w $WS run --param unit=x web1 svc" "svc.restart"
REXEC_WORKSPACE=$WS check "rexec eval web2 svc" "svc.restart"
check "rexec -w $RX_TMP/nonexistent run " ""
assert_exit 64 "$REXEC_BIN" -w "$WS" __complete nothing
pass
