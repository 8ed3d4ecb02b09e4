#!/usr/bin/env bash
# W3C traceparent (docs/cli.md --traceparent, docs/serve-protocol.md, docs/audit.md): given with
# --traceparent, $TRACEPARENT (the flag wins), the request document, a serve request or the
# Python client, it is in the call's audit records (intent and outcome), its evidence's
# meta.json, serve's log lines and the result; `rexec audit verify` still passes. An invalid one
# is refused before anything: 64 on the CLI, an error line (65) from serve, and no audit record.
tid="traceparent: recorded in audit, meta.json, serve log and result; invalid ones refused"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_add_action t.one '{"risk": "L0", "command": "echo one"}'
TP1=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
TP2=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00
TP3=00-11111111111111111111111111111111-2222222222222222-01
records() { [[ -f $WS/audit/audit.log ]] && wc -l <"$WS/audit/audit.log" || echo 0; }
meta_field() {  # meta_field FIELD: FIELD of meta.json of the run in $OUT
    "$RX_PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1] + "/meta.json"))[sys.argv[2]])' \
        "$(json evidence)" "$1"
}
check_recorded() {  # check_recorded TP: the run in $OUT carries TP everywhere
    assert_eq "$1" "$(json traceparent)" "result traceparent"
    assert_eq "$1" "$(audit_field intent traceparent)" "intent traceparent"
    assert_eq "$1" "$(audit_field outcome traceparent)" "outcome traceparent"
    assert_eq "$1" "$(meta_field traceparent)" "meta.json traceparent"
}

# ---- the CLI -----------------------------------------------------------------------------------
rx run lab1 t.one --json --traceparent "$TP1" >"$OUT" 2>"$ERR" || fail "run --traceparent failed"
check_recorded "$TP1"
TRACEPARENT=$TP2 rx run lab1 t.one --json >"$OUT" 2>"$ERR" || fail "run with \$TRACEPARENT failed"
check_recorded "$TP2"
TRACEPARENT=$TP2 rx run lab1 t.one --json --traceparent "$TP1" >"$OUT" 2>"$ERR"
check_recorded "$TP1"   # the flag wins
printf '{"action": "t.one", "traceparent": "%s"}' "$TP3" >"$RX_TMP/req.json"
TRACEPARENT=$TP2 rx run lab1 --request "$RX_TMP/req.json" --json >"$OUT" 2>"$ERR"
check_recorded "$TP3"   # the request's wins over the environment
rx run lab1 t.one --json >"$OUT" 2>"$ERR"
"$RX_PYTHON" -c 'import json,sys; assert "traceparent" not in json.loads(open(sys.argv[1]).readline())' "$OUT" ||
    fail "a call without a traceparent has one in its result"

# invalid: 64 naming what is wrong, nothing written, nothing run
n0=$(records)
assert_exit 64 rx run lab1 t.one --traceparent "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
assert_contains "$ERR" "--traceparent: the trace id must be 32 lowercase hex digits, not all zeros"
TRACEPARENT=garbage assert_exit 64 rx run lab1 t.one
# shellcheck disable=SC2016 # the message names the variable
assert_contains "$ERR" '$TRACEPARENT: not a W3C traceparent'
assert_exit 64 rx eval lab1 t.one --traceparent "${TP1^^}"
printf '{"action": "t.one", "traceparent": "ff-%s"}' "${TP1#00-}" >"$RX_TMP/bad.json"
assert_exit 65 rx run lab1 --request "$RX_TMP/bad.json"
assert_contains "$ERR" "traceparent: the version must be 2 lowercase hex digits, not ff"
assert_eq "$(records)" "$n0"

# ---- serve, its log, the CLI through it and the Python client ----------------------------------
SOCK=$RX_TMP/s.sock
start_serve --log json
rx run lab1 t.one --json --socket "$SOCK" --traceparent "$TP2" >"$OUT" 2>"$ERR" || fail "run through serve failed"
check_recorded "$TP2"
PYTHONPATH=$REXEC_SRC/python "$RX_PYTHON" - "$SOCK" "$TP3" >"$OUT" <<'PY' || fail "the Python client's traceparent= did not come back"
import json, sys
from rexec_client import Client, RexecError
c = Client(sys.argv[1], timeout=60)
r = c.run("lab1", "t.one", traceparent=sys.argv[2])
assert r["exit_status"] == 0 and r["results"][0]["traceparent"] == sys.argv[2], r
print(json.dumps(r["results"][0]))
try:
    c.run("lab1", "t.one", traceparent="00-abc")
    raise SystemExit("an invalid traceparent was taken")
except RexecError as e:
    assert e.exit_status == 65 and "traceparent: not a W3C traceparent" in e.message, e.message
PY
check_recorded "$TP3"
n1=$(records)
"$RX_PYTHON" - "$SOCK" <<'PY' >"$RX_TMP/err_line" || fail "serve did not refuse an invalid traceparent with an error line"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sys.argv[1])
s.sendall(b'{"op":"run","id":"bad","targets":"lab1","action":"t.one","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}\n')
r = json.loads(s.makefile().readline())
assert r["type"] == "error" and r["id"] == "bad" and r["exit_status"] == 65, r
assert "traceparent: the parent id must be 16 lowercase hex digits" in r["error"], r
PY
assert_eq "$(records)" "$n1"
stop_gently "$SERVE_PID"
"$RX_PYTHON" - "$RX_TMP/serve.err" "$TP2" "$TP3" <<'PY' || fail "serve's log lines do not carry the traceparent"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for tp in sys.argv[2:]:
    got = sorted(l["event"] for l in lines if l.get("traceparent") == tp)
    assert got == ["call", "request"], (tp, got)
PY
rx audit verify >"$OUT" 2>"$ERR" || fail "audit verify failed after records with a traceparent"
pass
