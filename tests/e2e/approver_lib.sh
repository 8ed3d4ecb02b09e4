# shellcheck shell=bash
# tests/e2e/approver_lib.sh — sourced by the approver front-end tests (t_approvals_watch.sh,
# t_approvals_web.sh) after lib.sh: an approver user of their own, `rexec serve` (as the test's
# user) that grants it the approvals, approve and deny verbs, and callers whose runs are held for a
# decision (wait_approval_s).
#
#   approver_setup             APPROVER (a new user, removed on exit), SOCK, RAN; starts serve
#   as_approver CMD...         CMD as the approver (setpriv)
#   held_call UNIT OUT [ACTION]  a run of ACTION (svc.restart) held for approval, in the
#                              background; its reply lines go to OUT (HELD_PIDS collects the pids)
#   serve_reload               serve loads rexec.json again (after ws_edit); fails if refused
#   challenge_of OUT           waits for OUT's "challenge" line; prints its challenge_id
#   done_status OUT            the done line's exit_status once there (status 1 before)
#   result_field OUT KEY       KEY of OUT's result line

[[ $(id -u) == 0 ]] || skip "needs root to create the approver user"
for t in useradd userdel setpriv; do
    command -v "$t" >/dev/null 2>&1 || skip "needs $t"
done

APPROVER=rxap$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
APPROVER_MADE=""
HELD_PIDS=()
SERVE_PID=""
EXTRA_PIDS=()
_approver_cleanup() {
    local rc=$?
    set +e
    for p in "${HELD_PIDS[@]}" "${EXTRA_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${HELD_PIDS[@]}" "${EXTRA_PIDS[@]}"; do wait "$p" 2>/dev/null; done  # before userdel
    [[ -z $SERVE_PID ]] || stop_gently "$SERVE_PID"
    [[ -z ${APPROVER_CLEANUP_HOOK:-} ]] || "$APPROVER_CLEANUP_HOOK"
    if [[ -n $APPROVER_MADE ]]; then
        # its processes end on their own once their parents are gone (the tmux pane's shell, the
        # sshd session of the tunnel): userdel refuses a user that still has one
        poll_until 30 _approver_gone || echo "cleanup: $APPROVER_MADE still has processes" >&2
        userdel "$APPROVER_MADE" || echo "cleanup: userdel $APPROVER_MADE failed" >&2
    fi
    (exit "$rc")
    _rx_cleanup
}
_approver_gone() { ! pgrep -u "$APPROVER_MADE" >/dev/null; }
trap _approver_cleanup EXIT

as_approver() {
    setpriv --reuid="$APPROVER" --regid="$APPROVER" --init-groups env HOME=/ "$@"
}

approver_setup() {
    useradd --system --no-create-home --home-dir / --shell /bin/bash "$APPROVER" ||
        fail "useradd $APPROVER"
    APPROVER_MADE=$APPROVER
    usermod -p '*' "$APPROVER"  # not locked: sshd (UsePAM no) lets a key in
    lab_start 1
    RAN=$RX_TMP/ran
    : >"$RAN"
    ws_edit 'c["actions"]["svc.restart"]["command"] = "echo restarting {unit}; echo {unit} >> " + args[0]' \
        "'$RAN'"
    ws_edit 'c["serve"] = {"clients": [{"user": args[0], "verbs": ["approvals", "approve", "deny"]}]}' \
        "$APPROVER"
    chmod o+x "$RX_TMP"
    mkdir -m 0755 "$RX_TMP/run"
    SOCK=$RX_TMP/run/rexec.sock
    "$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK" --log off 2>>"$RX_TMP/serve.err" >/dev/null &
    SERVE_PID=$!
    poll_until 30 test -S "$SOCK" || { _rx_show "serve's stderr" "$RX_TMP/serve.err"; fail "serve did not start"; }
    export PYTHONPATH=$REXEC_SRC/python
}

held_call() {
    "$RX_PYTHON" - "$SOCK" "$1" "${3:-svc.restart}" >"$2" 2>&1 <<'PY' &
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((json.dumps({"op": "run", "id": 1, "targets": "lab1", "action": sys.argv[3],
                       "params": {"unit": sys.argv[2]}, "wait_approval_s": 300}) + "\n").encode())
for line in s.makefile("rb"):
    sys.stdout.write(line.decode())
    sys.stdout.flush()
    m = json.loads(line)
    if m.get("type") in ("done", "error"):
        break
PY
    HELD_PIDS+=($!)
}

serve_reload() {
    "$RX_PYTHON" - "$SOCK" <<'PY' || fail "serve did not reload"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"op":"reload","id":1}\n')
m = json.loads(s.makefile("rb").readline())
sys.exit(0 if m.get("type") == "reloaded" else "reload: %s" % m)
PY
}

_json_line_field() {  # _json_line_field FILE TYPE KEY
    "$RX_PYTHON" - "$@" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("type") == sys.argv[2]:
        v = m.get(sys.argv[3])
        print(v if isinstance(v, str) else json.dumps(v))
        sys.exit(0)
sys.exit(1)
PY
}

challenge_of() {
    poll_until 60 _json_line_field "$1" challenge challenge_id >/dev/null ||
        { _rx_show "caller" "$1"; fail "no challenge line from the held call"; }
    _json_line_field "$1" challenge challenge_id
}

done_status() { _json_line_field "$1" "done" exit_status; }
result_field() { _json_line_field "$1" result "$2"; }
