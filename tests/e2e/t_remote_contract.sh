#!/usr/bin/env bash
# The remote contract (docs/remote-contract.md), end to end:
#  - each {name} becomes exactly one single-quoted word: a value full of shell syntax comes back
#    verbatim, and the rendered command (--json "rendered", audit "argv") shows the quoting;
#    {{ }} are literal braces, ${VAR} is the shell's;
#  - cwd: the command runs there; a missing cwd is an error (exit 255, executed false, the
#    directory named), never the command's own exit code;
#  - distinct outcomes: remote 255 -> 254; death by a signal -> `signal` (KILL, TERM), under
#    both containments; the 128+N convention caveat: `exit 137` reads as KILL too;
#  - `rexec check` reports bash, the tools the wrapper needs and the containment on offer.
tid="remote: the contract end to end"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c["hosts"]["lab1"]["allow"] = "L0"'


# ---- {name}: one quoted word -----------------------------------------------------------------
ws_add_action t.words '{"risk": "L0", "command": "printf \"[%s]\\n\" {text} {other}",
  "params": {"text": {"type": "string", "pattern": "^[ -~]{0,200}$"},
             "other": {"type": "string", "pattern": "^[ -~]{0,200}$"}}}'
v1="it's \"q\" \$HOME \`id\` \$(id) ; & | * ? ~ < > {text} {{x}} \\ -n"
v2=" two  spaces "
assert_exit 0 rx run lab1 t.words --param "text=$v1" --param "other=$v2"
assert_eq "[$v1]
[$v2]" "$(cat "$OUT")" "each value is exactly one word"
assert_exit 0 rx run lab1 t.words --param "text=$v1" --param "other=" --json
assert_eq "[$v1]
[]" "$(json stdout)" "an empty value is still one (empty) word"
want_rendered="printf \"[%s]\\n\" 'it'\\''s \"q\" \$HOME \`id\` \$(id) ; & | * ? ~ < > {text} {{x}} \\ -n' ''"
assert_eq "$want_rendered" "$(json rendered)" "--json rendered"
assert_eq "$want_rendered" "$(audit_field intent argv)" "audit argv"

# {{ }} literal, ${VAR} left to the shell
ws_add_action t.braces '{"risk": "L0", "command": "echo {{literal}} ${LAB_X:-dflt} {n}{{n}}",
  "params": {"n": {"type": "int", "min": 0, "max": 9}}}'
assert_exit 0 rx run lab1 t.braces --param n=7
assert_eq "{literal} dflt 7{n}" "$(cat "$OUT")" "braces"

# ---- cwd -------------------------------------------------------------------------------------
mkdir -p "$RX_TMP/a dir"
ws_add_action t.cwd "{\"risk\": \"L0\", \"cwd\": \"$RX_TMP/a dir\", \"command\": \"pwd\"}"
assert_exit 0 rx run lab1 t.cwd
assert_eq "$RX_TMP/a dir" "$(cat "$OUT")" "the command runs in cwd"

missing=$RX_TMP/no/such/dir
ws_add_action t.nocwd "{\"risk\": \"L0\", \"cwd\": \"$missing\", \"command\": \"touch '$RX_TMP/ran'; exit 1\"}"
assert_exit 255 rx run lab1 t.nocwd
assert_contains "$ERR" "$missing"
assert_exit 255 rx run lab1 t.nocwd --json
assert_eq false "$(json executed)" "missing cwd: executed"
assert_eq null "$(json exit_code)" "missing cwd: exit_code"
[[ $(json error) == *"$missing"* ]] || fail "missing cwd: error does not name the directory: $(json error)"
[[ $(audit_field outcome error) == *"$missing"* ]] || fail "missing cwd: audit error"
assert_eq false "$(audit_field outcome executed)" "missing cwd: audit executed"
[[ ! -e $RX_TMP/ran ]] || fail "the command ran although its cwd is missing"

# ---- distinct outcomes -----------------------------------------------------------------------
ws_add_action t.exit '{"risk": "L0", "command": "exit {code}",
  "params": {"code": {"type": "int", "min": 0, "max": 255}}}'
assert_exit 254 rx run lab1 t.exit --param code=255 --json
assert_eq 254 "$(json exit_code)" "remote 255"
assert_eq null "$(json signal)" "remote 255: signal"
assert_eq true "$(json executed)" "remote 255: executed"

ws_add_action t.kill9 '{"risk": "L0", "command": "echo before; kill -9 $$; echo after"}'
ws_add_action t.term '{"risk": "L0", "command": "sh -c \"kill -TERM \\$\\$\""}'
ws_add_action t.child9 '{"risk": "L0", "command": "sleep 30 & kill -9 $!; wait $!"}'
for level in "" process-group; do
    cap "$level"
    what=${level:-pid-namespace}
    assert_exit 137 rx run lab1 t.kill9 --json
    assert_eq KILL "$(json signal)" "kill -9 \$\$: signal ($what)"
    assert_eq 137 "$(json exit_code)" "kill -9 \$\$: exit_code ($what)"
    assert_eq before "$(json stdout)" "kill -9 \$\$: stdout ($what)"
    assert_eq false "$(json timed_out)" "kill -9 \$\$: timed_out ($what)"
    assert_eq "$what" "$(json containment)" "kill -9 \$\$: containment"
    assert_eq KILL "$(audit_field outcome signal)" "audit signal ($what)"
    assert_exit 143 rx run lab1 t.term --json
    assert_eq TERM "$(json signal)" "TERM: signal ($what)"
    assert_exit 137 rx run lab1 t.child9 --json
    assert_eq KILL "$(json signal)" "a child killed: signal ($what)"
done
cap ""
# The caveat: the status is the shell's 128+N, so an exit 137 reads as KILL as well.
assert_exit 137 rx run lab1 t.exit --param code=137 --json
assert_eq KILL "$(json signal)" "exit 137 (the 128+N convention)"
assert_exit 128 rx run lab1 t.exit --param code=128 --json
assert_eq null "$(json signal)" "exit 128: no signal 0"

# ---- rexec check -----------------------------------------------------------------------------
assert_exit 0 rx check lab1 --json
"$RX_PYTHON" - "$OUT" <<'PY' || fail "rexec check --json"
import json, sys
o = json.loads(open(sys.argv[1]).readline())
facts = o["facts"]
assert isinstance(facts, dict), o
assert o["ok"] is True and o["error"] is None, o
assert facts["bash"].startswith(("4.", "5.")), facts
for t in ("timeout", "head", "base64"):
    assert facts[t] == "yes", (t, facts)
assert facts["containment"] == o["containment"], o
assert o["containment"] in ("pid-namespace", "process-group"), o
if facts["unshare"] == "no":
    assert o["containment"] == "process-group", o
PY
offered=$(json containment)
# what check says is what a call gets
ws_add_action t.true '{"risk": "L0", "command": "true"}'
assert_exit 0 rx run lab1 t.true --json
assert_eq "$offered" "$(json containment)" "a call's containment = what check reports"
assert_exit 0 rx check lab1
assert_contains "$OUT" "containment $offered"
assert_contains "$OUT" "timeout=yes"

# ---- the script in one read (docs/remote-contract.md): what a channel runs on the VM ----------
# While a call runs, its shell (sshd's child) is the one-read command, not `bash -s`.
ws_add_action t.nap '{"risk": "L0", "command": "sleep 2723"}'
"$REXEC_BIN" --workspace "$WS" run lab1 t.nap --timeout 60 >/dev/null 2>&1 &
nap=$!
wait_until 15 has_remote '^sleep 2723$'
[[ -n $(session_shells) ]] || fail "no call shell matching the one-read command: $(lab ps '.')"
kill -INT "$nap"; { wait "$nap"; } 2>/dev/null || true
wait_until 30 no_remote '^sleep 2723$'
# The same command fed a script cut short runs nothing of it and exits 255; fed all of it, it
# runs it and leaves the bytes after it (a command's stdin) in the pipe.
mark=/tmp/rexec-e2e-oneread.$$
script="touch $mark; cat; exit
"
n=${#script}
boot="bash -c 'LC_ALL=C IFS= read -r -N $n __rx_s || exit 255; eval \"unset __rx_s; \$__rx_s\"'"
rc=0
printf '%s' "${script:0:$((n - 3))}" | lab_ssh lab1 "$boot" >"$OUT" 2>&1 || rc=$?
[[ $rc == 255 && ! -e $mark ]] || fail "a script cut short: rc $rc (want 255), ran: $([[ -e $mark ]] && echo yes)"
got=$(printf '%sstdin-after' "$script" | lab_ssh lab1 "$boot")
[[ $got == stdin-after && -e $mark ]] || fail "the whole script: got '$got', ran: $([[ -e $mark ]] && echo yes)"
rm -f "$mark"
pass
