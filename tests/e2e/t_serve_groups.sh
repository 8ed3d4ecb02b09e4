#!/usr/bin/env bash
# serve's access control by Unix group (docs/workspace.md, "serve"; docs/serve-protocol.md,
# "Security"): a serve.clients entry {"group": G, "verbs": [...]} admits the users whose primary
# group is G and the members of G, each with exactly the verbs its entries grant (a user entry
# adds to them, for that user only); a user outside G is refused, saying who and why.
# serve.socket_group gives the socket to that group, mode 0660, so only its members can connect.
# A group that does not exist is refused at start (78) naming serve.clients[N].group or
# serve.socket_group, with no socket left behind, and a reload that names one is refused while
# the running configuration stays.
# shellcheck disable=SC2317 # helpers run via assert_exit
tid="serve: clients by group, socket_group"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

[[ $(id -u) == 0 ]] || skip "needs root to create users and groups"
command -v useradd >/dev/null 2>&1 || skip "needs useradd"
for t in userdel groupadd groupdel setpriv; do
    command -v "$t" >/dev/null 2>&1 || fail "needs $t"
done

# ---- users and groups of our own, removed again however the test ends -------------------------
sfx=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
GRP=rxgc$sfx    # serve.clients' group
SGRP=rxgs$sfx   # serve.socket_group
PRIM=rxgp$sfx   # primary group GRP (and a member of SGRP)
MEMB=rxgm$sfx   # a group of its own; a member of GRP and SGRP
OUTS=rxgo$sfx   # a group of its own; a member of SGRP only: reaches the socket, not admitted
NOGRP=rxgz$sfx  # no such group
USERS_MADE=()
GROUPS_MADE=()
_groups_remove() {  # at the test's exit, once its serve is stopped
    local u g
    for u in ${USERS_MADE[@]+"${USERS_MADE[@]}"}; do
        userdel "$u" || echo "cleanup: userdel $u failed" >&2
        # the user's own group, if userdel left it (USERGROUPS_ENAB no)
        ! getent group "$u" >/dev/null || groupdel "$u" || echo "cleanup: groupdel $u failed" >&2
    done
    for g in ${GROUPS_MADE[@]+"${GROUPS_MADE[@]}"}; do
        groupdel "$g" || echo "cleanup: groupdel $g failed" >&2
    done
}
at_exit _groups_remove
for g in "$GRP" "$SGRP"; do
    groupadd --system "$g" || fail "groupadd $g"
    GROUPS_MADE+=("$g")
done
mkuser() {  # mkuser NAME USERADD_OPTIONS...
    local u=$1
    shift
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$@" "$u" ||
        fail "useradd $u"
    USERS_MADE+=("$u")
}
mkuser "$PRIM" -N -g "$GRP" -G "$SGRP"
mkuser "$MEMB" -U -G "$GRP,$SGRP"
mkuser "$OUTS" -U -G "$SGRP"
! getent group "$NOGRP" >/dev/null || fail "group $NOGRP exists"
assert_eq "$GRP" "$(id -gn "$PRIM")" "primary group of $PRIM"
assert_eq "$MEMB" "$(id -gn "$MEMB")" "primary group of $MEMB"

# as USER [--regid=GROUP] CMD...: CMD as USER with its primary group (or GROUP) and the
# supplementary groups of the user database, as a login would have them.
as() {
    local u=$1 g
    shift
    g=$(id -gn "$u")
    if [[ ${1:-} == --regid=* ]]; then g=${1#--regid=}; shift; fi
    cov_env "$u"
    setpriv --reuid="$u" --regid="$g" --init-groups ${RX_COV[@]+"${RX_COV[@]}"} "$@"
}
as_nobody() {
    cov_env nobody
    setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups ${RX_COV[@]+"${RX_COV[@]}"} "$@"
}

lab_start 1
# the directories on the way to the socket only let others pass
chmod o+x "$RX_TMP"
SOCKDIR=$RX_TMP/run
mkdir -m 0755 "$SOCKDIR"
SOCK=$SOCKDIR/rexec.sock
SERR=$RX_TMP/serve.err

# The protocol: one connection, each LINE sent and its reply printed; "connect: ..." and exit 3
# when the socket cannot be reached; "EOF" when serve hangs up.
PROTO=$RX_TMP/proto.py
cat >"$PROTO" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect: %s" % e.strerror)
    sys.exit(3)
f = s.makefile("rb")
for line in sys.argv[2:]:
    try:
        s.sendall((line + "\n").encode())
    except OSError:
        pass  # serve may already have said why it hangs up: read it
    try:
        reply = f.readline().decode().strip()
    except ConnectionResetError:
        reply = ""  # it hung up with our later lines unread
    print(reply or "EOF")
    if not reply:
        break
PY
chmod 0644 "$PROTO"
proto() { timeout 60 "$RX_PYTHON" "$PROTO" "$SOCK" "$@"; }
ALL_OPS=('{"op": "ping", "id": 1}' '{"op": "hosts", "id": 2}' '{"op": "check", "id": 3, "target": "lab1"}'
    '{"op": "reload", "id": 4}')

# start_groups_serve: start_serve (as root, the workspace's owner) on $SOCK, its stderr in $SERR
# emptied first
start_groups_serve() {
    : >"$SERR"
    SERVE_ERR=$SERR start_serve
}
stop_groups_serve() {
    stop_gently "$SERVE_PID"
    SERVE_PID=
    [[ ! -e $SOCK ]] || fail "serve left $SOCK behind"
}
# serve_refused CODE: a serve that must not start; its stderr in $ERR
serve_refused() {
    assert_exit "$1" timeout 60 "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK"
    [[ ! -e $SOCK ]] || fail "a serve refused at start left $SOCK behind"
}

# ================================================================================================
# 2. serve.clients[N].group naming a group this machine does not have: refused at start
ws_edit 'c["serve"] = {"clients": [{"group": args[0], "verbs": ["run"]},
                                   {"group": args[1], "verbs": ["list"]}]}' "$GRP" "$NOGRP"
serve_refused 78
assert_contains "$ERR" "serve.clients[1].group: no group \"$NOGRP\" on this machine"
assert_not_contains "$ERR" "clients[0]"

# ================================================================================================
# 3a. serve.socket_group naming a group this machine does not have: refused at start, with
# clients (checked with the names) and without (checked when the socket is given away)
ws_edit 'c["serve"] = {"clients": [{"group": args[0], "verbs": ["run"]}], "socket_group": args[1]}' \
    "$GRP" "$NOGRP"
serve_refused 78
assert_contains "$ERR" "serve.socket_group: no group \"$NOGRP\" on this machine"
ws_edit 'c["serve"] = {"socket_group": args[0]}' "$NOGRP"
serve_refused 78
assert_contains "$ERR" "serve.socket_group: no group \"$NOGRP\" on this machine"

# ================================================================================================
# 1 and 3b. the group's users get its verbs, through a socket only socket_group can reach
ws_edit 'c["serve"] = {"clients": [{"group": args[0], "verbs": ["run", "list"]},
                                   {"user": args[1], "verbs": ["eval"]}],
                       "socket_group": args[2]}' "$GRP" "$MEMB" "$SGRP"
start_groups_serve
assert_eq "root $SGRP 660" "$(stat -c '%U %G %a' "$SOCK")" "owner, group and mode of the socket"
assert_contains "$SERR" "rexec serve: admits group $GRP: run, list, ping"
assert_contains "$SERR" "rexec serve: admits user $MEMB: eval, ping"

# check_member USER [--regid=GROUP] GRANTS: USER may ping, list and run, and is refused the rest
# naming exactly GRANTS; its run is audited as its own
check_member() {
    local u=$1 uid
    shift
    local regid=()
    if [[ $1 == --regid=* ]]; then regid=("$1"); shift; fi
    local grants=$1
    uid=$(id -u "$u")
    assert_exit 0 as "$u" ${regid[@]+"${regid[@]}"} "$RX_PYTHON" "$PROTO" "$SOCK" "${ALL_OPS[@]}"
    assert_contains "$OUT" '{"id":1,"type":"pong"'
    assert_contains "$OUT" '{"id":2,"type":"list","hosts":[{"name":"lab1"'
    assert_contains "$OUT" "{\"id\":3,\"type\":\"error\",\"error\":\"user $u (uid $uid) may not use \\\"check\\\" here: serve.clients grants it $grants\",\"exit_status\":77}"
    assert_contains "$OUT" "{\"id\":4,\"type\":\"error\",\"error\":\"user $u (uid $uid) may not use \\\"reload\\\" here: serve.clients grants it $grants\",\"exit_status\":77}"
    assert_exit 0 as "$u" ${regid[@]+"${regid[@]}"} env REXEC_SOCKET="$SOCK" timeout 60 "$REXEC_BIN" \
        run lab1 sys.echo --param "text=hello from $u"
    assert_eq "hello from $u" "$(cat "$OUT")" "stdout of $u's run"
    grep -F '"phase":"intent"' "$WS/audit/audit.log" | grep -F "\"action\":\"sys.echo\"" |
        grep -qF "\"client\":{\"uid\":$uid,\"user\":\"$u\"}" || fail "no audited run by $u"
    assert_exit 77 as "$u" ${regid[@]+"${regid[@]}"} env REXEC_SOCKET="$SOCK" timeout 60 "$REXEC_BIN" \
        check lab1
    assert_contains "$ERR" "user $u (uid $uid) may not use \"check\" here: serve.clients grants it $grants"
}
# the group's user by its primary group (the peer's gid, and its passwd entry), and a member (getgrouplist) who also
# has a user entry of its own: the union for it, nothing of that entry for the other
check_member "$PRIM" "run, list, ping"
# the same user while its process runs under another group (sg, newgrp): GRP is still its
# primary group in the user database, which admits it
check_member "$PRIM" --regid="$SGRP" "run, list, ping"
check_member "$MEMB" "run, eval, list, ping"
assert_exit 77 as "$PRIM" env REXEC_SOCKET="$SOCK" timeout 60 "$REXEC_BIN" eval lab1 sys.uname
assert_contains "$ERR" "user $PRIM (uid $(id -u "$PRIM")) may not use \"eval\" here"
assert_exit 0 as "$MEMB" env REXEC_SOCKET="$SOCK" timeout 60 "$REXEC_BIN" eval lab1 sys.uname
# a process whose gid (as the kernel reports it) is GRP, though the user database does not put
# its user in GRP, is admitted as well
check_member "$OUTS" --regid="$GRP" "run, list, ping"
OUTS_AUDITED=$(grep -cF "\"user\":\"$OUTS\"" "$WS/audit/audit.log")

# with its own gid, a member of socket_group only reaches the socket, and is refused for who it is
assert_exit 0 as "$OUTS" "$RX_PYTHON" "$PROTO" "$SOCK" "${ALL_OPS[@]}"
assert_eq "{\"id\":null,\"type\":\"error\",\"error\":\"user $OUTS (uid $(id -u "$OUTS")) is not admitted by this rexec serve (it admits its own user and serve.clients in rexec.json)\",\"exit_status\":77}
EOF" "$(cat "$OUT")" "replies to $OUTS"
assert_exit 77 as "$OUTS" env REXEC_SOCKET="$SOCK" timeout 60 "$REXEC_BIN" run lab1 sys.uname
assert_contains "$ERR" "user $OUTS (uid $(id -u "$OUTS")) is not admitted by this rexec serve"
assert_eq "$OUTS_AUDITED" "$(grep -cF "\"user\":\"$OUTS\"" "$WS/audit/audit.log")" \
    "audit records of $OUTS after its refused run"
# someone outside socket_group cannot even connect: the socket is 0660
assert_exit 3 as_nobody "$RX_PYTHON" "$PROTO" "$SOCK" '{"op": "ping", "id": 1}'
assert_eq "connect: Permission denied" "$(cat "$OUT")" "nobody's connect"
# serve's own user keeps every verb
assert_exit 0 proto '{"op": "check", "id": 1, "target": "lab1"}'
assert_not_contains "$OUT" "may not use"

# ---- a reload naming a group that does not exist is refused; the running configuration stays --
ws_edit 'c["serve"]["clients"].append({"group": args[0], "verbs": ["check"]})' "$NOGRP"
assert_exit 0 proto '{"op": "reload", "id": 1}'
assert_contains "$OUT" "serve.clients[2].group: no group \\\"$NOGRP\\\" on this machine"
assert_contains "$OUT" '"exit_status":78'
assert_exit 0 as "$PRIM" "$RX_PYTHON" "$PROTO" "$SOCK" '{"op": "hosts", "id": 1}' \
    '{"op": "check", "id": 2, "target": "lab1"}'
assert_contains "$OUT" '{"id":1,"type":"list","hosts":[{"name":"lab1"'
assert_contains "$OUT" "may not use \\\"check\\\" here: serve.clients grants it run, list, ping"
stop_groups_serve

# ---- without socket_group the socket is 0666: the non-member connects and is refused ----------
ws_edit 'c["serve"] = {"clients": [{"group": args[0], "verbs": ["list", "metrics"]}]}' "$GRP"
start_groups_serve
assert_eq "root root 666" "$(stat -c '%U %G %a' "$SOCK")" "owner, group and mode of the socket"
assert_exit 0 as_nobody "$RX_PYTHON" "$PROTO" "$SOCK" '{"op": "ping", "id": 1}'
assert_contains "$OUT" "user nobody (uid $(id -u nobody)) is not admitted by this rexec serve"
assert_exit 0 as "$MEMB" "$RX_PYTHON" "$PROTO" "$SOCK" '{"op": "hosts", "id": 1}' '{"op": "run", "id": 2}' \
    '{"op": "metrics", "id": 3}'
assert_contains "$OUT" '{"id":1,"type":"list","hosts":[{"name":"lab1"'
assert_contains "$OUT" "may not use \\\"run\\\" here: serve.clients grants it list, ping, metrics"
assert_contains "$OUT" '{"id":3,"type":"metrics","format":"text/plain; version=0.0.4","text":"# HELP rexec_build_info'  # the verb metrics
stop_groups_serve

assert_exit 0 rx audit verify
pass
