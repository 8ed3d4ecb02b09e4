#!/usr/bin/env bash
# Every secret the workspace resolves is redacted from every call, handed to the action or not:
# a value left in a file by an earlier call, printed by real bash ($'...' in the C and UTF-8
# locales), xxd -p, base64, openssl base64 and base32 (each wrapping at its own column), and a
# value typed into a parameter, a rationale or a hypothesis id of a held or eval'd call: not on
# the terminal, in --json, the audit log, evidence, approvals/ or the approval prompt. A secret
# that cannot be resolved is named by `rexec check`.
# shellcheck disable=SC2016 # code in single quotes
tid="redact: every workspace secret, every path, real encoders"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
export T_PLAIN='unh4nded-Secret+value/with=chars'
export T_LONG='L0ng-secret-that-wraps-in-every-encoder-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFG'
"$RX_PYTHON" -c 'import sys; open(sys.argv[1], "wb").write(b"bin\x1bary-\xc3\xa9-\xff\x01-secret-xyz\n")' \
    "$RX_TMP/bin.secret"
chmod 600 "$RX_TMP/bin.secret"
ws_edit 'c.setdefault("secrets", {}).update({"PLAIN": {"env": "T_PLAIN"}, "LONG": {"env": "T_LONG"},
  "BIN": {"file": args[0]}, "MISSING": {"env": "T_NOT_SET_ANYWHERE"}})' "$RX_TMP/bin.secret"
unset T_NOT_SET_ANYWHERE

# An earlier call left the values in files on the VM (this machine): no action is handed them.
LEFT=$RX_TMP/left
mkdir -p "$LEFT"
printf '%s' "$T_PLAIN" >"$LEFT/plain"
printf '%s' "$T_LONG" >"$LEFT/long"
head -c -1 "$RX_TMP/bin.secret" >"$LEFT/bin"
chmod -R a+rX "$LEFT"
cat >"$RX_TMP/enc.sh" <<'SH'
d=$1
bin=$(cat "$d/bin"); long=$(cat "$d/long"); plain=$(cat "$d/plain")
for loc in C C.UTF-8; do
    LC_ALL=$loc printf '%q\n' "$bin"
    LC_ALL=$loc bash -c 'x=$1; declare -p x' _ "$bin"
done
cat "$d/plain"; echo
xxd -p "$d/long"; xxd -p "$d/bin"
base64 "$d/long"; base64 -w 40 "$d/long"
openssl base64 -in "$d/long"
base32 "$d/long"; base32 "$d/plain"
{ printf 'xy'; cat "$d/long"; } | base64
SH
ws_add_action t.enc '{"risk": "L1", "command": "bash {script} {dir}",
  "params": {"script": {"type": "path"}, "dir": {"type": "path"}}}'
# the script is one of the catalog's own values (a path given to bash as its script is code)
ws_edit 'c["actions"]["t.enc"]["params"]["script"] = {"type": "enum", "values": [args[0]]}' "$RX_TMP/enc.sh"
ws_add_action t.held '{"risk": "L2", "command": "echo {v}", "params": {"v": {"type": "string"}}}'

# What must not appear, computed here: raw values, bash's own $'...' text, and the runs of hex,
# base64 and base32 that depend only on a secret, looked for with line breaks taken out.
"$RX_PYTHON" - "$LEFT" >"$RX_TMP/forms" <<'PY'
import base64, binascii, os, subprocess, sys
d = sys.argv[1]
vals = [open(os.path.join(d, f), "rb").read() for f in ("plain", "long", "bin")]
forms = []
for s in vals:
    forms += [s, binascii.hexlify(s), binascii.hexlify(s).upper()]
    for k in range(3):
        e = base64.b64encode(b"\0" * k + s)
        forms.append(e[(8 * k + 5) // 6: 8 * (k + len(s)) // 6])
    for k in range(5):
        e = base64.b32encode(b"\0" * k + s)
        forms.append(e[(8 * k + 4) // 5: 8 * (k + len(s)) // 5])
for loc in ("C", "C.UTF-8"):
    q = subprocess.run(["bash", "-c", 'printf %q "$1"', "_", vals[2]], capture_output=True,
                       env={"LC_ALL": loc}).stdout
    assert q.startswith(b"$'"), q
    forms.append(q[2:-1])
for f in forms:
    sys.stdout.buffer.write(binascii.hexlify(f) + b"\n")
PY
no_secret_in() { # FILE...: no form, with line breaks taken out
    "$RX_PYTHON" - "$RX_TMP/forms" "$@" <<'PY' || fail "a secret survived (see above)"
import binascii, os, sys
forms = [binascii.unhexlify(l.strip()) for l in open(sys.argv[1]) if l.strip()]
bad = 0
paths = []
for p in sys.argv[2:]:                  # a directory (audit/writers/) is read whole
    if os.path.isdir(p):
        paths += [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs]
    else:
        paths.append(p)
for path in paths:
    data = open(path, "rb").read()
    joined = data.replace(b"\r", b"").replace(b"\n", b"")
    for f in forms:
        if f in data or f in joined:
            print("form %r found in %s" % (f[:16], path), file=sys.stderr)
            bad = 1
sys.exit(bad)
PY
}

# 1. Not handed, printed by real encoders.
assert_exit 0 rx run lab1 t.enc --param "script=$RX_TMP/enc.sh" --param "dir=$LEFT"
for n in PLAIN LONG BIN; do assert_contains "$OUT" "[REDACTED:$n]"; done
no_secret_in "$OUT" "$ERR"
assert_exit 0 rx run lab1 t.enc --param "script=$RX_TMP/enc.sh" --param "dir=$LEFT" --json
no_secret_in "$OUT" "$ERR"
evidence=$("$RX_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["evidence"])' "$OUT")
no_secret_in "$evidence"/*

# 2. Typed into a parameter, a rationale and a hypothesis id of a held call, and of an eval.
printf '{"action": "t.held", "params": {"v": "%s"}, "rationale": "because %s"}\n' \
    "$T_LONG" "$T_PLAIN" >"$RX_TMP/req.json"
assert_exit 75 rx run lab1 t.held --request "$RX_TMP/req.json" --json
no_secret_in "$OUT" "$ERR"
assert_contains "$OUT" "[REDACTED:LONG]"
assert_exit 75 rx eval lab1 t.held --request "$RX_TMP/req.json" --json
no_secret_in "$OUT" "$ERR"
printf '{"action": "t.held", "params": {"v": "x"}, "hypothesis_id": "%s"}\n' "$T_PLAIN" \
    >"$RX_TMP/req2.json"
rx run lab1 t.held --request "$RX_TMP/req2.json" --json >"$RX_TMP/h.out" 2>"$RX_TMP/h.err" || true
no_secret_in "$RX_TMP/h.out" "$RX_TMP/h.err"
assert_exit 0 rx approvals --json
no_secret_in "$OUT" "$ERR" "$WS"/approvals/* "$WS"/audit/*

# 3. The secret nobody can resolve is named (and only named).
rx check lab1 >"$RX_TMP/c.out" 2>"$RX_TMP/c.err" || true
assert_contains "$RX_TMP/c.err" "secret MISSING"
assert_contains "$RX_TMP/c.err" "not redacted until it resolves"
pass
