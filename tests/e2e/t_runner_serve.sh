#!/usr/bin/env bash
# Runners through `rexec serve`, with calls stopped right after they were accepted:
#  - 200 calls, 4 at a time, each printing its own value; one in five has timeout_s 0.001, one
#    in ten is cancelled as soon as it was sent: no call prints anything but its own value (a
#    killed call's code never reaches a later call), and the ordinary calls all succeed;
#  - kill -9 of serve while calls run (and runners start): within 10 s nothing of any runner is
#    left on the VM (no process naming a runner directory, no runner, no command);
#  - kill -9 of the runners (and of any call's wrapper: a call on a channel of its own) while
#    calls run: the same; and kill -9 of serve as soon as its runners' `bash -s` appear
#    (runners and slots still starting): the same;
#  - on a VM whose runners' directory is another's symlink (lab1's sshd gives its sessions a
#    TMPDIR where ${TMPDIR}/.rexec-<uid> links elsewhere): calls run all the same, each on a
#    channel of its own (one warning), and nothing is written through the link.
tid="runner via serve: stopped calls, kill -9 of serve and of the runners"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'
ws_add_action t.val '{"risk": "L0", "command": "echo val-{v}", "params": {"v": {"type": "int", "min": 0, "max": 100000}}}'
ws_add_action t.long '{"risk": "L0", "command": "echo started; exec sleep 2724"}'

SOCK=$RX_TMP/rexec.sock

CLIENT=$RX_TMP/client.py
cat >"$CLIENT" <<'PY'
import json, random, socket, sys, time
sock, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(120)
s.connect(sock)
f = s.makefile("rb")
rnd = random.Random(int(time.time() * 1000))
def send(o):
    s.sendall((json.dumps(o) + "\n").encode())
if mode in ("long", "send"):  # n long calls (waiting for each to start): kill -9 comes from outside
    for i in range(n):
        send({"op": "run", "id": i, "targets": "lab1", "action": "t.long", "stream": True})
    if mode == "send":
        print("started", flush=True)
        sys.stdin.read()
        sys.exit(0)
    seen = set()
    while len(seen) < n:
        o = json.loads(f.readline())
        # the command's first output (serve may hold back its last bytes until more come)
        if o.get("type") == "output" and o.get("data", "").startswith("start"):
            seen.add(o.get("id"))
    print("started", flush=True)
    sys.stdin.read()  # until the test is done with us
    sys.exit(0)
inflight, nxt, wrong, kinds = {}, 0, [], {"plain": 0, "timeout": 0, "cancel": 0, "ok": 0, "stopped": 0, "failed": 0}
while nxt < n or inflight:
    while nxt < n and len(inflight) < 4:
        k = rnd.random()
        kind = "plain" if mode == "plain" else "timeout" if k < 0.2 else "cancel" if k < 0.3 else "plain"
        kinds[kind] += 1
        req = {"op": "run", "id": nxt, "targets": "lab1", "action": "t.val", "params": {"v": nxt}}
        if kind == "timeout":
            req["timeout_s"] = 0.001
        send(req)
        if kind == "cancel":
            send({"op": "cancel", "id": "c%d" % nxt, "target": nxt})
        inflight[nxt] = [kind, None]
        nxt += 1
    o = json.loads(f.readline())
    i = o.get("id")
    if i not in inflight:
        continue
    if o.get("type") == "result":
        inflight[i][1] = o
    elif o.get("type") in ("done", "error"):
        kind, r = inflight.pop(i)
        r = r or o
        out = r.get("stdout") or ""
        if out not in ("", "val-%d\n" % i):
            wrong.append((i, kind, out, r.get("error")))
        if kind == "plain" and (r.get("exit_code") != 0 or out != "val-%d\n" % i):
            wrong.append((i, kind, out, r.get("error")))
        how = "ok" if r.get("exit_code") == 0 else "stopped" if r.get("timed_out") or "cancel" in (r.get("error") or "") else "failed"
        kinds[how] += 1
        if how == "failed":
            e = "%s %s %s" % (kind, r.get("exit_code"), (r.get("error") or "")[:90])
            kinds.setdefault("errors", {}).setdefault(e, 0)
            kinds["errors"][e] += 1
print(json.dumps(kinds))
for w in wrong:
    print("WRONG", json.dumps(w))
sys.exit(1 if wrong else 0)
PY

# ---- 200 calls, some stopped at once ---------------------------------------------------------
start_serve
timeout 600 "$RX_PYTHON" "$CLIENT" "$SOCK" 200 mixed >"$OUT" 2>"$ERR" ||
    fail "calls printed what was not theirs: $(cat "$OUT" "$ERR")"
echo "  200 calls: $(head -n1 "$OUT")" >&2

# ---- kill -9 of serve, then of the runners, while calls run ---------------------------------
runner_left() { remote_pgrep '(^bash -c LC_ALL=C IFS= read -r -N [0-9]+ __rx_s |\.rexec-[0-9]+/r\.|sleep 2724)' >/dev/null; }
nothing_left() { ! runner_left; }
# When the runners are killed, serve lives on and may still be starting a runner (its shell not
# there yet when the shells were listed); that runner is serve's, alive and in order. What must go
# is what was killed: the shells, every process naming their runners' directories, the commands.
KILLED_RE=
killed_left() { remote_pgrep "$KILLED_RE" >/dev/null; }
nothing_killed_left() { ! killed_left; }
for victim in serve runners serve-early; do
    if [[ -z $SERVE_PID ]]; then # a new serve: runners start after a host's first call
        start_serve
        timeout 120 "$RX_PYTHON" "$CLIENT" "$SOCK" 2 plain >/dev/null || fail "$victim: the first calls"
    fi
    # runners: the runner up first, so that the long calls run on it (not all on channels of
    # their own while it starts)
    if [[ $victim == runners ]]; then
        poll_until 60 has_remote '\.rexec-[0-9]+/r\.[^ /]*/slot ' ||
            fail "runners: no runner came up after the first calls: $(lab ps '.' || true);" \
                "serve $(kill -0 "$SERVE_PID" 2>/dev/null && echo alive || echo gone): $(tail -n 20 "$RX_TMP/serve.err")"
    fi
    # serve-early: serve dies as soon as a runner's `bash -s` is there, while it starts
    coproc LONG { timeout 300 "$RX_PYTHON" "$CLIENT" "$SOCK" 3 "$([[ $victim == serve-early ]] && echo send || echo long)"; }
    read -r -t 120 line <&"${LONG[0]}" || fail "$victim: the long calls did not start"
    assert_eq started "$line" "$victim: the long calls"
    wait_until 20 runner_left || fail "$victim: no runner on the VM (the test proves nothing)"
    if [[ $victim == serve* ]]; then
        kill -KILL "$SERVE_PID"
        wait "$SERVE_PID" 2>/dev/null || true
        SERVE_PID=
    else
        # each runner's (or a call's wrapper's) `bash -s`, not their helpers: a slot or a
        # wrapper's watchdog is what must clean up after them
        shells=$(session_shells)
        # (none when every long call took a channel of its own, the runner still starting)
        dirs=$({ lab ps '\.rexec-[0-9]+/r\.' || true; } | { grep -oE '\.rexec-[0-9]+/r\.[A-Za-z0-9]+' || true; } |
            sort -u | tr '\n' '|')
        KILLED_RE="(${dirs//./\\.}sleep 2724)"
        for p in $shells; do kill -KILL "$p" 2>/dev/null || true; done
        poll_until 10 nothing_killed_left || fail "runners killed: left on the VM after 10 s" \
            "(killed: $(echo $shells), runners ${dirs%|}): $(lab ps '.')"
        for p in $shells; do
            [[ ! -e /proc/$p ]] || fail "runners killed: shell $p lives on: $(lab ps '.')"
        done
        # serve-early wants a serve whose runners have yet to start
        stop_serve
    fi
    poll_until 10 nothing_left || fail "$victim killed: left on the VM after 10 s: $(lab ps '.')"
    kill "$LONG_PID" 2>/dev/null || true
    wait "$LONG_PID" 2>/dev/null || true
done

# ---- a runners' directory that cannot be trusted -----------------------------------------------
[[ -z $SERVE_PID ]] || stop_serve
mkdir -m 700 "$RX_TMP/vmtmp" "$RX_TMP/elsewhere"
ln -s "$RX_TMP/elsewhere" "$RX_TMP/vmtmp/.rexec-$(id -u)"
lab_set_tmpdir lab1 "$RX_TMP/vmtmp"
: >"$RX_TMP/serve.err"
start_serve
# (runners start with a host's second call, and the runner's "none" comes while other calls
# run: rounds of calls until serve has said so, each round's calls all done; a hang fails by
# the client's timeout)
said_no_runner() { grep -q "lab1: no runner on this host" "$RX_TMP/serve.err"; }
for n in 2 4 4 4 4 4; do
    timeout 120 "$RX_PYTHON" "$CLIENT" "$SOCK" "$n" mixed >"$OUT" 2>"$ERR" ||
        fail "calls beside a planted runners' directory: $(cat "$OUT" "$ERR")"
    said_no_runner && break
done
poll_until 30 said_no_runner || fail "serve never said lab1 has no runner: $(cat "$RX_TMP/serve.err")"
[[ -z $(ls -A "$RX_TMP/elsewhere") ]] || fail "written through the planted link: $(ls -A "$RX_TMP/elsewhere")"
pass
