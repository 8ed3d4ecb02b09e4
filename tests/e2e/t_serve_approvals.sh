#!/usr/bin/env bash
# Approvers on serve (docs/gate.md, "Approvers on serve"; docs/serve-protocol.md): an agent user
# runs with wait_approval_s, an approver user watches and decides over the socket (its uid is
# the proof), and the held request goes on (approved), or ends 77 with the reason (denied, no
# decision in time, withdrawn when the caller leaves). A fan-out gets one challenge whose grant
# each host uses once. The agent cannot approve, deny or watch; no uid approves its own request;
# malformed, unknown and used ids are refused; the notify program gets the challenge without the
# secret, and its failures (hang, crash, flood, missing) are logged and counted, never the
# call's. The scripted approver reacts to the watch events: nothing here waits for a time.
# shellcheck disable=SC2016 # code in single quotes
tid="serve approvals: approvers decide over the socket"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

sfx=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
AGENT=rxag$sfx
APPR=rxap$sfx
at_exit remove_test_users
make_test_users "$AGENT" "$APPR"
cov_env "$AGENT"
COV_AGENT=(${RX_COV[@]+"${RX_COV[@]}"})
cov_env "$APPR"
COV_APPR=(${RX_COV[@]+"${RX_COV[@]}"})
as_agent() { setpriv --reuid="$AGENT" --regid="$AGENT" --init-groups ${COV_AGENT[@]+"${COV_AGENT[@]}"} "$@"; }
as_appr() { setpriv --reuid="$APPR" --regid="$APPR" --init-groups ${COV_APPR[@]+"${COV_APPR[@]}"} "$@"; }
CL=$REXEC_SRC/tests/e2e/approvals_client.py

lab_start 2
TOKEN=$(cat "$WS/secrets/demo_token")
RAN=$RX_TMP/ran
: >"$RAN"
chmod 666 "$RAN"
ws_edit 'c["actions"]["svc.restart"]["command"] = "echo restarting {unit}; echo {unit} >> " + args[0]' "$RAN"
chmod o+x "$RX_TMP" "$LAB_DIR"
SOCKDIR=$RX_TMP/run
mkdir -m 0755 "$SOCKDIR"
SOCK=$SOCKDIR/rexec.sock
NOTIFIED=$RX_TMP/notified
NOTIFY=$RX_TMP/notify.sh
cat >"$NOTIFY" <<EOF2
#!/bin/sh
# the notify program of this test: its stdin to a file, or a failure of the kind asked for
case "\$(cat "$RX_TMP/notify.mode" 2>/dev/null)" in
hang) exec sleep 600 ;;
crash) kill -SEGV \$\$ ;;
flood) exec head -c 3000000 /dev/zero ;;
esac
cat >>"$NOTIFIED"
EOF2
chmod 755 "$NOTIFY"

# ---- an approver is never a caller: one user with approve and run does not load ------------------
ws_edit 'c["serve"] = {"clients": [{"user": args[0], "verbs": ["run", "approve"]}]}' "$AGENT"
assert_exit 78 rx hosts
assert_contains "$ERR" 'serve.clients[0].verbs: grants "approve" with "run" or "eval"'
ws_edit 'c["serve"] = {"clients": [{"user": args[0], "verbs": ["run"]}, {"user": args[0], "verbs": ["approve"]}]}' "$AGENT"
assert_exit 78 rx hosts
assert_contains "$ERR" "user \"$AGENT\" gets \"approve\" and \"run\" or \"eval\""
ws_edit 'c["serve"] = {"clients": [{"user": args[0], "verbs": ["run", "eval", "cancel"]},
                                   {"user": args[1], "verbs": ["approvals", "approve", "deny"]}]}
c["approvals"] = {"notify": {"command": [args[2], "x"], "timeout_s": 2}}' "$AGENT" "$APPR" "$NOTIFY"

start_serve --log off
assert_contains "$RX_TMP/serve.err" "admits user $APPR: ping, approvals, approve, deny"

# ---- approved over the socket: the waiting run goes on ------------------------------------------
as_appr "$RX_PYTHON" "$CL" approver "$SOCK" approve u1 1 "change 4411" >"$RX_TMP/appr1" 2>&1 &
APID=$!
assert_exit 0 as_agent "$RX_PYTHON" "$CL" run "$SOCK" lab1 svc.restart u1 60
cp "$OUT" "$RX_TMP/run1"
wait "$APID" || { cat "$RX_TMP/appr1" >&2; fail "the approver did not approve"; }
assert_contains "$RX_TMP/run1" '"type": "challenge"'
assert_contains "$RX_TMP/run1" '"reason": "ALLOW_GRANT"'
assert_contains "$RX_TMP/run1" '"type": "done", "exit_status": 0'
assert_eq "u1" "$(cat "$RAN")" "ran once, after the approval"
ID=$(grep -o '"challenge_id": "ch-[0-9a-f]*"' "$RX_TMP/run1" | head -1 | cut -d'"' -f4)
# the approver saw who asked and what would run, and decided as itself
assert_contains "$RX_TMP/appr1" "\"requester\": {\"uid\": $(id -u "$AGENT"), \"user\": \"$AGENT\"}"
assert_contains "$RX_TMP/appr1" '"script": "echo restarting'
assert_contains "$RX_TMP/appr1" "\"approved_by\": \"$APPR\", \"approved_uid\": $(id -u "$APPR"), \"via\": \"socket\""
# the challenge and the audit log record the decision
assert_contains "$WS/approvals/$ID.used" "\"approved_via\":	\"socket\""
grep "\"phase\":\"approval\"" "$WS/audit/audit.log" | grep "\"challenge_id\":\"$ID\"" >"$RX_TMP/rec1" ||
    fail "no approval record for $ID"
assert_contains "$RX_TMP/rec1" "\"decision\":\"approved\""
assert_contains "$RX_TMP/rec1" "\"by\":\"$APPR\",\"uid\":$(id -u "$APPR"),\"via\":\"socket\""
assert_contains "$RX_TMP/rec1" '"comment":"change 4411"'
# the notify program got the challenge, and the token never left serve
wait_until 30 grep -q "$ID" "$NOTIFIED"
assert_contains "$NOTIFIED" '"action":"svc.restart"'

# ---- denied: 77 with the reason, nothing ran --------------------------------------------------
as_appr "$RX_PYTHON" "$CL" approver "$SOCK" deny u2 1 "not during the freeze" >"$RX_TMP/appr2" 2>&1 &
APID=$!
assert_exit 0 as_agent "$RX_PYTHON" "$CL" run "$SOCK" lab1 svc.restart u2 60
wait "$APID" || { cat "$RX_TMP/appr2" >&2; fail "the approver did not deny"; }
assert_contains "$OUT" '"exit_status": 77'
assert_contains "$OUT" "denied by $APPR: not during the freeze"
assert_contains "$OUT" '"type": "done", "exit_status": 77'
assert_eq "u1" "$(cat "$RAN")" "a denied request runs nothing"

# ---- no decision within wait_approval_s: 77, the challenge withdrawn ----------------------------
assert_exit 0 as_agent "$RX_PYTHON" "$CL" run "$SOCK" lab1 svc.restart u3 1
assert_contains "$OUT" "no decision within wait_approval_s (1 s)"
assert_contains "$OUT" '"type": "done", "exit_status": 77'
ID3=$(grep -o '"challenge_id": "ch-[0-9a-f]*"' "$OUT" | head -1 | cut -d'"' -f4)
assert_contains "$WS/approvals/$ID3.json" '"state":	"withdrawn"'
assert_exit 0 as_agent "$RX_PYTHON" "$CL" run "$SOCK" lab1 svc.restart u3 100000
assert_contains "$OUT" 'wait_approval_s: from 0 (excluded) to 900 s'

# ---- the caller leaves: its challenge is withdrawn, and can no longer be approved ---------------
as_appr "$RX_PYTHON" "$CL" approver "$SOCK" deny nomatch 1 >"$RX_TMP/watch4" 2>&1 &
WPID=$!
# (events are sent from when the watch is registered: wait for it, or one may come before)
wait_until 60 grep -q '"type": "watching"' "$RX_TMP/watch4"
assert_exit 0 as_agent "$RX_PYTHON" "$CL" run "$SOCK" lab1 svc.restart u4 60 leave
ID4=$(grep -o '"challenge_id": "ch-[0-9a-f]*"' "$OUT" | head -1 | cut -d'"' -f4)
wait_until 60 grep -q '"state":	"withdrawn"' "$WS/approvals/$ID4.json"
wait_until 60 grep -q "\"challenge_id\": \"$ID4\".*\"decision\": \"withdrawn\"" "$RX_TMP/watch4"
kill "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null || true
assert_exit 0 as_appr "$RX_PYTHON" "$CL" lines "$SOCK" "{\"op\":\"approve\",\"id\":1,\"challenge_id\":\"$ID4\"}"
assert_contains "$OUT" "challenge $ID4 was withdrawn"
assert_contains "$OUT" '"exit_status": 77'
assert_eq "u1" "$(cat "$RAN")" "a withdrawn request runs nothing"

# ---- a fan-out: one challenge, each host once, then spent ---------------------------------------
as_appr "$RX_PYTHON" "$CL" approver "$SOCK" approve u5 1 >"$RX_TMP/appr5" 2>&1 &
APID=$!
assert_exit 0 as_agent "$RX_PYTHON" "$CL" run "$SOCK" @lab svc.restart u5 60
wait "$APID" || { cat "$RX_TMP/appr5" >&2; fail "the approver did not approve the fan-out"; }
assert_contains "$OUT" '"type": "challenge"'
assert_contains "$OUT" '"hosts": ["lab1", "lab2"]'
assert_eq 1 "$(grep -c '"event": "approval_pending"' "$RX_TMP/appr5")" "one challenge for the fan-out"
assert_eq 2 "$(grep -c '"reason": "ALLOW_GRANT"' "$OUT")" "both hosts ran on the grant"
assert_eq "u1 u5 u5" "$(tr '\n' ' ' <"$RAN" | sed 's/ $//')" "each host once"
ID5=$(grep -o '"challenge_id": "ch-[0-9a-f]*"' "$OUT" | head -1 | cut -d'"' -f4)
test -f "$WS/approvals/$ID5.used" || fail "the fan-out's grant is not spent"
assert_eq 2 "$(grep "\"grant_id\":\"$ID5\"" "$WS/audit/audit.log" | grep -c '"phase":"intent"')" "uses recorded"
assert_exit 77 rx run @lab svc.restart --param unit=u5 --grant "$ID5"
assert_contains "$ERR" "grant $ID5 was already used"
# the CLI's fan-out too: one challenge, and its grant serves each host
assert_exit 75 rx run @lab svc.restart --param unit=u6 --json
assert_eq 1 "$(grep -o '"challenge_id":"ch-[0-9a-f]*"' "$OUT" | sort -u | wc -l)" "one challenge id for both hosts"
ID6=$(grep -o '"challenge_id":"ch-[0-9a-f]*"' "$OUT" | head -1 | cut -d'"' -f4)
assert_exit 0 as_appr "$RX_PYTHON" "$CL" lines "$SOCK" "{\"op\":\"approve\",\"id\":1,\"challenge_id\":\"$ID6\"}"
assert_contains "$OUT" '"type": "approved"'
assert_exit 0 rx run lab1 svc.restart --param unit=u6 --grant "$ID6"
assert_exit 0 rx run lab2 svc.restart --param unit=u6 --grant "$ID6"
assert_exit 77 rx run lab1 svc.restart --param unit=u6 --grant "$ID6"
assert_contains "$ERR" "already used"
assert_exit 64 rx run lab1 svc.restart --param unit=u6 --grant "$ID6" --grant "$ID5"
assert_contains "$ERR" "--grant given twice"

# ---- refusals --------------------------------------------------------------------------------
assert_exit 75 as_agent env REXEC_SOCKET="$SOCK" "$REXEC_BIN" run lab1 svc.restart --param unit=u7 --json
ID7=$(json challenge_id)
assert_exit 0 as_agent "$RX_PYTHON" "$CL" lines "$SOCK" \
    "{\"op\":\"approve\",\"id\":1,\"challenge_id\":\"$ID7\"}" "{\"op\":\"deny\",\"id\":2,\"challenge_id\":\"$ID7\"}" \
    '{"op":"watch","id":3}' '{"op":"approvals","id":4}'
for op in approve deny watch approvals; do
    assert_contains "$OUT" "may not use \\\"$op\\\" here"
done
assert_eq 4 "$(grep -c '"exit_status": 77' "$OUT")" "four refusals"
# serve's own user asks, then tries to approve its own request
assert_exit 0 "$RX_PYTHON" "$CL" run "$SOCK" lab1 svc.restart u8 1
ID8=$(grep -o '"challenge_id": "ch-[0-9a-f]*"' "$OUT" | head -1 | cut -d'"' -f4)
assert_exit 75 env REXEC_SOCKET="$SOCK" "$REXEC_BIN" run lab1 svc.restart --param unit=u9 --json
ID9=$(json challenge_id)
assert_exit 0 "$RX_PYTHON" "$CL" lines "$SOCK" "{\"op\":\"approve\",\"id\":1,\"challenge_id\":\"$ID9\"}" \
    '{"op":"approve","id":2,"challenge_id":"ch-0123"}' '{"op":"approve","id":3,"challenge_id":"ch-0123456789abcdef"}' \
    "{\"op\":\"approve\",\"id\":4,\"challenge_id\":\"$ID5\"}" '{"op":"approve","id":5}' \
    "{\"op\":\"deny\",\"id\":6,\"challenge_id\":\"$ID8\"}"
assert_contains "$OUT" "cannot approve its own request"
assert_contains "$OUT" '"id": 2, "type": "error", "error": "challenge_id: not a challenge id'
assert_contains "$OUT" '"exit_status": 65'
assert_contains "$OUT" "no challenge or grant ch-0123456789abcdef"
assert_contains "$OUT" "grant $ID5 was already used"
assert_contains "$OUT" '"id": 5, "type": "error", "error": "challenge_id: missing'
assert_contains "$OUT" "challenge $ID8 was withdrawn"
assert_eq "u1 u5 u5 u6 u6" "$(tr '\n' ' ' <"$RAN" | sed 's/ $//')" "nothing refused ran"
# the terminal operator denies: the grant can never be used
assert_exit 0 rx deny "$ID9" --reason "wrong unit"
assert_exit 77 rx run lab1 svc.restart --param unit=u9 --grant "$ID9"
assert_contains "$ERR" "challenge $ID9 was denied by $(id -un): wrong unit"
assert_exit 77 rx deny "$ID9"
assert_exit 64 rx deny

# ---- approved at a terminal while the caller waits: serve notices, the run goes on ---------------
as_agent "$RX_PYTHON" "$CL" run "$SOCK" lab1 svc.restart u10 60 >"$RX_TMP/run10" 2>&1 &
RPID=$!
wait_until 60 grep -q '"type": "challenge"' "$RX_TMP/run10"
ID10=$(grep -o '"challenge_id": "ch-[0-9a-f]*"' "$RX_TMP/run10" | head -1 | cut -d'"' -f4)
assert_exit 0 tty_answer "$REXEC_BIN" --workspace "$WS" approve "$ID10"
wait "$RPID" || fail "the waiting run failed: $(cat "$RX_TMP/run10")"
assert_contains "$RX_TMP/run10" '"reason": "ALLOW_GRANT"'
grep "\"phase\":\"approval\"" "$WS/audit/audit.log" | grep "\"challenge_id\":\"$ID10\"" >"$RX_TMP/rec10" ||
    fail "no approval record for $ID10"
assert_contains "$RX_TMP/rec10" '"via":"tty"'

# ---- a challenge nobody decides expires: the watchers hear it ----------------------------------
ws_edit 'c["limits"]["approval_ttl_s"] = 2'
assert_exit 0 "$RX_PYTHON" "$CL" lines "$SOCK" '{"op":"reload","id":1}'
as_appr "$RX_PYTHON" "$CL" approver "$SOCK" deny nomatch 1 >"$RX_TMP/watch11" 2>&1 &
WPID=$!
# (events are sent from when the watch is registered: wait for it, or one may come before)
wait_until 60 grep -q '"type": "watching"' "$RX_TMP/watch11"
assert_exit 75 as_agent env REXEC_SOCKET="$SOCK" "$REXEC_BIN" run lab1 svc.restart --param unit=u11 --json
ID11=$(json challenge_id)
wait_until 60 grep -q "\"challenge_id\": \"$ID11\".*\"event\": \"approval_expired\"" "$RX_TMP/watch11"
kill "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null || true
ws_edit 'c["limits"].pop("approval_ttl_s")'
assert_exit 0 "$RX_PYTHON" "$CL" lines "$SOCK" '{"op":"reload","id":1}'

# ---- a watcher that does not read is dropped, with a line saying so; serve goes on -----------------
# 60 KiB commands make 60 KiB events: the socket's buffer and then 1 MiB fill after some 20
ws_add_action t.big "{\"risk\": \"L2\", \"command\": \": $(head -c 61440 /dev/zero | tr '\0' x); echo {unit}\",
                     \"params\": {\"unit\": {\"type\": \"string\"}}}"
assert_exit 0 "$RX_PYTHON" "$CL" lines "$SOCK" '{"op":"reload","id":1}'
GO=$RX_TMP/go
as_appr "$RX_PYTHON" "$CL" slow "$SOCK" "$GO" >"$RX_TMP/slow" 2>&1 &
SPID=$!
for i in $(seq 40); do
    assert_exit 75 as_agent env REXEC_SOCKET="$SOCK" "$REXEC_BIN" run lab1 t.big --param "unit=b$i"
    grep -q "fell behind" "$RX_TMP/serve.err" && break
done
touch "$GO"
wait "$SPID" || fail "the slow watcher failed"
assert_contains "$RX_TMP/slow" 'watch: this client fell behind (more than 1 MiB of events unread): dropped'
assert_exit 0 as_appr "$RX_PYTHON" "$CL" lines "$SOCK" '{"op":"ping","id":1}'
assert_contains "$OUT" '"type": "pong"'

# ---- the notify program: no secret leaves; its failures are counted, never the call's -------------
assert_exit 75 as_agent env REXEC_SOCKET="$SOCK" "$REXEC_BIN" run lab1 svc.restart --param "unit=$TOKEN" --json
IDT=$(json challenge_id)
wait_until 30 grep -q "$IDT" "$NOTIFIED"
assert_not_contains "$NOTIFIED" "$TOKEN"
assert_contains "$NOTIFIED" '[REDACTED:DEMO_TOKEN]'
assert_exit 0 as_appr "$RX_PYTHON" "$CL" lines "$SOCK" "{\"op\":\"approvals\",\"id\":1,\"challenge_id\":\"$IDT\"}"
assert_not_contains "$OUT" "$TOKEN"
assert_contains "$OUT" '"notify_failures": 0'
notify_failed() { [[ $(grep -c "notification(s) failed so far" "$RX_TMP/serve.err") -ge $1 ]]; }
n=0
for mode in hang crash flood missing; do
    n=$((n + 1))
    echo "$mode" >"$RX_TMP/notify.mode"
    if [[ $mode == missing ]]; then
        ws_edit 'c["approvals"]["notify"]["command"] = ["/nonexistent/notify"]'
        assert_exit 0 "$RX_PYTHON" "$CL" lines "$SOCK" '{"op":"reload","id":1}'
    fi
    assert_exit 75 as_agent env REXEC_SOCKET="$SOCK" "$REXEC_BIN" run lab1 svc.restart --param "unit=n$mode" --json
    wait_until 60 notify_failed "$n"
done
assert_contains "$RX_TMP/serve.err" "no exit within 2 s: killed"
assert_contains "$RX_TMP/serve.err" "the program died of signal 11"
assert_contains "$RX_TMP/serve.err" "more than 1 MiB on stdout: killed"
assert_contains "$RX_TMP/serve.err" "cannot start it: no such file or directory"
assert_exit 0 as_appr "$RX_PYTHON" "$CL" lines "$SOCK" '{"op":"approvals","id":1}'
assert_contains "$OUT" '"notify_failures": 4'
assert_exit 0 "$RX_PYTHON" "$CL" lines "$SOCK" '{"op":"metrics","id":1}'
assert_contains "$OUT" 'rexec_notify_failures_total 4'
assert_not_contains "$RX_TMP/serve.err" "$TOKEN"

kill -TERM "$SERVE_PID"
rc=0; wait "$SERVE_PID" || rc=$?
SERVE_PID=
assert_eq 0 "$rc" "serve's exit status"
assert_exit 0 rx audit verify
pass
