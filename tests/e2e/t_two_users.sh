#!/usr/bin/env bash
# Caller and approver as two real Unix users (docs/gate.md, "Two users"): `rexec serve` runs as an
# operator user that owns the workspace, an agent user reaches it only through the socket with the
# verbs serve.clients grants it (run, eval, cancel). The agent cannot read the challenge's code
# (approvals/, audit/, evidence/ and secrets are closed to it), cannot approve (no terminal flow
# can read approvals/, serve's approve is never granted with run, and check/reload are not
# granted), and cannot
# replay a grant: it runs once, and a grant file put back afterwards is still refused because
# the audit log shows the use. A user serve.clients does not list is refused with a reason.
# serve refuses to start when approvals/ is open to others or a listed user does not exist.
# shellcheck disable=SC2016,SC2317 # code in single quotes; helpers run via assert_exit
tid="two users: caller is not approver"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

# Two users of our own, removed again however the test ends.
sfx=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
OP=rxop$sfx
AGENT=rxag$sfx
_two_users_cleanup() {
    local rc=$?
    set +e # (exit "$rc") below only hands the status on to _rx_cleanup
    [[ -z ${SERVE_PID:-} ]] || stop_gently "$SERVE_PID"
    remove_test_users
    (exit "$rc")
    _rx_cleanup
}
trap _two_users_cleanup EXIT
make_test_users "$OP" "$AGENT"
cov_env "$OP"
COV_OP=(${RX_COV[@]+"${RX_COV[@]}"})
cov_env "$AGENT"
COV_AGENT=(${RX_COV[@]+"${RX_COV[@]}"})
cov_env nobody
COV_NOBODY=(${RX_COV[@]+"${RX_COV[@]}"})
as_op() { setpriv --reuid="$OP" --regid="$OP" --init-groups ${COV_OP[@]+"${COV_OP[@]}"} "$@"; }
as_agent() {
    setpriv --reuid="$AGENT" --regid="$AGENT" --init-groups ${COV_AGENT[@]+"${COV_AGENT[@]}"} "$@"
}

lab_start 1
RAN=$RX_TMP/ran
: >"$RAN"
chmod 666 "$RAN"
ws_edit 'c["actions"]["svc.restart"]["command"] = "echo restarting {unit}; echo {unit} >> " + args[0]' \
    "'$RAN'"
ws_edit 'c["serve"] = {"clients": [{"user": args[0], "verbs": ["run", "eval", "cancel"]}]}' "$AGENT"
# The operator owns the workspace; the directories on the way only let others pass.
chown -R "$OP:$OP" "$WS"
chmod o+x "$RX_TMP" "$LAB_DIR"
SOCKDIR=$RX_TMP/run
mkdir -m 0755 "$SOCKDIR"
chown "$OP:$OP" "$SOCKDIR"
SOCK=$SOCKDIR/rexec.sock

# ws_edit, the file staying the operator's
ws_edit_op() {
    ws_edit "$@"
    chown "$OP:$OP" "$WS/rexec.json"
}

start_serve_as_op() {
    # setpriv itself in the background (not a function's subshell), so $! is serve's pid
    setpriv --reuid="$OP" --regid="$OP" --init-groups ${COV_OP[@]+"${COV_OP[@]}"} \
        "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK" 2>>"$RX_TMP/serve.err" >/dev/null &
    SERVE_PID=$!
    wait_until 20 test -S "$SOCK"
}

# ---- serve refuses a workspace it cannot keep closed ------------------------------------------
as_op mkdir -m 0750 "$WS/approvals"
assert_exit 78 as_op "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK"
assert_contains "$ERR" "$WS/approvals must be closed to group and others (it is 0750)"
chmod 0700 "$WS/approvals"
ws_edit_op 'c["serve"]["clients"].append({"user": "nouser" + args[0], "verbs": ["run"]})' "$sfx"
assert_exit 78 as_op "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK"
assert_contains "$ERR" "serve.clients[1].user: no user \"nouser$sfx\" on this machine"
ws_edit_op 'c["serve"]["clients"].pop()'
ws_edit_op 'c["serve"]["clients"][0]["verbs"].append("approve")'
assert_exit 78 as_op "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK"
assert_contains "$ERR" 'serve.clients[0].verbs: grants "approve" with "run" or "eval"'
ws_edit_op 'c["serve"]["clients"][0]["verbs"].pop()'

start_serve_as_op
assert_eq 666 "$(stat -c %a "$SOCK")" "mode of the socket (clients listed, no socket_group)"
assert_eq "$OP" "$(stat -c %U "$SOCK")" "owner of the socket"
assert_contains "$RX_TMP/serve.err" "rexec serve: admits user $AGENT: run, eval, cancel, ping"

arun() { as_agent env REXEC_SOCKET="$SOCK" "$REXEC_BIN" "$@"; }

# ---- the agent's call is held for approval ----------------------------------------------------
assert_exit 75 arun run lab1 svc.restart --param unit=nginx --json
ID=$(json challenge_id)
[[ $ID =~ ^ch-[0-9a-f]{16}$ ]] || fail "no challenge id in: $OUT"
assert_eq "" "$(cat "$RAN")" "nothing ran before approval"

# ---- it cannot read the code, nor anything else the operator keeps ----------------------------
for p in "$WS/approvals/$ID.json" "$WS/approvals" "$WS/audit/audit.log" "$WS/secrets/demo_token" \
    "$WS/keys/id_ed25519"; do
    assert_exit 1 as_agent cat "$p"
    assert_contains "$ERR" "Permission denied"
done
assert_exit 2 as_agent ls "$WS/approvals"
assert_exit 2 as_agent ls "$WS/evidence"

# ---- it cannot approve -------------------------------------------------------------------------
# not with the terminal flow (rexec will not use a workspace of another user, and could not
# open approvals/ anyway, so there is no prompt to answer) ...
assert_exit 78 as_agent "$REXEC_BIN" --workspace "$WS" approve "$ID"
assert_contains "$ERR" "is owned by another user"
# ... nor through serve: approve is not granted to it (nor could it be, with run), and what it
# was not granted is refused
PROTO=$RX_TMP/proto.py
cat >"$PROTO" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sys.argv[1])
f = s.makefile("rb")
for i, line in enumerate(sys.argv[2:]):
    s.sendall((line + "\n").encode())
    print(f.readline().decode().strip())
PY
assert_exit 0 as_agent "$RX_PYTHON" "$PROTO" "$SOCK" \
    '{"op": "approve", "id": 1, "challenge_id": "'"$ID"'"}' \
    '{"op": "reload", "id": 2}' '{"op": "check", "id": 3, "target": "lab1"}' \
    '{"op": "hosts", "id": 4}' '{"op": "ping", "id": 5}' '{"op": "metrics", "id": 6}'
assert_contains "$OUT" "\"id\":1,\"type\":\"error\",\"error\":\"user $AGENT (uid $(id -u "$AGENT")) may not use \\\"approve\\\" here"
assert_contains "$OUT" "\"id\":2,\"type\":\"error\",\"error\":\"user $AGENT (uid $(id -u "$AGENT")) may not use \\\"reload\\\" here: serve.clients grants it run, eval, cancel, ping\",\"exit_status\":77"
assert_contains "$OUT" '"id":3,"type":"error"'
assert_contains "$OUT" "may not use \\\"check\\\""
assert_contains "$OUT" "may not use \\\"hosts\\\""
assert_contains "$OUT" '"id":5,"type":"pong"'
assert_contains "$OUT" "\"id\":6,\"type\":\"error\",\"error\":\"user $AGENT (uid $(id -u "$AGENT")) may not use \\\"metrics\\\" here"
assert_exit 77 arun run lab1 svc.restart --param unit=nginx --grant "$ID"
assert_contains "$ERR" "challenge $ID has not been approved"
assert_eq "" "$(cat "$RAN")" "an unapproved grant runs nothing"

# ---- the operator approves at a terminal of its own -------------------------------------------
# (a pseudo-terminal the operator's rexec gets as its controlling terminal; the code is what
# the prompt shows, typed back)
approve_as_op() {
    tty_answer setpriv --reuid="$OP" --regid="$OP" --init-groups ${COV_OP[@]+"${COV_OP[@]}"} \
        "$REXEC_BIN" --workspace "$WS" approve "$1"
}
assert_exit 0 approve_as_op "$ID"
assert_contains "$OUT" "approved"

# ---- the grant runs once -----------------------------------------------------------------------
assert_exit 0 arun run lab1 svc.restart --param unit=nginx --grant "$ID" --json
assert_eq "ALLOW_GRANT" "$(json reason)" "reason of the granted run"
RUN_ID=$(json run_id)
assert_eq "nginx" "$(cat "$RAN")" "ran once"
# the audit log names who asked, and the grant it ran on
intent=$RX_TMP/intent
grep "\"run_id\":\"$RUN_ID\",\"batch_id\":null,\"phase\":\"intent\"" "$WS/audit/audit.log" >"$intent"
assert_contains "$intent" "\"client\":{\"uid\":$(id -u "$AGENT"),\"user\":\"$AGENT\"}"
assert_contains "$intent" "\"grant_id\":\"$ID\""
assert_exit 77 arun run lab1 svc.restart --param unit=nginx --grant "$ID"
assert_contains "$ERR" "grant $ID was already used"

# ---- and cannot be replayed by putting its file back -------------------------------------------
# Someone with the operator's files (the one-user deployment's caller) renames the used grant
# back and marks it approved: the audit log still shows the use.
"$RX_PYTHON" - "$WS/approvals/$ID.used" "$WS/approvals/$ID.json" <<'PY'
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
d = json.load(open(src))
d["state"] = "approved"
d.pop("used_at", None)
st = os.stat(src)
open(dst, "w").write(json.dumps(d))
os.chown(dst, st.st_uid, st.st_gid)
os.chmod(dst, 0o600)
os.unlink(src)
PY
assert_exit 77 arun run lab1 svc.restart --param unit=nginx --grant "$ID"
assert_contains "$ERR" "grant $ID was already used: the audit log records a call that ran on it"
assert_exit 77 arun eval lab1 svc.restart --param unit=nginx --grant "$ID"
assert_contains "$OUT" "GRANT_USED"
assert_eq "nginx" "$(cat "$RAN")" "still ran once"

# ---- a user serve.clients does not list is refused, saying why --------------------------------
assert_exit 77 setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
    ${COV_NOBODY[@]+"${COV_NOBODY[@]}"} env REXEC_SOCKET="$SOCK" "$REXEC_BIN" run lab1 svc.restart --param unit=nginx
assert_contains "$ERR" "user nobody (uid $(id -u nobody)) is not admitted by this rexec serve"

# ---- the operator itself keeps every verb ------------------------------------------------------
assert_exit 0 as_op "$RX_PYTHON" "$PROTO" "$SOCK" '{"op": "hosts", "id": 1}'
assert_contains "$OUT" '"type":"list","hosts":[{"name":"lab1"'

kill -TERM "$SERVE_PID"
rc=0; wait "$SERVE_PID" || rc=$?
SERVE_PID=
assert_eq 0 "$rc" "serve's exit status"
assert_exit 0 as_op "$REXEC_BIN" --workspace "$WS" audit verify
pass
