#!/usr/bin/env bash
# A workspace secret's value typed where the CLI or the Python client echoes what it was given
# (a host, @group or a,b list, an action or parameter name, a --grant, a request key, a usage
# error's argument, check's TARGETS, a socket path) never reaches stdout or stderr in any form,
# directly, with --json and through --socket (serve), while the message still says what was
# wrong with the value's marker in its place: `unknown host "[REDACTED:SEC]"`
# (docs/redaction.md, "Messages").
# shellcheck disable=SC2016 # code in single quotes
tid="redact: messages and fields that echo what the caller typed"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
export T_SEC='Sup3r-Secret-Name-4711'
ws_edit 'c.setdefault("secrets", {})["SEC"] = {"env": "T_SEC"}
c["groups"] = {"lab": ["lab1"]}'
ws_add_action t.echo '{"risk": "L0", "command": "echo {text}", "params": {"text": {"type": "string"}}}'
ws_add_action t.held '{"risk": "L2", "command": "echo held"}'
ws_add_action t.leak '{"risk": "L0", "secrets": ["SEC"], "command": "echo \"o:$SEC\"; echo \"e:$SEC\" >&2; exit 3"}'
S=$T_SEC
M='[REDACTED:SEC]'

# Every form the redactor knows that a message could carry: raw, case-folded, hex, base64 and
# base32 runs, JSON- and percent-encoded. None may appear in any output below.
"$RX_PYTHON" - "$S" >"$RX_TMP/forms" <<'PY'
import base64, binascii, json, sys, urllib.parse
s = sys.argv[1].encode()
forms = [s, s.lower(), s.upper(), binascii.hexlify(s), binascii.hexlify(s).upper(),
         json.dumps(s.decode())[1:-1].encode(), urllib.parse.quote(s).encode()]
for k in range(3):
    e = base64.b64encode(b"\0" * k + s)
    forms.append(e[(8 * k + 5) // 6: 8 * (k + len(s)) // 6])
for k in range(5):
    e = base64.b32encode(b"\0" * k + s)
    forms.append(e[(8 * k + 4) // 5: 8 * (k + len(s)) // 5])
for f in forms:
    sys.stdout.buffer.write(binascii.hexlify(f) + b"\n")
PY
no_secret() { # FILE...: no form of the secret
    "$RX_PYTHON" - "$RX_TMP/forms" "$@" <<'PY' || fail "the secret reached the output (see above)"
import binascii, sys
forms = [binascii.unhexlify(l.strip()) for l in open(sys.argv[1]) if l.strip()]
bad = 0
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    joined = data.replace(b"\r", b"").replace(b"\n", b"")
    for f in forms:
        if f in data or f in joined:
            print("form %r found in %s:\n%s" % (f[:24], path, data[:2000].decode("utf-8", "replace")),
                  file=sys.stderr)
            bad = 1
sys.exit(bad)
PY
}
# expect CODE NEEDLE CMD...: CMD exits CODE, names what was wrong (NEEDLE, on stderr or in the
# --json object on stdout), and prints no form of the secret.
expect() {
    local code=$1 needle=$2
    shift 2
    assert_exit "$code" "$@"
    no_secret "$OUT" "$ERR"
    cat "$OUT" "$ERR" >"$RX_TMP/both"
    assert_contains "$RX_TMP/both" "$needle"
}
valid_json() { # every line of $OUT is a JSON object
    "$RX_PYTHON" -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip()]' "$OUT" ||
        fail "stdout is not JSON lines"
}

# ---- direct: targets ---------------------------------------------------------------------------
expect 78 "unknown host \"$M\"" rx run "$S" t.echo -p text=x
expect 78 "unknown host \"$M\"" rx run "$S" t.echo -p text=x --json
valid_json
expect 78 "$M" rx run "@$S" t.echo -p text=x
expect 78 "$M" rx run "lab1,$S" t.echo -p text=x --json
valid_json
expect 78 "$M" rx run "$S,@lab" t.echo -p text=x
expect 78 "unknown host \"$M\"" rx eval "$S" t.echo -p text=x
expect 78 "unknown host \"$M\"" rx check "$S"
expect 78 "$M" rx check "lab1,$S" --json
expect 78 "$M" rx check "@$S"

# ---- direct: the action, its parameters, a grant, the request ----------------------------------
expect 78 "unknown action \"$M\"" rx run lab1 "$S"
expect 78 "\"action\":\"$M\"" rx run lab1 "$S" --json
valid_json
expect 78 "$M" rx eval lab1 "$S" --json
expect 65 "$M" rx run lab1 t.echo -p text=x -p "$S=1"
expect 65 "$M" rx run lab1 t.echo -p text=x -p "$S=1" --json
expect 64 "--param wants NAME=VALUE, got \"$M\"" rx run lab1 t.echo -p "$S"
rx run lab1 t.held --grant "$S" >"$OUT" 2>"$ERR" && fail "a made-up grant was taken"
no_secret "$OUT" "$ERR"
assert_contains "$ERR" "$M"
rx run lab1 t.held --grant "$S" --json >"$OUT" 2>"$ERR" && fail "a made-up grant was taken"
no_secret "$OUT" "$ERR"
expect 64 "unexpected argument \"$M\"" rx run lab1 t.echo "$S"
expect 64 "unknown option --$M" rx run lab1 t.echo "--$S"
expect 64 "$M" rx run lab1 t.echo --timeout "$S"
expect 64 "$M" rx "$S"
expect 64 "$M" rx "--$S" hosts
expect 64 "$M" rx check lab1 "--$S"
expect 64 "$M" rx hosts "$S"
rx approve "$S" >"$OUT" 2>"$ERR" </dev/null && fail "approve of a made-up id succeeded"
no_secret "$OUT" "$ERR"
assert_contains "$ERR" "$M"
expect 64 "$M" rx approvals "$S"
expect 64 "$M" rx audit show --since "$S"
expect 64 "$M" rx evidence prune --older-than "$S"
printf '{"action": "t.echo", "host": "lab1", "params": {"text": "x"}}\n' >"$RX_TMP/req.json"
expect 64 "TARGETS $M differs" rx run "$S" --request "$RX_TMP/req.json"
printf '{"action": "t.echo", "params": {"text": "x"}, "%s": 1}\n' "$S" >"$RX_TMP/req2.json"
expect 65 "$M" rx run lab1 --request "$RX_TMP/req2.json"
expect 65 "$M" rx run lab1 t.echo --request "$RX_TMP/$S.json"
# what still works shows no marker: the path is not a workspace's concern
assert_exit 0 rx run lab1 t.echo -p text=hello
assert_contains "$OUT" hello

# ---- a secret split between stdout and stderr (docs/redaction.md, "stdout and stderr are
# redacted apart"): each stream is redacted alone, so each part is shown; with 2>&1 in the
# action both parts go through one stream and the value is redacted. -------------------------
ws_edit 'c["actions"]["t.split"] = {"risk": "L0", "secrets": ["SEC"],
  "command": "printf %s \"${SEC:0:10}\"; printf %s \"${SEC:10}\" >&2"}
c["actions"]["t.merged"] = {"risk": "L0", "secrets": ["SEC"],
  "command": "{ printf %s \"${SEC:0:10}\"; printf %s \"${SEC:10}\" >&2; } 2>&1"}'
assert_exit 0 rx run lab1 t.split
assert_contains "$OUT" "${S:0:10}"
assert_contains "$ERR" "${S:10}"
assert_exit 0 rx run lab1 t.merged
assert_contains "$OUT" "$M"
no_secret "$OUT" "$ERR"

# ---- the workspace does not load: only what cannot be a secret is echoed ----------------------
expect 64 "unknown command \"[NOT SHOWN]\"" "$REXEC_BIN" --workspace "$RX_TMP/nowhere" "$S"
expect 64 "unknown command \"nope\"" "$REXEC_BIN" --workspace "$RX_TMP/nowhere" nope

# ---- through rexec serve (--socket) --------------------------------------------------------------
SOCK=$RX_TMP/s.sock
start_serve --log json
expect 78 "unknown host \"$M\"" rx --socket "$SOCK" run "$S" t.echo -p text=x
expect 78 "$M" rx --socket "$SOCK" run "lab1,$S" t.echo -p text=x --json
valid_json
expect 78 "$M" rx --socket "$SOCK" run "@$S" t.echo -p text=x
expect 78 "unknown host \"$M\"" rx --socket "$SOCK" check "$S"
expect 78 "unknown action \"$M\"" rx --socket "$SOCK" run lab1 "$S"
expect 78 "\"action\":\"$M\"" rx --socket "$SOCK" run lab1 "$S" --json
expect 65 "$M" rx --socket "$SOCK" run lab1 t.echo -p text=x -p "$S=1" --json
rx --socket "$SOCK" run lab1 t.held --grant "$S" --json >"$OUT" 2>"$ERR" && fail "grant taken"
no_secret "$OUT" "$ERR"
expect 255 "cannot reach rexec serve at $RX_TMP/$M.sock" rx --socket "$RX_TMP/$S.sock" run lab1 t.echo -p text=x
# serve's replies are redacted by serve alone: the client loads no workspace for them
# (docs/redaction.md, "Through rexec serve"). A client that knows no secret (its workspace does
# not exist) still shows the secret only as serve's marker, in the streams, the --json fields,
# an error and eval's rendered command; these fail if serve let the value through.
for ws in "$WS" "$RX_TMP/nowhere"; do
    SX=("$REXEC_BIN" --workspace "$ws" --socket "$SOCK")
    expect 3 "o:$M" "${SX[@]}" run lab1 t.leak
    assert_contains "$ERR" "e:$M"
    expect 3 "\"stderr\":\"e:$M" "${SX[@]}" run lab1 t.leak --json
    assert_contains "$OUT" "\"stdout\":\"o:$M"
    valid_json
    expect 78 "unknown action \"$M\"" "${SX[@]}" run lab1 "$S"
    expect 0 "would run: echo '$M'" "${SX[@]}" eval lab1 t.echo -p "text=$S"
    expect 0 "\"rendered\":\"echo '$M'" "${SX[@]}" eval lab1 t.echo -p "text=$S" --json
done
# the CLI under --socket that cannot read the workspace masks what it cannot redact
expect 255 "cannot reach rexec serve at [NOT SHOWN]" \
    "$REXEC_BIN" --workspace "$RX_TMP/nowhere" --socket "$RX_TMP/$S.sock" run lab1 t.echo

# ---- the Python client: what serve sent, and nothing of the caller's own arguments -------------
cat >"$RX_TMP/t.py" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from rexec_client import Client, RexecError, RexecCallError
sock, s = sys.argv[1], sys.argv[2]
c = Client(sock, timeout=120)
def refused(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except RexecError as e:
        print("%s|%s|%s" % (type(e).__name__, e.exit_status, e))
        return e
    raise AssertionError("no RexecError")
for t in (s, "@" + s, "lab1," + s):
    refused(c.run, t, "t.echo", {"text": "x"})
    refused(c.check, t)
serve_fixed = sys.argv[4] == "1"
e = refused(c.run, "lab1", s, raise_on_error=True)
assert isinstance(e, RexecCallError), e
if serve_fixed:  # serve's result "action" is the caller's text, unredacted (see below)
    print(e.result)
e = refused(c.run, "lab1", "t.echo", {"text": "x", s: "1"}, raise_on_error=True)
print(e.result)
e = refused(lambda: Client(sock + s).run("lab1", "t.echo"))   # no such socket
assert e.exit_status == 255, e
PY
SERVE_FIXED=1 # serve redacts ids of any type, errors and a result's host and action
expect 0 "unknown host \"$M\"" "$RX_PYTHON" "$RX_TMP/t.py" "$SOCK" "$S" "$REXEC_SRC/python" "$SERVE_FIXED"
assert_contains "$OUT" "RexecCallError|78|lab1: unknown action \"$M\""
assert_contains "$OUT" "RexecCallError|65|lab1: action t.echo has no parameter \"$M\""
assert_contains "$OUT" "RexecError|255|cannot reach rexec serve (the socket given): "
expect 64 "invalid float value: '[NOT SHOWN]'" env PYTHONPATH="$REXEC_SRC/python" "$RX_PYTHON" \
    -m rexec_client.cli --socket "$SOCK" lab1 t.echo --timeout "$S"
expect 78 "unknown host \"$M\"" env PYTHONPATH="$REXEC_SRC/python" "$RX_PYTHON" -m rexec_client.cli \
    --socket "$SOCK" "$S" t.echo
expect 65 "--stdin [NOT SHOWN]" env PYTHONPATH="$REXEC_SRC/python" "$RX_PYTHON" -m rexec_client.cli \
    --socket "$SOCK" lab1 t.echo --stdin "$RX_TMP/$S"

# ---- serve itself: its replies echo a request's "id" (any JSON type) and a result's "action",
# its errors quote the request ("targets differs"), and its log writes ids: all redacted. -------
if [[ $SERVE_FIXED == 1 ]]; then
    "$RX_PYTHON" - "$SOCK" "$S" >"$OUT" 2>"$ERR" <<'PY'
import json, socket, sys
sock, s = sys.argv[1:3]
for req in ({"op": "ping", "id": [s]}, {"op": "ping", "id": {"k": s}}, {"op": s, "id": 1},
            {"op": "run", "id": 2, "targets": "lab1", "host": s, "action": "t.echo"},
            {"op": "run", "id": 3, "targets": "lab1", "action": s}):
    c = socket.socket(socket.AF_UNIX)
    c.connect(sock)
    c.sendall(json.dumps(req).encode() + b"\n")
    f = c.makefile("rb")
    for line in f:
        print(line.decode().rstrip())
        if json.loads(line)["type"] in ("done", "error", "pong"):
            break
    c.close()
PY
    no_secret "$OUT" "$ERR" "$RX_TMP/serve.err"
fi
no_secret "$RX_TMP/serve.err"
pass
