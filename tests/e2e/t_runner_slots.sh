#!/usr/bin/env bash
# A runner uses its second slot only when a call comes before its first slot is ready for it
# (docs/remote-contract.md, "The slots"), through serve and sshd:
#  - calls spaced apart (each sent once the runner's slots wait for a call, a condition read in
#    /proc) on one warm runner: every call runs in slot 0 and prints its own value, slot 1 never
#    starts (one slot process on the VM);
#  - slot 0's "ready" byte read off the runner's FIFO r0 (through /proc, as a command of the
#    same account could): the next call still runs, in slot 0 (slot 1 starts after it), and
#    the one after in slot 1, as slot 0 then seems busy to the runner; written back, slot 0
#    takes calls again;
#  - calls back to back from several clients at once (oneshot and not): every result is its
#    own call's, and once serve stops nothing of the runners is left on the VM.
# The calls print the number of the slot they run in (the argument after DIR in their parent's
# command line, `bash DIR/slot DIR K ...`), or their own value.
tid="runner: the second slot only when calls come faster than one slot takes them"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
ws_edit 'c["actions"]["t.slot"] = {"risk": "L0", "command": args[0]}' \
    'read -r _ _ _ pp _ </proc/self/stat; tr "\0" " " <"/proc/$pp/cmdline" | cut -d" " -f4'
ws_edit 'v = {"v": {"type": "string", "pattern": "^v[0-9]{1,12}$"}}
c["actions"]["t.v"] = {"risk": "L0", "command": "echo {v}", "params": v}
c["actions"]["t.vo"] = {"risk": "L0", "command": "basename {v}", "params": v}'
start_serve --log off

slots() { # "K PID" of each slot on the VM (not a fork of one)
    local s pp k
    for s in $(remote_pgrep "$RX_SLOT_RE"); do
        pp=$(awk '{ print $4 }' "/proc/$s/stat" 2>/dev/null) || continue
        [[ $(proc_cmdline "$pp") =~ $RX_SLOT_RE ]] && continue
        k=$(proc_cmdline "$s") && k=${k#bash /*/slot /* } && echo "${k%% *} $s"
    done
}
slots_wait() { # N: N slots, each blocked in its read of n<k> (fd 4): it wrote its byte on r<k>
    local k s n=0
    while read -r k s; do
        proc_blocked "$s" 4 || return 1
        n=$((n + 1))
    done < <(slots)
    [[ $n == "$1" ]]
}
runner_r0() { # the runner's r0 FIFO (its fd 24), through /proc
    local p
    for p in $(session_shells); do
        [[ $(readlink "/proc/$p/fd/24" 2>/dev/null) == */r0\ * ]] && { echo "/proc/$p/fd/24"; return 0; }
    done
    return 1
}
r0_take() { # reads off what slot 0 wrote on r0 (one byte: it waits)
    "$RX_PYTHON" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
sys.exit(0 if os.read(fd, 64) == b"." else 1)' "$1"
}
slot_of() { # the slot the next call runs in, checked: K
    local r
    r=$(calls t.slot)
    assert_eq 0 "$(field "$r" exit_code)" "$2: exit code ($r)"
    assert_eq "$1" "$(field "$r" stdout)" "$2: the call's slot"
}

# ---- calls spaced apart: slot 0 alone --------------------------------------------------------
# (the first call to a host takes a channel of its own; serve starts its runner after it)
r=$(calls t.slot)
assert_eq 0 "$(field "$r" exit_code)" "the first call ($r)"
for i in $(seq 12); do
    wait_until 30 slots_wait 1 || fail "call $i: the runner's slot does not wait: $(slots)"
    slot_of 0 "spaced call $i"
done
wait_until 30 slots_wait 1 || fail "after calls spaced apart: slots $(slots | cut -d' ' -f1 | paste -sd' ')"
assert_eq 0 "$(slots | cut -d' ' -f1)" "the slots after 12 calls spaced apart"

# ---- slot 0 busy to the runner: slot 1 starts, then takes calls -------------------------------
r0=$(runner_r0) || fail "no runner with its FIFO r0 on the VM: $(lab ps .)"
r0_take "$r0" || fail "slot 0 waits but no byte on r0"
slot_of 0 "a call that finds slot 0 busy and slot 1 not started"
wait_until 30 slots_wait 2 || fail "slot 1 did not start: $(slots)"
slot_of 1 "a call that finds slot 0 busy and slot 1 ready"
wait_until 30 slots_wait 2 || fail "the slots do not wait: $(slots)"
printf . >"$r0"
slot_of 0 "a call that finds slot 0 ready again"

# ---- several clients at once ---------------------------------------------------------------
"$RX_PYTHON" - "$SOCK" >"$OUT" 2>&1 <<'PY' || fail "calls from several clients: $(cat "$OUT")"
import json, socket, sys, threading
bad = []
def client(c):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)
    s.connect(sys.argv[1])
    f = s.makefile("rb")
    for i in range(40):
        v = "v%d%03d" % (c, i)
        req = {"op": "run", "id": i, "targets": "lab1", "action": "t.vo" if i % 2 else "t.v",
               "params": {"v": v}}
        s.sendall((json.dumps(req) + "\n").encode())
        res = None
        while True:
            o = json.loads(f.readline())
            if o.get("type") == "result" and o.get("id") == i:
                res = o
            if o.get("type") in ("done", "error") and o.get("id") == i:
                break
        if not res or res.get("exit_code") != 0 or res.get("stdout") != v + "\n":
            bad.append((v, res or o))
ts = [threading.Thread(target=client, args=(c,)) for c in range(1, 5)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("wrong: %r" % bad[:3] if bad else "160 calls right")
sys.exit(1 if bad else 0)
PY
echo "  several clients: $(cat "$OUT"); slots on the VM: $(slots | cut -d' ' -f1 | sort | uniq -c | paste -sd' ')" >&2
stop_serve
wait_until 20 bash -c '! "$1" --dir "$2" ps . >/dev/null' _ "$RX_LAB" "$LAB_DIR" ||
    fail "left on the VM after serve stopped: $(lab ps .)"
pass
