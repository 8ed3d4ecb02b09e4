#!/usr/bin/env bash
# The remote contract: containment is reported honestly (docs/remote-contract.md).
#  - a call reports the containment it really ran under (--json and audit), and the command sees
#    it: in a PID namespace /proc/self/status lists a second, inner pid (NSpid);
#  - a host capped with "containment": "process-group" makes calls use process-group;
#  - an action requiring "pid-namespace" is refused there (exit 77, DENY_CONTAINMENT, nothing
#    ran, a refusal in the audit log), and runs where the VM offers it; an action requiring
#    process-group runs under either.
tid="remote: containment, reported and required"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c["hosts"]["lab1"]["allow"] = "L0"'


# NSpid: one pid per PID namespace the process is in (the host's first).
ws_add_action t.ns '{"risk": "L0", "command": "grep ^NSpid: /proc/self/status | wc -w"}'
ws_add_action t.needns "{\"risk\": \"L0\", \"containment\": \"pid-namespace\",
  \"command\": \"touch '$RX_TMP/ran'; echo ran\"}"
ws_add_action t.needpg '{"risk": "L0", "containment": "process-group", "command": "echo ran"}'

assert_exit 0 rx check lab1 --json
offered=$(json containment)
[[ $offered == pid-namespace || $offered == process-group ]] || fail "check: containment '$offered'"

# ---- uncapped: the VM's best --------------------------------------------------------------------
assert_exit 0 rx run lab1 t.ns --json
assert_eq "$offered" "$(json containment)" "containment of an uncapped call"
assert_eq "$offered" "$(audit_field outcome containment)" "audit containment"
if [[ $offered == pid-namespace ]]; then
    assert_eq 3 "$(json stdout)" "NSpid words in a PID namespace (label + 2 pids)"
    assert_exit 0 rx run lab1 t.needns --json
    assert_eq pid-namespace "$(json containment)" "t.needns containment"
    rm -f "$RX_TMP/ran"
else
    # (an unprivileged account without user namespaces: the requirement cannot be met)
    assert_exit 77 rx run lab1 t.needns --json
    assert_eq DENY_CONTAINMENT "$(json reason)" "t.needns where the VM has no namespaces"
fi
assert_exit 0 rx run lab1 t.needpg --json
assert_eq "$offered" "$(json containment)" "t.needpg containment (uncapped)"

# ---- capped to process-group ------------------------------------------------------------------
cap process-group
assert_exit 0 rx run lab1 t.ns --json
assert_eq process-group "$(json containment)" "containment of a capped call"
assert_eq process-group "$(audit_field outcome containment)" "audit containment (capped)"
assert_eq 2 "$(json stdout)" "NSpid words outside a PID namespace (label + 1 pid)"

assert_exit 0 rx run lab1 t.needpg --json
assert_eq process-group "$(json containment)" "t.needpg containment (capped)"

# requires more than the host allows: refused, never pretended
assert_exit 77 rx run lab1 t.needns --json
assert_eq DENY_CONTAINMENT "$(json reason)" "reason"
assert_eq DENY "$(json decision)" "decision"
assert_eq false "$(json executed)" "executed"
assert_eq null "$(json exit_code)" "exit_code"
[[ $(json error) == *pid-namespace* && $(json error) == *process-group* ]] ||
    fail "the refusal should name what is required and what is offered: $(json error)"
[[ ! -e $RX_TMP/ran ]] || fail "t.needns ran on a host capped to process-group"
assert_eq DENY_CONTAINMENT "$(audit_field refused reason)" "audit: the refusal is recorded"
assert_exit 77 rx run lab1 t.needns
assert_contains "$ERR" "pid-namespace"

# without the cap, the VM's best again
cap ""
assert_exit 0 rx run lab1 t.ns --json
assert_eq "$offered" "$(json containment)" "containment after removing the cap"
pass
