#!/usr/bin/env bash
# Machine output and CLI habits: with --json every failure (unknown host or group, bad workspace,
# usage) is one JSON object on stdout with error and exit_status; reason is null exactly when
# decision is; `rexec groups` and serve's {"op":"groups"}; check --json has facts as an object;
# global options after the command; on a terminal (under script(1)) the fan-out progress line
# is wiped before host output and drawn again after; --no-progress.
tid="cli: --json errors, groups, check facts, options after the command, progress line"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'
ws_add_action t.echo '{"risk": "L0", "command": "echo hello-from-$(hostname)-x; echo second-line"}'
ws_add_action t.p '{"risk": "L0", "command": "echo {n}", "params": {"n": {"type": "int"}}}'

# error_json CODE: $OUT is exactly one JSON object with error (a string) and exit_status CODE
error_json() {
    "$RX_PYTHON" - "$OUT" "$1" <<'PY' || { _rx_show stdout "$OUT"; fail "not one JSON error object"; }
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
o = json.loads(lines[0])
assert isinstance(o["error"], str) and o["error"], o
assert o["exit_status"] == int(sys.argv[2]), o
PY
}

# ---- --json failures --------------------------------------------------------------------------
assert_exit 78 rx run lab9 t.echo --json;        error_json 78; assert_contains "$OUT" 'lab9'
assert_exit 78 rx run @nogroup t.echo --json;    error_json 78; assert_contains "$OUT" 'nogroup'
assert_exit 78 rx check lab9 --json;             error_json 78
assert_exit 78 rx eval lab9 t.echo --json;       error_json 78
assert_exit 64 rx run lab1 --json;               error_json 64
assert_exit 64 rx run lab1 t.echo --frob --json; error_json 64
assert_exit 64 rx hosts --json extra;            error_json 64
assert_exit 64 rx --json;                        error_json 64
mkdir -p "$RX_TMP/badws" && echo '{"hosts": ' >"$RX_TMP/badws/rexec.json"
assert_exit 78 "$REXEC_BIN" --workspace "$RX_TMP/badws" hosts --json; error_json 78
assert_exit 78 "$REXEC_BIN" hosts --json --workspace "$RX_TMP/badws"; error_json 78
# without --json, nothing on stdout
assert_exit 78 rx run lab9 t.echo
assert_eq "" "$(cat "$OUT")" "stdout without --json"

# ---- reason null exactly when decision is ----------------------------------------------------
assert_exit 65 rx run lab1 t.p --param n=abc --json
"$RX_PYTHON" - "$OUT" <<'PY' || fail "reason/decision"
import json, sys
o = json.loads(open(sys.argv[1]).readline())
assert (o["decision"] is None) == (o["reason"] is None), o
PY
assert_exit 0 rx eval lab1 t.echo --json
assert_eq ALLOW "$(json decision)" decision; assert_eq ALLOW_LEVEL "$(json reason)" reason

# ---- actions: how each takes its stdin ----------------------------------------------------------
ws_add_action t.piped '{"risk": "L0", "command": "cat", "stdin": "piped"}'
assert_exit 0 rx actions --json
"$RX_PYTHON" - "$OUT" <<'PY' || fail "actions --json stdin"
import json, sys
acts = {a["name"]: a for a in json.load(open(sys.argv[1])) if "command" in a}
assert acts["t.piped"]["stdin"] == "piped", acts["t.piped"]
assert acts["t.echo"]["stdin"] == "staged", acts["t.echo"]
PY

# ---- groups ---------------------------------------------------------------------------------
assert_exit 0 rx groups --json
assert_eq '[{"name": "lab", "hosts": ["lab1", "lab2"]}]' \
    "$("$RX_PYTHON" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$OUT")" groups
assert_exit 0 rx groups
assert_contains "$OUT" "lab1,lab2"
SOCK=$RX_TMP/s.sock
start_serve
"$RX_PYTHON" - "$SOCK" <<'PY' || fail "serve groups"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])
s.sendall(b'{"op": "groups", "id": 7}\n')
o = json.loads(s.makefile().readline())
assert o["type"] == "list" and o["id"] == 7 and o["groups"] == [{"name": "lab", "hosts": ["lab1", "lab2"]}], o
PY

# ---- check --json: facts is an object, the same through serve ----------------------------------
for via in "" "--socket $SOCK"; do
    # shellcheck disable=SC2086 # $via is an option and its value
    assert_exit 0 rx check lab1 --json $via
    "$RX_PYTHON" - "$OUT" <<'PY' || fail "check --json $via"
import json, sys
o = json.loads(open(sys.argv[1]).readline())
assert isinstance(o["facts"], dict) and o["facts"].get("timeout") == "yes", o
assert o["containment"] is None or isinstance(o["containment"], str), o
assert "id" not in o and "type" not in o, o
PY
done
# the evidence volume nearly full: a warning (threshold raised above 100 % to force it)
assert_exit 0 env REXEC_EVIDENCE_MIN_FREE_PCT=101 "$REXEC_BIN" -w "$WS" check lab1
assert_contains "$ERR" "warning: the evidence volume is nearly full"
assert_exit 0 env REXEC_EVIDENCE_MIN_FREE_PCT=101 "$REXEC_BIN" -w "$WS" check lab1 --json
assert_contains "$OUT" '"warning":"the evidence volume is nearly full'

# ---- global options after the command ---------------------------------------------------------
cd "$RX_TMP"
assert_exit 0 "$REXEC_BIN" hosts --workspace "$WS" --json
assert_contains "$OUT" '"name":"lab1"'
assert_exit 0 "$REXEC_BIN" run lab1 t.echo -w "$WS"
assert_contains "$OUT" "second-line"
# the value of a command option is never taken for a global option
assert_exit 65 "$REXEC_BIN" run lab1 t.p --param --workspace=x -w "$WS"
assert_contains "$ERR" "workspace"
assert_exit 0 "$REXEC_BIN" run lab1 t.echo --socket "$SOCK" -w "$WS"
assert_contains "$OUT" "second-line"

# ---- the progress line on a terminal ------------------------------------------------------------
# visible_lines FILE: the lines a terminal shows for FILE (\r returns to column 0, ESC[K wipes to
# the end of the line), so text that ran into the progress line shows up in the same line.
visible_lines() {
    "$RX_PYTHON" - "$1" <<'PY'
import sys
raw = open(sys.argv[1], "rb").read().decode("utf-8", "replace").replace("\r\n", "\n")
for line in raw.split("\n"):
    cur, col = [], 0
    i = 0
    while i < len(line):
        if line[i] == "\r":
            col = 0
        elif line.startswith("\x1b[K", i):
            del cur[col:]
            i += 2
        else:
            if col < len(cur):
                cur[col] = line[i]
            else:
                cur.append(line[i])
            col += 1
        i += 1
    print("".join(cur))
PY
}
TS=$RX_TMP/typescript
script -qefc "$REXEC_BIN -w $WS run @lab t.echo" "$TS" >/dev/null </dev/null
visible_lines "$TS" >"$RX_TMP/screen"
assert_contains "$TS" "hosts done"                  # it was drawn, on a terminal
assert_contains "$RX_TMP/screen" "rexec: 2/2 hosts done, 0 failed"
for h in lab1 lab2; do
    [[ $(grep -c "^\[$h\] second-line$" "$RX_TMP/screen") == 1 ]] ||
        { _rx_show screen "$RX_TMP/screen"; fail "[$h] output ran into the progress line"; }
done
if grep -q "hosts done.*\[lab\|\].*hosts done" "$RX_TMP/screen"; then
    _rx_show screen "$RX_TMP/screen"; fail "output and progress share a line"
fi
script -qefc "$REXEC_BIN -w $WS run @lab t.echo --no-progress" "$TS" >/dev/null </dev/null
assert_not_contains "$TS" "hosts done"
pass
