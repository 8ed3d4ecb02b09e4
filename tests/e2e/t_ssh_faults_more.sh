#!/usr/bin/env bash
# Connection and authentication failures a user can hit, each with its message and exit code
# (docs/exit-codes.md: 255 host unavailable, 78 a secret that cannot be handed out):
#  - a fan-out under a small open-file limit (ulimit -n): the hosts that get no socket say
#    which limit it is (RLIMIT_NOFILE), the others answer; `rexec check` writes no audit, so
#    only the connections compete for descriptors;
#  - in a network namespace made here (loopback down): a name that cannot be resolved, and a
#    connect that fails at once (no route);
#  - auth: a key_passphrase secret whose variable is unset; an ssh-agent socket that does not
#    exist, an agent that closes the connection (this used to spin at 100 % CPU for ever,
#    deaf to SIGTERM: libssh2 1.10 reads an agent's EOF again and again), an agent with no
#    keys; the agent identity named by its private key (the .pub beside it is used), by a file
#    that does not exist and by one that is no public key;
#  - a VM where no runner can start (TMPDIR missing: remote/runner.sh answers ":none setup"):
#    serve warns once and the calls take a channel each;
#  - an idle connection the server closes: dropped at once, the next call gets a fresh one;
#  - a serve client that stops reading a stream for many keepalive intervals: the call's
#    channel is paused (back-pressure) and resumed, and every byte arrives.
tid="ssh faults: open-file limit, resolve, no route, agent, no runner, idle close, pause"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 2
P1=$(lab_port lab1)
ws_add_action t.ok '{"risk": "L0", "command": "echo ok"}'

# ---- the open-file limit ---------------------------------------------------------------------
ws_edit 'c["hosts"].update({("m%d" % i): dict(c["hosts"]["lab1"]) for i in range(40)})
c["groups"]["many"] = ["m%d" % i for i in range(40)]
c.setdefault("limits", {})["parallel"] = 64'
assert_exit 255 bash -c 'ulimit -n 24 && exec "$@"' _ "$REXEC_BIN" --workspace "$WS" check @many
rlimit="cannot connect to 127.0.0.1 port $P1: Too many open files (the open-file limit, RLIMIT_NOFILE / ulimit -n, holds one per connection)"
n_lim=$(grep -cF -- "$rlimit" "$ERR" || true)
(( n_lim > 0 )) || { _rx_show stderr "$ERR"; fail "no host named the open-file limit"; }
# rexec's other lines are the same limit met elsewhere (known_hosts is read per connection).
if grep "^rexec: " "$ERR" | grep -vF -- "$rlimit" | grep -vE "^rexec: m[0-9]+: $WS/known_hosts: Too many open files$" |
    grep -q .; then
    _rx_show stderr "$ERR"
    fail "an unexpected error under the open-file limit"
fi
(( $(grep -cE "^m[0-9]+: ok \(" "$OUT") > 0 )) || fail "no host answered under the open-file limit"
ws_edit 'c["hosts"] = {k: v for k, v in c["hosts"].items() if not k.startswith("m")}
del c["groups"]["many"]'

# ---- a network namespace without a route: resolving and connecting fail at once ---------------
if [[ $(id -u) -eq 0 ]] && unshare -n true 2>/dev/null; then
    ws_edit 'c["hosts"]["nowhere"] = dict(c["hosts"]["lab1"], address="nosuch.invalid")
c["scope"]["domains"].append("invalid")'
    assert_exit 255 unshare -n "$REXEC_BIN" --workspace "$WS" run nowhere t.ok
    assert_eq "rexec: nowhere: cannot resolve nosuch.invalid: temporary failure" "$(cat "$ERR")" \
        "an unresolvable name"
    assert_exit 255 unshare -n "$REXEC_BIN" --workspace "$WS" run lab1 t.ok
    assert_eq "rexec: lab1: cannot connect to 127.0.0.1 port $P1: Network is unreachable" \
        "$(cat "$ERR")" "a connect without a route"
    ws_edit 'del c["hosts"]["nowhere"]'
else
    printf 'note %s: not root or no unshare -n: resolve and no-route cases not run\n' "$tid" >&2
fi

# ---- auth ------------------------------------------------------------------------------------
ws_edit 'c["secrets"]["KP"] = {"env": "RX_T_UNSET_PASSPHRASE"}
c["hosts"]["lab1"]["key_passphrase"] = "KP"'
assert_exit 78 env -u RX_T_UNSET_PASSPHRASE "$REXEC_BIN" --workspace "$WS" run lab1 t.ok
assert_eq "rexec: lab1: key_passphrase: secret KP: environment variable RX_T_UNSET_PASSPHRASE is not set" \
    "$(cat "$ERR")" "an unset key_passphrase"
ws_edit 'del c["hosts"]["lab1"]["key_passphrase"]; c["hosts"]["lab1"]["auth"] = "agent"'

if ! command -v ssh-agent >/dev/null || ! command -v ssh-add >/dev/null; then
    skip "ssh-agent/ssh-add not installed"
fi
assert_exit 255 env SSH_AUTH_SOCK="$RX_TMP/no/agent.sock" "$REXEC_BIN" --workspace "$WS" run lab1 t.ok
assert_eq "rexec: lab1: cannot connect to the ssh-agent at $RX_TMP/no/agent.sock (SSH_AUTH_SOCK): No such file or directory" \
    "$(cat "$ERR")" "no agent at SSH_AUTH_SOCK"

# An "agent" that reads the request and closes the connection.
cat >"$RX_TMP/closing_agent.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.close()
PY
"$RX_PYTHON" "$RX_TMP/closing_agent.py" "$RX_TMP/closing.sock" &
FAKE_PID=$!
AGENT_PID=""
at_exit 'kill "$FAKE_PID" $AGENT_PID 2>/dev/null'
wait_until 10 test -S "$RX_TMP/closing.sock"
assert_exit 255 env SSH_AUTH_SOCK="$RX_TMP/closing.sock" timeout -k 2 15 "$REXEC_BIN" --workspace "$WS" run lab1 t.ok
assert_eq "rexec: lab1: the ssh-agent at $RX_TMP/closing.sock failed (listing its keys)" "$(cat "$ERR")" \
    "an agent that closes the connection"
kill "$FAKE_PID"

eval "$(ssh-agent -s -a "$RX_TMP/agent.sock")" >/dev/null
AGENT_PID=$SSH_AGENT_PID
export SSH_AUTH_SOCK=$RX_TMP/agent.sock
ws_edit 'del c["hosts"]["lab1"]["key"]'
assert_exit 255 rx run lab1 t.ok
assert_eq "rexec: lab1: the ssh-agent at $SSH_AUTH_SOCK holds no keys (ssh-add one)" "$(cat "$ERR")" \
    "an agent without keys"
ssh-add -q "$WS/keys/id_ed25519" 2>/dev/null
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/id_ed25519"'  # the private key: its .pub names it
assert_exit 0 rx run lab1 t.ok
assert_eq ok "$(cat "$OUT")" "the agent identity named by its private key"
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/absent"'
assert_exit 255 rx run lab1 t.ok
assert_eq "rexec: lab1: key (the agent identity to use): $WS/keys/absent: No such file or directory" \
    "$(cat "$ERR")" "an agent identity file that does not exist"
printf 'ssh-ed25519 AAAA!not-base64 x\n' >"$WS/keys/junk.pub"
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/junk.pub"'
assert_exit 255 rx run lab1 t.ok
assert_eq "rexec: lab1: key $WS/keys/junk.pub: not an OpenSSH public key (TYPE BASE64 [comment])" \
    "$(cat "$ERR")" "an agent identity file that is no public key"
kill "$AGENT_PID"
AGENT_PID=""
unset SSH_AUTH_SOCK SSH_AGENT_PID
ws_edit 'c["hosts"]["lab1"]["key"] = "keys/id_ed25519"; del c["hosts"]["lab1"]["auth"]'

# ---- a VM where no runner starts: lab2's sshd gives its sessions a TMPDIR that is missing -----
lab_set_tmpdir lab2 "$RX_TMP/no-tmp"

SOCK=$RX_TMP/serve.sock
# Without REXEC_DEBUG: warnings reach serve's stderr always, debug lines only with it.
unset REXEC_DEBUG
start_serve
SX=("$REXEC_BIN" --workspace "$WS" --socket "$SOCK")
# The first call takes a channel of its own, the second starts a runner: refused, it runs on a
# channel of its own too, and so does the third, without another warning.
for i in 1 2 3; do
    assert_exit 0 timeout 60 "${SX[@]}" run lab2 t.ok
    assert_eq ok "$(cat "$OUT")" "call $i to a host without a runner"
done
assert_eq 1 "$(grep -cF 'lab2: no runner on this host (lab2: a runner cannot start here); calls take a channel each' \
    "$RX_TMP/serve.err")" "the warning about the host without a runner"
assert_not_contains "$RX_TMP/serve.err" "rexec: debug:"

# ---- an idle connection that the server closes ----------------------------------------------
P2=$(lab_port lab2)
conns_to() { ss -Htn "( dport = :$1 and dst 127.0.0.1 )" | wc -l; }
assert_eq 1 "$(conns_to "$P2")" "serve's connections to lab2"
lab drop lab2 >/dev/null
# Not the keepalive (15 s): the connection turns readable with the server's EOF.
# shellcheck disable=SC2317 # called by wait_until
no_conns_to() { [[ $(conns_to "$1") == 0 ]]; }
wait_until 5 no_conns_to "$P2"
assert_exit 0 timeout 60 "${SX[@]}" run lab2 t.ok
assert_eq ok "$(cat "$OUT")" "the call after the server closed the idle connection"
stop_gently "$SERVE_PID"
SERVE_PID=""

# ---- a client that stops reading: the paused call survives the keepalive --------------------
# keepalive_s 0.2. The command writes 5 MiB, works 2 s, marks that on the VM and writes 8 MiB
# more; the client reads one byte, then nothing until the mark exists: serve's queue to it
# passes its high-water mark (4 MiB) and the call's channel is paused, its socket unread, across
# some ten keepalive intervals; then every byte must arrive and the call end 0. (The first part
# must fit in what serve, the channel's window and the socket hold while paused, about 6 MiB:
# a paused channel is no longer read past the read that paused it.)
ws_edit 'c["hosts"]["lab1"]["runner"] = False
c["limits"]["keepalive_s"] = 0.2'
ws_add_action t.stream '{"risk": "L0", "max_output_bytes": 33554433,
  "command": "head -c 5242880 /dev/zero | tr \"\\\\0\" c; sleep 2; : >'"$RX_TMP/stall.mark"'; head -c 8388608 /dev/zero | tr \"\\\\0\" c"}'
start_serve
cat >"$RX_TMP/stall.py" <<'PY'
import json, os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(120)
s.connect(sys.argv[1])
s.sendall((json.dumps({"op": "run", "id": 1, "targets": "lab1", "action": "t.stream",
                       "stream": True}) + "\n").encode())
first = s.recv(1)          # the stream has begun; nothing more is read until the mark exists
deadline = time.time() + 60
while not os.path.exists(sys.argv[2]):
    assert time.time() < deadline, "no mark from the command"
    time.sleep(0.02)
buf, n, res = first, 0, None
while True:
    chunk = s.recv(1 << 20)
    if not chunk:
        break
    buf += chunk
    *lines, buf = buf.split(b"\n")
    for l in lines:
        o = json.loads(l)
        if o["type"] == "output":
            d = o["data"]
            assert d == "c" * len(d), "a byte changed"
            n += len(d)
        elif o["type"] == "result":
            res = o
        elif o["type"] in ("done", "error"):
            print(n, res and res["exit_status"], res and res["error"])
            sys.exit(0)
sys.exit("serve closed the connection")
PY
assert_exit 0 timeout 120 "$RX_PYTHON" "$RX_TMP/stall.py" "$SOCK" "$RX_TMP/stall.mark"
assert_eq "13631488 0 None" "$(cat "$OUT")" "bytes and status of the stalled stream"
stop_gently "$SERVE_PID"
SERVE_PID=""

assert_exit 0 rx audit verify
pass
