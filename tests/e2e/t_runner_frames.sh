#!/usr/bin/env bash
# The runner's frames and its directory, without rexec or sshd: `bash -s` is fed what rexec
# sends (tests/e2e/runner_frames.py: the start of rx_render_runner_start, frames as runner.c
# queues them, code as rx_render_runner_code renders it), with a TMPDIR of the test's own.
#  - a `C` frame immediately followed by `K`, then calls: each later call prints only its own
#    value, and the stopped call's code never runs later (also with a 100 KiB code);
#  - calls of 3,800 to 70,000 bytes (around a FIFO's page and its 64 KiB), run and stopped at
#    once: every call in step (this also caught a bash read -N buffer leaking between FIFOs);
#  - the ends the runner writes itself (contain, cancel) on the right streams;
#  - a header that is not 96 bytes, "C " and a newline last (an unpadded line, no newline, five
#    fields) or a frame neither C nor K: nothing of it runs, the runner exits, its slots go;
#  - bytes a command writes into its runner's FIFOs (c0/c1, n0/n1, g0/g1, r0/r1, junk): the planted
#    code never runs; later calls print their own value or end as desync (never run), and a
#    desync discards the runner (also with oneshot frames, run in forks of the slots: "-o");
#  - 150 calls mixing kills at once, kills after the start and ordinary calls;
#  - a runner whose every timed read is held up past its deadline (strace delays each pselect6:
#    a slot not scheduled for a second on a loaded machine): its calls, run in fresh shells and
#    in forks of the slots, end as run and stay in step (a read -N cut short by its deadline
#    once reported a call that ran as never run and left bytes for the fork's go-ahead);
#  - oneshot frames (fifth header field "o"): after one, a slot keeps no shell waiting and runs
#    the next in a fork of itself, where a command sees what it sees in a fresh call shell (its
#    environment, descriptors, /proc status, cwd, umask, limits, bash's messages when it is not
#    found or not a binary), never the nonce; killed at once, killed while it runs, and the
#    kill and mixed runs above with oneshot frames;
#    each under a PID namespace and under process-group containment;
#  - the runners' directory ${TMPDIR}/.rexec-<uid>: a symlink or a directory open to others
#    there makes the runner refuse at once (":none base"); what is planted in it or in TMPDIR
#    (a symlink to a directory of FIFOs, a FIFO named owner, old-style .rexec-runner.*) neither
#    holds a runner's start nor gets a byte written; a dead runner's directory is removed and
#    its processes killed, also those of a directory that is gone;
#  - a slot whose runner went before the slot opened its FIFOs goes at once (no open blocks);
#  - the slots a runner uses: calls spaced apart (each once the slots wait) all run in slot 0
#    and slot 1 never starts; with the slots' "ready" bytes on r<k> read off or written back
#    (busy or ready to the runner), each case of its choice: slot 0 when ready, slot 0 when not
#    and slot 1 not started (slot 1 starts), slot 1 when only it is ready, the other slot when
#    neither is; a kill reaches a call in slot 1; forged bytes run nothing (also planted by a
#    command: plant-r); slot 0 killed from outside starts again with the next call handed to it.
tid="runner frames: kill before read, planted bytes, the runners' directory"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

DRV=$REXEC_SRC/tests/e2e/runner_frames.py
T=$RX_TMP/t
mkdir -m 700 "$T"

# ---- frames ----------------------------------------------------------------------------------
for rank in 3 1; do
    for sc in kill fork fork-kill sizes marks plant-c plant-n plant-g plant-junk plant-all mixed \
        plant-c-o plant-n-o plant-g-o plant-junk-o plant-all-o stall \
        badhead-line badhead-nonl badhead-fields badhead-other; do
        timeout 300 "$RX_PYTHON" "$DRV" "$REXEC_SRC" "$T" "$sc" "$rank" >"$OUT" 2>"$ERR" ||
            fail "$sc (max rank $rank): $(cat "$OUT" "$ERR")"
        echo "  $(cat "$OUT")" >&2
    done
done

# ---- which slot takes a call -----------------------------------------------------------------
for rank in 3 1; do
    for sc in plant-r plant-r-o one-slot choose; do
        timeout 300 "$RX_PYTHON" "$DRV" "$REXEC_SRC" "$T" "$sc" "$rank" >"$OUT" 2>"$ERR" ||
            fail "$sc (max rank $rank): $(cat "$OUT" "$ERR")"
        echo "  $(cat "$OUT")" >&2
    done
done

# ---- the runners' directory --------------------------------------------------------------------
# hello TMPDIR: the runner's answer when it is started there and given EOF at once (it then
# stops and goes); empty if it does not answer within 20 s.
hello() {
    { printf '__rx_rnonce=0123 __rx_max_rank=3\n'
      cat "$REXEC_SRC/remote/wrapper.sh" "$REXEC_SRC/remote/runner.sh"
      printf '__rx_runner; exit\n'; } | TMPDIR=$1 timeout 20 bash -s 2>/dev/null | head -n1 || true
}
# no_data FIFO: nothing was written into FIFO (its read-write open never blocks)
no_data() { ! read -r -t 0 <>"$1"; }
uid=$(id -u)

s=$RX_TMP/s1 && mkdir "$s" "$RX_TMP/elsewhere" && ln -s "$RX_TMP/elsewhere" "$s/.rexec-$uid"
assert_eq $'\036rexec-runner:0123:none base' "$(hello "$s")" "a symlink for the runners' directory"
[[ -z $(ls -A "$RX_TMP/elsewhere") ]] || fail "the runner wrote through the symlink: $(ls -A "$RX_TMP/elsewhere")"
s=$RX_TMP/s2 && mkdir "$s" && mkdir -m 755 "$s/.rexec-$uid"
assert_eq $'\036rexec-runner:0123:none base' "$(hello "$s")" "a runners' directory open to others"

# planted: in TMPDIR, old-style entries; in the runners' directory, a symlink to a directory
# of FIFOs whose owner is dead, and a runner directory whose owner is a FIFO
s=$RX_TMP/s3 && b=$s/.rexec-$uid && v=$RX_TMP/victim
mkdir "$s" "$v" && mkdir -m 700 "$b" "$b/r.fifoowner" "$s/.rexec-runner.y"
mkfifo "$v/c0" "$v/g0" "$v/n0" "$b/r.fifoowner/owner" "$s/.rexec-runner.y/owner"
true & dead=$!; wait "$dead"
echo "$dead 1" >"$v/owner"
ln -s "$v" "$b/r.link"
ln -s "$v" "$s/.rexec-runner.x"
h=$(hello "$s")
[[ $h == $'\036rexec-runner:0123:ready '* ]] || fail "the runner did not start beside planted entries: '$h'"
for f in c0 g0 n0; do no_data "$v/$f" || fail "the runner wrote into $v/$f"; done
[[ -L $b/r.link && -f $v/owner && -p $b/r.fifoowner/owner ]] || fail "the sweep removed what it must not"
no_data "$b/r.fifoowner/owner" && no_data "$s/.rexec-runner.y/owner" || fail "the runner wrote into a FIFO named owner"

# a dead runner's directory, a process of it, and a process of a runner whose directory is gone
mkdir -m 700 "$b/r.dead" && echo "$dead 1" >"$b/r.dead/owner" && mkfifo "$b/r.dead/g0"
bash -c 'read -r _ <>"$1/g0"; :' rexec-orphan "$b/r.dead" </dev/null >/dev/null 2>&1 &
o1=$!
bash -c 'read -r _ <>"$2"; :' rexec-orphan "$b/r.gone" "$v/n0" </dev/null >/dev/null 2>&1 &
o2=$!
mkdir -m 700 "$b/r.live" && echo "$$ $(_rx_starttime $$)" >"$b/r.live/owner"
bash -c 'read -r _ <>"$2"; :' rexec-live "$b/r.live" "$v/c0" </dev/null >/dev/null 2>&1 &
o3=$!
# (each is there before the runner starts: blocked in its read, not gone for another reason)
wait_until 10 bash -c '[[ $(readlink /proc/$1/fd/0) == */n0 && $(readlink /proc/$2/fd/0) == */c0 ]]' _ "$o2" "$o3"
h=$(hello "$s")
[[ $h == $'\036rexec-runner:0123:ready '* ]] || fail "the runner did not start: '$h'"
gone() { ! kill -0 "$1" 2>/dev/null; }
wait_until 10 gone "$o1" || fail "the dead runner's process was not swept"
wait_until 10 gone "$o2" || fail "the process of a runner whose directory is gone was not swept"
[[ ! -e $b/r.dead ]] || fail "the dead runner's directory is still there"
kill -0 "$o3" 2>/dev/null || fail "the sweep killed a process of a live runner"
[[ -d $b/r.live ]] || fail "the sweep removed a live runner's directory"
kill "$o3"
wait "$o1" "$o2" "$o3" 2>/dev/null || true

# ---- a slot whose runner is gone before the slot opened its FIFOs ------------------------------
# (the runner killed, or gone at EOF, while it started a slot): the slot's opens must not wait
# for a writer that will never come; it finds EOF and goes at once, with its waiting shell.
s=$RX_TMP/s5 && mkdir -m 700 "$s" && mkfifo "$RX_TMP/rin"
{ printf '__rx_rnonce=0123 __rx_max_rank=1\n'
  cat "$REXEC_SRC/remote/wrapper.sh" "$REXEC_SRC/remote/runner.sh"
  printf '__rx_runner; exit\n'
  cat "$RX_TMP/rin"; } | TMPDIR=$s bash -s >"$RX_TMP/rout" 2>/dev/null &
exec {rin}>"$RX_TMP/rin"
wait_until 20 grep -q ready "$RX_TMP/rout"
d=$RX_TMP/gone && mkdir -m 700 "$d" && cp "$s"/.rexec-*/r.*/slot "$d/slot"
exec {rin}>&- # EOF: that runner goes
mkfifo "$d/c0" "$d/n0" "$d/s0" "$d/g0" "$d/r0"
rc=0
timeout 10 bash "$d/slot" "$d" 0 process-group </dev/null >/dev/null 2>&1 || rc=$?
[[ $rc != 124 ]] || fail "a slot whose runner is gone waited in an open of its FIFO"
pgrep -f "rexec $d\$" >/dev/null && fail "the waiting shell of a slot whose runner is gone is still there"
pass
