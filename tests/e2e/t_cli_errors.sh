#!/usr/bin/env bash
# The command line's refusals and its smaller paths, each with its documented exit code and a
# message naming what was wrong (docs/cli.md, docs/exit-codes.md): unknown commands, `--help` on
# every command, malformed --param/--request/--stdin, exclusive options, check/hosts/audit usage,
# unusable approvals/ and audit/ files (74, nothing run, the log whole);
# then what works: `rexec hosts` as a table, `audit show --run/--since`, a --request's rationale
# and hypothesis through serve, and Ctrl-C on a call through serve (the remote command stops).
tid="cli: refusals and exit codes, hosts table, audit show filters, Ctrl-C through serve"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
HOLD=$RX_TMP/hold.started
ws_add_action t.echo '{"risk": "L0", "command": "echo {text}", "params": {"text": {"type": "string"}}}'
ws_add_action t.cat '{"risk": "L0", "command": "cat"}'
ws_add_action t.hold "{\"risk\": \"L0\", \"command\": \"touch $HOLD; exec sleep 3141\"}"

# ---- commands and help ----------------------------------------------------------------------
assert_exit 64 rx nosuch
assert_contains "$ERR" 'unknown command "nosuch"'
assert_exit 64 rx help nosuch
assert_contains "$ERR" "no such command: nosuch"
assert_exit 64 rx
assert_contains "$ERR" "usage"
assert_exit 64 rx --bogus run
assert_contains "$ERR" "unknown option --bogus"
assert_exit 64 rx run lab1 t.echo --workspace
assert_contains "$ERR" "--workspace needs a value"
for c in run eval check hosts actions groups audit approve serve evidence; do
    assert_exit 0 rx "$c" --help
    assert_contains "$OUT" "usage: rexec $c"
done
# `--` ends the global options: a --socket after it stays the command's (which refuses both),
# instead of sending the call to a serve that is not there (255)
assert_exit 64 rx run lab1 t.echo -- --socket /nonexistent
assert_contains "$ERR" "unknown option -- (see \`rexec help run\`)"

# ---- run ------------------------------------------------------------------------------------
assert_exit 64 rx run lab1 t.echo --param notakeyvalue
assert_contains "$ERR" '--param wants NAME=VALUE, got "notakeyvalue"'
assert_exit 64 rx run lab1 t.echo extra
assert_contains "$ERR" 'unexpected argument "extra"'
assert_exit 64 rx run lab1 t.echo --param text=x --grant ch-0000000000000000 --approve
assert_contains "$ERR" "--grant and --approve are exclusive"
assert_exit 65 rx run lab1 t.cat --stdin "$RX_TMP/none"
assert_contains "$ERR" "$RX_TMP/none: No such file or directory"
# a pipe is read whole (not streamed): its bytes arrive
assert_exit 0 bash -c 'printf "piped\n" | "$@"' _ "$REXEC_BIN" --workspace "$WS" run lab1 t.cat --stdin -
assert_eq piped "$(cat "$OUT")" "stdin from a pipe"
# past limits.max_stdin_bytes, from a pipe and from a file: 65, nothing sent
ws_edit 'c["limits"]["max_stdin_bytes"] = 1000'
head -c 2000 /dev/zero >"$RX_TMP/2000"
assert_exit 65 bash -c '"$@" <"$0"' "$RX_TMP/2000" "$REXEC_BIN" --workspace "$WS" run lab1 t.cat --stdin -
assert_contains "$ERR" "stdin is 2000 bytes; limits.max_stdin_bytes is 1000"
assert_exit 65 rx run lab1 t.cat --stdin "$RX_TMP/2000"
assert_contains "$ERR" "stdin is 2000 bytes; limits.max_stdin_bytes is 1000"
ws_edit 'del c["limits"]["max_stdin_bytes"]'
printf '{"action": "t.echo", "params": {"text": "doc"}, "host": "lab1"}' >"$RX_TMP/req.json"
assert_exit 64 rx run lab1 sys.uname --request "$RX_TMP/req.json"
assert_contains "$ERR" "ACTION sys.uname differs from the request's \"t.echo\""
assert_exit 64 rx run lab2 --request "$RX_TMP/req.json"
assert_contains "$ERR" "TARGETS lab2 differs from the request's host \"lab1\""
printf '{"action": "t.echo", "params": {"text": true}}' >"$RX_TMP/bad.json"
assert_exit 65 rx run lab1 --request "$RX_TMP/bad.json"
assert_contains "$ERR" "$RX_TMP/bad.json: request: params.text"

# ---- check, hosts, audit ---------------------------------------------------------------------
assert_exit 64 rx check
assert_contains "$ERR" "usage: rexec check TARGETS"
assert_exit 64 rx check lab1 --bogus
assert_contains "$ERR" 'check: unexpected argument "--bogus"'
assert_exit 78 rx check lab9
assert_contains "$ERR" "lab9"
assert_exit 0 rx hosts
assert_contains "$OUT" "HOST"
assert_contains "$OUT" "ADDRESS"
grep -Eq "^lab1 +127\.0\.0\.1 +$(lab_port lab1) " "$OUT" || fail "no lab1 row in: $(cat "$OUT")"
assert_exit 64 rx hosts import-ssh-config a b
assert_contains "$ERR" "at most one PATTERN"
assert_exit 64 rx audit
assert_contains "$ERR" "audit: expected verify, show, head, prune or recover"
assert_exit 64 rx audit rewrite
assert_contains "$ERR" 'audit: unknown subcommand "rewrite"'
assert_exit 0 rx audit show --help
assert_contains "$OUT" "usage: rexec audit"
assert_exit 64 rx audit verify --bogus
assert_contains "$ERR" 'audit verify: unknown argument "--bogus"'
assert_exit 64 rx audit show --run
assert_contains "$ERR" "audit show: --run needs a value"
assert_exit 64 rx audit verify --head "$RX_TMP/none"
assert_contains "$ERR" "audit verify: --head $RX_TMP/none: No such file or directory"
assert_exit 64 rx audit show --since yesterday
assert_contains "$ERR" "yesterday"
assert_exit 64 rx audit prune --before soon
assert_contains "$ERR" 'audit prune: --before "soon": expected a time like'

# audit show --run / --since: the records of one run, and of the last hour
assert_exit 0 rx run lab1 t.echo --param text=one --json
one=$(json run_id)
assert_exit 0 rx run lab1 t.echo --param text=two --json
two=$(json run_id)
assert_exit 0 rx audit show --run "$one" --json
assert_eq 2 "$(grep -c "\"run_id\":\"$one\"" "$OUT")" "records of the first run"
assert_not_contains "$OUT" "$two"
assert_exit 0 rx audit show --since 1h --json
assert_contains "$OUT" "\"run_id\":\"$one\""
assert_contains "$OUT" "\"run_id\":\"$two\""
assert_exit 0 rx audit show --since 2099-01-01T00:00:00Z --json
assert_not_contains "$OUT" "run_id"

# ---- approvals and the audit log refused, naming the file; nothing runs, nothing is lost --------
assert_exit 77 rx approve nope
assert_contains "$ERR" '"nope" is not an approval id (ch- and 16 hex digits)'
assert_exit 77 rx approve ch-0000000000000000
assert_contains "$ERR" "no challenge or grant ch-0000000000000000 in $WS/approvals"
mkdir -p "$WS/approvals"
chmod 755 "$WS/approvals"
assert_exit 74 rx approvals
assert_contains "$ERR" "$WS/approvals: is group- or world-readable (mode 0755): refusing to use it"
chmod 700 "$WS/approvals"
bad=$WS/approvals/ch-1111111111111111.json
(umask 077 && : >"$bad")
assert_exit 74 rx approvals
assert_contains "$ERR" "$bad: not a valid challenge: JSON syntax error at byte 0"
printf '{"version": 1}' >"$bad"
assert_exit 74 rx approvals
assert_contains "$ERR" "$bad: not a valid challenge: id: missing"
rm -f "$bad"
n=$(wc -l <"$WS/audit/audit.log")
rm -f "$WS/audit/.lock"
ln -s "$RX_TMP/elsewhere" "$WS/audit/.lock"
assert_exit 74 rx run lab1 t.echo --param text=locked
assert_contains "$ERR" "$WS/audit/.lock: is a symbolic link"
rm -f "$WS/audit/.lock"
mv "$WS/audit/audit.log" "$RX_TMP/audit.log"
mkdir "$WS/audit/audit.log"
assert_exit 74 rx run lab1 t.echo --param text=dir
assert_contains "$ERR" "$WS/audit/audit.log: not a regular file"
rmdir "$WS/audit/audit.log"
mv "$RX_TMP/audit.log" "$WS/audit/audit.log"
assert_eq "$n" "$(wc -l <"$WS/audit/audit.log")" "audit records after the refusals"
assert_exit 0 rx audit verify

# ---- through serve ---------------------------------------------------------------------------
SOCK=$RX_TMP/s.sock
CLIENT=
at_exit '[[ -z $CLIENT ]] || kill -KILL "$CLIENT" 2>/dev/null'
start_serve --log off
long=/tmp/$(printf 'x%.0s' $(seq 120)).sock
assert_exit 64 rx --socket "$long" run lab1 t.echo --param text=x
assert_contains "$ERR" "socket path too long"
assert_exit 64 rx --socket "$SOCK" run lab1 t.echo --param text=x --approve
assert_contains "$ERR" "--approve needs a terminal of its own"
# a request's rationale, hypothesis and (small) stdin travel in the request line
printf '{"action": "t.cat", "stdin": "from the doc\\n", "rationale": "why not", "hypothesis_id": "H-7"}' \
    >"$RX_TMP/doc.json"
assert_exit 0 rx --socket "$SOCK" run lab1 --request "$RX_TMP/doc.json" --parallel 2 --json
assert_contains "$OUT" '"stdout":"from the doc\n"'
assert_eq "why not" "$(audit_field intent rationale)" "rationale through serve"
assert_eq "H-7" "$(audit_field intent hypothesis_id)" "hypothesis through serve"

# Ctrl-C on a call through serve: the client sends a cancel, the remote command stops, exit 130
rm -f "$HOLD"
"$REXEC_BIN" --workspace "$WS" --socket "$SOCK" run lab1 t.hold >"$OUT" 2>"$ERR" &
CLIENT=$!
wait_until 30 test -e "$HOLD"
wait_until 10 remote_pgrep 'sleep 3141'
kill -INT "$CLIENT"
rc=0
wait "$CLIENT" || rc=$?
CLIENT=
assert_eq 130 "$rc" "exit status after Ctrl-C"
assert_contains "$ERR" "interrupted: stopping the remote commands"
wait_until 20 bash -c '! "$1" --dir "$2" ps "sleep 3141" >/dev/null' _ "$RX_LAB" "$LAB_DIR"
assert_exit 0 rx audit verify
pass
