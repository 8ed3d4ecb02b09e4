#!/usr/bin/env bash
# Bulk output flows through fixed-size chunks (docs/PERFORMANCE.md):
#  - 48 MiB of output with the secret straddling every 4 KiB boundary (every read, packet and
#    evidence buffer boundary rexec uses is a multiple of 4 KiB): every copy is redacted, and the
#    evidence file, its meta.json, the result's stdout_sha256 and the expected redaction agree;
#  - --json keeps at most limits.max_result_bytes and says so; the evidence keeps the rest;
#  - `truncated`, the byte counts, the evidence size and the exit status are exact under several
#    caps (below, at and above the output; 0), on both streams;
#  - on_cap "kill" stops a command that never ends once it passes the cap;
#  - stdin from a regular file is streamed (never loaded) and arrives byte-exact.
tid="bulk: streamed output, caps and on_cap"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
tokfile=$WS/secrets/demo_token
[[ -s $tokfile ]] || fail "the lab has no demo token"

# The generator runs on the "VM" (this machine): blocks of 4 KiB of text, the secret centred on
# every block boundary. The expected redaction is computed here from the same recipe.
cat >"$RX_TMP/gen.py" <<'PY'
import os, sys
secret = os.environ["DEMO_TOKEN"].encode() if len(sys.argv) < 3 else open(sys.argv[2], "rb").read().rstrip(b"\n")
marker = b"[REDACTED:DEMO_TOKEN]" if len(sys.argv) > 2 else secret
blocks, half = int(sys.argv[1]), len(secret) // 2
line = b"abcdefghijklmnopqrstuvwxyz0123456789 the quick brown fox .,;\n"  # 63 bytes
body = (line * 66)[: 4096 - len(secret)]
out = sys.stdout.buffer
out.write(body[: 4096 - half])
for i in range(blocks - 1):
    out.write(marker)
    out.write(body[: 4096 - len(secret)])
out.write(marker + b"\n")
PY
blocks=12288 # 48 MiB
ws_add_action t.gen "{\"risk\": \"L1\", \"secrets\": [\"DEMO_TOKEN\"], \"max_output_bytes\": 134217728,
  \"command\": \"python3 {gen} $blocks; exit 5\", \"params\": {\"gen\": {\"type\": \"enum\", \"values\": [\"$RX_TMP/gen.py\"]}}}"
ws_edit 'c["hosts"]["lab1"]["allow"] = "L1"; c.setdefault("limits", {})["max_result_bytes"] = 100000'
"$RX_PYTHON" "$RX_TMP/gen.py" "$blocks" "$tokfile" >"$RX_TMP/expected"
want_sha=$(sha256sum <"$RX_TMP/expected" | cut -d' ' -f1)

assert_exit 5 rx run --json lab1 t.gen --param "gen=$RX_TMP/gen.py"
ev=$(json evidence)
[[ -d $ev ]] || fail "no evidence directory ($ev)"
cmp "$ev/stdout" "$RX_TMP/expected" || fail "evidence stdout is not the expected redaction"
grep -qaF -f "$tokfile" "$ev/stdout" "$OUT" && fail "the secret survived a chunk boundary"
assert_eq "$want_sha" "$(json stdout_sha256)" "result stdout_sha256"
assert_eq "$(wc -c <"$RX_TMP/expected")" "$(json stdout_bytes)" "stdout_bytes"
assert_eq false "$(json truncated)" "truncated"
assert_eq true "$(json stdout_truncated_in_result)" "stdout_truncated_in_result"
assert_eq false "$(json stderr_truncated_in_result)" "stderr_truncated_in_result"
"$RX_PYTHON" - "$OUT" "$RX_TMP/expected" "$ev/meta.json" "$want_sha" <<'PY' || fail "result/meta"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
exp = open(sys.argv[2], "rb").read()
meta = json.load(open(sys.argv[3]))
assert r["stdout"].encode() == exp[:100000], "result stdout is not the first max_result_bytes"
assert meta["stdout_sha256"] == sys.argv[4], meta["stdout_sha256"]
assert meta["stdout_bytes_stored"] == len(exp), meta["stdout_bytes_stored"]
assert meta["exit_code"] == 5 and meta["truncated"] is False, meta
PY
ls "$WS/evidence" | grep -q '^\.tmp-' && fail "a .tmp- evidence directory was left behind"

# Caps: N bytes on stdout and N/2 on stderr, exit 7, under max_output_bytes CAP.
check_cap() {  # check_cap CAP N
    local cap=$1 n=$2 half=$(($2 / 2)) keep_o keep_e
    ws_add_action t.n "{\"risk\": \"L0\", \"max_output_bytes\": $cap, \"command\":
      \"yes abcdefg | head -c $n; yes b | head -c $half >&2; exit 7\"}"
    [[ $cap == 0 ]] && ws_edit 'c["actions"]["t.n"].pop("max_output_bytes"); c["limits"]["max_output_bytes"] = 0'
    assert_exit 7 rx run --json lab1 t.n
    keep_o=$((n < cap ? n : cap)) keep_e=$((half < cap ? half : cap))
    assert_eq "$n" "$(json stdout_bytes)" "cap $cap, $n bytes: stdout_bytes"
    assert_eq "$half" "$(json stderr_bytes)" "cap $cap, $n bytes: stderr_bytes"
    assert_eq "$([[ $n -gt $cap ]] && echo true || echo false)" "$(json truncated)" "cap $cap, $n bytes: truncated"
    assert_eq 7 "$(json exit_code)" "cap $cap, $n bytes: exit_code"
    ev=$(json evidence)
    assert_eq "$keep_o" "$(wc -c <"$ev/stdout")" "cap $cap, $n bytes: evidence stdout size"
    assert_eq "$keep_e" "$(wc -c <"$ev/stderr")" "cap $cap, $n bytes: evidence stderr size"
    assert_eq "$(yes abcdefg | head -c "$keep_o" | sha256sum | cut -d' ' -f1)" \
        "$(json stdout_sha256)" "cap $cap, $n bytes: stdout_sha256"
    # and the terminal shows exactly what was kept, the exit status passes through
    assert_exit 7 rx run lab1 t.n
    assert_eq "$keep_o" "$(wc -c <"$OUT")" "cap $cap, $n bytes: bytes shown"
}
check_cap 1000 999
check_cap 1000 1000
check_cap 1000 1001
check_cap 1048576 5000000
check_cap 0 3000

# on_cap "kill": a command that would print forever is stopped once past the cap.
ws_add_action t.forever '{"risk": "L0", "max_output_bytes": 100000, "on_cap": "kill",
  "command": "yes rexec-on-cap-test; exit 3"}'
assert_exit 143 rx run --json lab1 t.forever
assert_eq true "$(json cap_killed)" "cap_killed"
assert_eq true "$(json truncated)" "truncated with on_cap kill"
assert_eq false "$(json timed_out)" "timed_out with on_cap kill"
assert_eq null "$(json error)" "error with on_cap kill"
assert_eq 100000 "$(wc -c <"$(json evidence)/stdout")" "evidence with on_cap kill"
remote_pgrep 'yes rexec-on-cap-test' >/dev/null && fail "the command still runs after on_cap kill"

# stdin streamed from a file: byte-exact, and max_stdin_bytes still applies.
head -c 20000000 /dev/urandom >"$RX_TMP/in.bin"
ws_edit 'c["limits"]["max_stdin_bytes"] = 20000000; c["limits"]["max_output_bytes"] = 4096'
ws_add_action t.sha '{"risk": "L0", "command": "sha256sum"}'
assert_exit 0 rx run lab1 t.sha --stdin "$RX_TMP/in.bin"
assert_contains "$OUT" "$(sha256sum <"$RX_TMP/in.bin" | cut -d' ' -f1)"
printf x >>"$RX_TMP/in.bin"
assert_exit 65 rx run lab1 t.sha --stdin "$RX_TMP/in.bin"
assert_contains "$ERR" "limits.max_stdin_bytes is 20000000"
pass
