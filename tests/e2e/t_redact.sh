#!/usr/bin/env bash
# A secret printed by an action in every encoding, on stdout and stderr, straddling 16 KiB
# boundaries, leaves no trace: not on the terminal, in --json, in the audit log or in evidence.
tid="redact: no secret in any output or file"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
# Characters that make every encoding differ from the raw value.
export T_SECRET='s3cr3t/V@lue+with=chars&more~ok?'
ws_edit 'c.setdefault("secrets", {})["TEST_SECRET"] = {"env": "T_SECRET"}'
# The remote script that prints every form: python3 on the VM (this machine) encodes.
cat >"$RX_TMP/leak.py" <<'PY'
import base64, binascii, json, os, shlex, sys, urllib.parse
s = os.environ["TEST_SECRET"].encode()
forms = [s, base64.b64encode(s), base64.b64encode(s).rstrip(b"="), base64.urlsafe_b64encode(s),
         base64.b64encode(b"x" + s), base64.b64encode(b"xy" + s),
         urllib.parse.quote(s, safe="").encode(), urllib.parse.quote_plus(s).encode(),
         json.dumps(s.decode()).encode(), binascii.hexlify(s), binascii.hexlify(s).upper(),
         shlex.quote(s.decode()).encode()]
pad = b"a" * 16380
for out in (sys.stdout.buffer, sys.stderr.buffer):
    for f in forms:
        out.write(pad[: 16384 - 5] + f + b"\n")   # each form crosses a 16 KiB boundary
        out.write(b"form:" + f + b":end\n")
    out.flush()
PY
ws_add_action t.leak '{"risk": "L1", "secrets": ["TEST_SECRET"], "max_output_bytes": 8388608,
  "command": "python3 {script}", "params": {"script": {"type": "path"}}}'
# a script to run is chosen from the catalog's own values (a path given to python3 as its
# program would be code, and the loader refuses it: docs/workspace.md)
ws_edit 'c["actions"]["t.leak"]["params"]["script"] = {"type": "enum", "values": [args[0]]}' "$RX_TMP/leak.py"

# The forms the test looks for (the same list, computed here).
"$RX_PYTHON" - >"$RX_TMP/forms" <<'PY'
import base64, binascii, json, os, shlex, urllib.parse
s = os.environ["T_SECRET"].encode()
forms = [s, base64.b64encode(s), base64.b64encode(s).rstrip(b"="), base64.urlsafe_b64encode(s),
         urllib.parse.quote(s, safe="").encode(), urllib.parse.quote_plus(s).encode(),
         json.dumps(s.decode())[1:-1].encode(), binascii.hexlify(s), binascii.hexlify(s).upper(),
         s[:12], s[-12:]]   # no long prefix or suffix of it either
for f in forms:
    print(f.decode())
PY
no_secret_in() { # FILE...: none of the forms appears
    local f
    for f in "$@"; do
        while IFS= read -r form; do
            if grep -qF -- "$form" "$f"; then fail "a form of the secret ($form) is in $f"; fi
        done <"$RX_TMP/forms"
    done
}

assert_exit 0 rx run lab1 t.leak --param "script=$RX_TMP/leak.py"
assert_contains "$OUT" "form:[REDACTED:TEST_SECRET]:end"
assert_contains "$ERR" "form:[REDACTED:TEST_SECRET]:end"
no_secret_in "$OUT" "$ERR"
cp "$OUT" "$RX_TMP/term.out"

assert_exit 0 rx run lab1 t.leak --param "script=$RX_TMP/leak.py" --json
no_secret_in "$OUT" "$ERR"
evidence=$("$RX_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["evidence"])' "$OUT")
[[ -d $evidence ]] || fail "no evidence directory"
no_secret_in "$evidence"/* "$WS"/audit/*
# Evidence holds what the terminal showed: the redacted bytes.
cmp "$evidence/stdout" "$RX_TMP/term.out" || fail "evidence stdout differs from the terminal's"

# An error message that would echo the secret is redacted too (a parameter carrying it).
ws_add_action t.echo '{"risk": "L1", "secrets": ["TEST_SECRET"], "command": "echo {v}; exit 3",
  "params": {"v": {"type": "string"}}}'
assert_exit 3 rx run lab1 t.echo --param "v=$T_SECRET" --json
no_secret_in "$OUT" "$ERR" "$WS"/audit/*
pass
