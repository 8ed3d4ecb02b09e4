#!/usr/bin/env bash
# serve's request keys from one table (rx_serve_keys in src/config/request.c, printed by
# `rexec __interface --serve`): a running serve refuses a key of no op with a message listing
# exactly the op's keys of the table and takes every key the table gives the op;
# docs/serve-protocol.md's key tables and quoted messages, and the Python client's requests
# (tests/install/serve_interface_check.py names every difference) say the same. Then the check
# itself is put to the test: a key added to one place only must fail it.
tid="serve interface: serve, serve-protocol.md and the Python client match serve's key table"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

check() { "$RX_PYTHON" "$REXEC_SRC/tests/install/serve_interface_check.py" "$1" "$2"; }

"$REXEC_BIN" __interface --serve >"$RX_TMP/table.json" || fail "rexec __interface --serve failed"
check "$REXEC_BIN" "$REXEC_SRC" >"$OUT" || { cat "$OUT" >&2; fail "serve's keys drifted from their table (above)"; }

# ---- serve itself: its answers are the table's ---------------------------------------------------
lab_start 1
SOCK=$RX_TMP/s.sock
"$REXEC_BIN" --workspace "$WS" serve --socket "$SOCK" 2>>"$RX_TMP/serve.err" &
SERVE_PID=$!
trap '_t_rc=$?; stop_gently "$SERVE_PID"; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT
wait_until 60 test -S "$SOCK"
"$RX_PYTHON" - "$SOCK" "$RX_TMP/table.json" >"$OUT" 2>&1 <<'PY' || { cat "$OUT" >&2; fail "serve's answers differ from its table (above)"; }
import json, socket, sys
path, table = sys.argv[1], json.load(open(sys.argv[2]))
keys = {op: [k["name"] for k in table["keys"] if op in k["ops"]] for op in table["ops"]}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(120)
s.connect(path)
f = s.makefile("rb")
bad = []

def ask(o, until):
    s.sendall(json.dumps(o).encode() + b"\n")
    out = []
    while True:
        m = json.loads(f.readline())
        out.append(m)
        if until(m):
            return out

def text(ms):
    return " | ".join(m.get("error") or "" for m in ms)

n = 0
for op in table["ops"]:
    n += 1
    want = 'frob: unknown key of "%s" (expected one of: %s)' % (op, ", ".join(keys[op]))
    if op == "stdin":  # a key is checked once the line names a request waiting for its stdin
        ask({"op": "run", "id": n, "targets": "lab1", "action": "t.none", "stdin_stream": True},
            lambda m: m.get("type") == "accepted")
        got = ask({"op": "stdin", "target": n, "frob": 1}, lambda m: m.get("type") == "done")
    else:
        got = ask({"op": op, "id": n, "frob": 1}, lambda m: m.get("id") == n and
                  m.get("type") in ("error", "done"))
    if want not in text(got):
        bad.append("%s: serve answered %r, the table wants %r" % (op, text(got), want))
    # every key of the table is taken: whatever is refused then, it is no unknown key
    n += 1
    line = {k: 1 for k in keys[op] if k not in ("bytes",)}  # bytes would be followed by raw bytes
    line.update(op=op, id=n)
    if op == "stdin":
        continue  # a line with every key is refused as a piece: it ends that request (checked above)
    got = ask(line, lambda m: m.get("id") == n and m.get("type") in
              ("error", "done", "pong", "list", "reloaded", "cancelled", "metrics"))
    if "unknown key" in text(got):
        bad.append("%s: a line with every key of the table got %r" % (op, text(got)))
got = ask({"op": "frob", "id": "o"}, lambda m: m.get("id") == "o")
want = 'op: unknown "frob" (%s)' % ", ".join(table["ops"])
if text(got) != want:
    bad.append("an unknown op: serve answered %r, the table wants %r" % (text(got), want))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY

# ---- the check, on a copy with one key added to one place only: each must be named ----------
copy=$RX_TMP/src
mkdir -p "$copy/docs"
cp -r "$REXEC_SRC/python" "$copy/"
cp "$REXEC_SRC/docs/serve-protocol.md" "$REXEC_SRC/docs/python-client.md" "$copy/docs/"
mutated() {  # mutated WHAT FILE PY_RE REPLACEMENT EXPECTED_NEEDLE...
    local what=$1 file=$2 needle
    cp "$copy/$file" "$copy/$file.orig"
    "$RX_PYTHON" - "$copy/$file" "$3" "$4" <<'PY' || fail "could not mutate $file"
import re, sys
p, pat, rep = sys.argv[1:4]
s = open(p).read()
t = re.sub(pat, rep, s, count=1, flags=re.M)
assert t != s, "pattern not found"
open(p, "w").write(t)
PY
    check "$REXEC_BIN" "$copy" >"$OUT" && fail "a key added to $what only was not noticed"
    shift 4
    for needle; do assert_contains "$OUT" "$needle"; done
    mv "$copy/$file.orig" "$copy/$file"
}
mutated "serve-protocol.md's table of run" docs/serve-protocol.md '^(\| `grant_id` \|)' '| `frob` | string | x |\n\1' \
    "docs/serve-protocol.md: the keys of \`run\` shows ['frob']" "docs/serve-protocol.md: the keys of \`eval\` shows ['frob']"
mutated "serve-protocol.md's table of check, as a type" docs/serve-protocol.md '^(\| `targets` \| )string( \| `host`, `h1,h2` or `@group`; required \|)' '\1integer\2' \
    "\`targets\` is 'integer', serve's table says 'string'"
mutated "serve-protocol.md's list of ops" docs/serve-protocol.md '^(\| `op` \| string \| `run`, )' '\1`frob`, ' \
    "docs/serve-protocol.md: the ops its \`op\` row names shows ['frob']"
# the defect of issue 35: a message copied with a list of its own
mutated "an unknown-key message quoted by serve-protocol.md" docs/serve-protocol.md 'unknown key of \\"run\\" \(expected one of: op, id, targets, ' 'unknown key of \\"run\\" (expected one of: ' \
    "docs/serve-protocol.md: quotes the unknown-key message of \`run\` as listing ['action', 'params'"
mutated "the Python client's requests" python/rexec_client/_proto.py '^(    req\["stream"\] = bool\(stream\))' '\1\n    req["frob"] = 1' \
    "python/rexec_client: call_request: the keys of \`run\` it sends shows ['frob']"
mutated "the Python client's SENDS" python/rexec_client/_proto.py '"hypothesis_id", "parallel"\)' '"hypothesis_id", "parallel", "frob")' \
    "python/rexec_client/_proto.py: SENDS + NOT_SENT of \`run\` shows ['frob']" \
    "python/rexec_client: call_request: the keys of \`run\` it sends lacks ['frob']"
# added to serve's table only (its dump, as a rexec that prints it): every face is named
"$RX_PYTHON" - "$RX_TMP/table.json" >"$RX_TMP/table2.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["keys"].append({"name": "frob", "type": "string", "ops": ["run", "eval"], "help": "x"})
print(json.dumps(t))
PY
mkdir "$RX_TMP/bin"
printf '#!/bin/sh\n[ "$1 $2" = "__interface --serve" ] && exec cat "%s"\nexec "%s" "$@"\n' "$RX_TMP/table2.json" "$REXEC_BIN" >"$RX_TMP/bin/rexec"
chmod +x "$RX_TMP/bin/rexec"
check "$RX_TMP/bin/rexec" "$copy" >"$OUT" && fail "a key added to serve's table only was not noticed"
for face in "docs/serve-protocol.md: the keys of \`run\` lacks ['frob']" \
    "docs/serve-protocol.md: quotes the unknown-key message of \`run\` as listing" \
    "python/rexec_client/_proto.py: SENDS + NOT_SENT of \`run\` lacks ['frob']" \
    "python/rexec_client/_proto.py: SENDS + NOT_SENT of \`eval\` lacks ['frob']"; do
    assert_contains "$OUT" "$face"
done
pass
