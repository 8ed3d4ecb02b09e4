#!/usr/bin/env bash
# A full or read-only disk under the audit and evidence directories (issue #12, "What to deliver"
# 2), on small tmpfs mounts made here (root only; skipped, saying so, elsewhere):
#  1. audit/ full: the intent cannot be written, so nothing runs: 74, the message names the
#     audit file and the system error, the command did not run.
#  2. audit/ read-only: the same, "Read-only file system"; a call that needs approval writes no
#     challenge file (its refusal record comes first and cannot be written).
#  3. audit/ goes read-only while the command runs (the command remounts it): the command ran,
#     the outcome cannot be written: 74 with executed true and the remote status kept; once the
#     disk is writable again, `audit verify` names the run that has no outcome (exit 2).
#  4. evidence/ full: the command runs (its evidence directory is made before, its files after),
#     the files cannot be written: 74 with executed true, the system error named; the outcome
#     record is written, no half-written evidence (.tmp-, or the run's directory) is left.
#  5. evidence/ read-only: the evidence directory cannot be made, so nothing runs: 74 naming it.
tid="faults: audit and evidence directories full or read-only"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
. "$REXEC_SRC/tests/faults/lib_faults.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root to mount a tmpfs"
lab_start 1
MOUNTS=()
umount_all() { local m; for m in ${MOUNTS[@]+"${MOUNTS[@]}"}; do umount "$m" 2>/dev/null || true; done; }
trap '_rc=$?; set +e; _f_stop_serves; umount_all; (exit "$_rc"); _rx_cleanup' EXIT
# mount_small DIR [copy]: an empty 256 KiB tmpfs on DIR (with DIR's files when "copy"; the
# original is kept aside and put back by unmount). A fresh audit/ holds no audit.log: its first
# record needs a page of its own, so a full tmpfs refuses it (an append to an existing file may
# still fit in its last page).
mount_small() {
    mkdir -p "$1"
    mv "$1" "$1.orig"
    mkdir -m 700 "$1"
    mount -t tmpfs -o size=256k,mode=0700 tmpfs "$1" 2>"$RX_TMP/mount.err" \
        || skip "cannot mount a tmpfs: $(head -n1 "$RX_TMP/mount.err")"
    MOUNTS+=("$1")
    [[ ${2:-} != copy ]] || cp -a "$1.orig/." "$1/"
}
# unmount DIR: the tmpfs goes, DIR's original files come back.
unmount() {
    umount "$1"
    rmdir "$1"; mv "$1.orig" "$1"
}
fill() { head -c 1M /dev/zero >"$1/filler" 2>/dev/null || true; }
M=$RX_TMP/m
ws_edit 'c["actions"]["t.mark"] = {"risk": "L0", "command": "touch " + args[0] + "{n}; echo marked",
    "params": {"n": {"type": "string", "pattern": "^[0-9]$"}}}' "$M"
assert_exit 0 rx run lab1 t.mark --param n=0     # audit/ and evidence/ exist

# ---- 1. audit/ full ---------------------------------------------------------------------------
mount_small "$WS/audit"
fill "$WS/audit"
assert_exit 74 rx run lab1 t.mark --param n=1
assert_contains "$ERR" "$WS/audit/audit.log"
assert_contains "$ERR" "No space left on device"
[[ ! -e ${M}1 ]] || fail "ran although the intent could not be written (disk full)"
rm -f "$WS/audit/filler"

# ---- 2. audit/ read-only ----------------------------------------------------------------------
mount -o remount,ro "$WS/audit"
assert_exit 74 rx run lab1 t.mark --param n=2
assert_contains "$ERR" "Read-only file system"
[[ ! -e ${M}2 ]] || fail "ran although the intent could not be written (read-only)"
# A call that needs approval writes its refusal record before its challenge file: with the
# audit log unwritable there is no challenge an operator could approve unaccounted for.
ws_edit 'c["actions"]["t.held"] = {"risk": "L2", "state_changing": True, "command": "echo held"}'
mkdir -p "$WS/approvals"
n_ap=$(find "$WS/approvals" -type f | wc -l)
assert_exit 74 rx run lab1 t.held
assert_contains "$ERR" "Read-only file system"
assert_eq "$n_ap" "$(find "$WS/approvals" -type f | wc -l)" "challenge files after a failed audit append"
mount -o remount,rw "$WS/audit"
assert_audit_whole

# ---- 3. audit/ goes read-only while the command runs (the command remounts it) -----------------
ws_edit 'c["actions"]["t.ro"] = {"risk": "L0",
    "command": "mount -o remount,ro " + args[0] + " && echo read-only"}' "$WS/audit"
assert_exit 74 rx run lab1 t.ro --json
echo "3. $(head -c 600 "$OUT")"
assert_contains "$OUT" '"executed":true'
assert_contains "$OUT" '"exit_code":0'
assert_contains "$OUT" '"exit_status":74'
assert_contains "$OUT" "Read-only file system"
assert_contains "$OUT" "read-only"
run=$(json run_id)
mount -o remount,rw "$WS/audit"
assert_exit 2 rx audit verify
grep -qF "$run" "$OUT" "$ERR" || fail "audit verify does not name $run"
unmount "$WS/audit"

# ---- 4. evidence/ full ------------------------------------------------------------------------
mount_small "$WS/evidence" copy
fill "$WS/evidence"
assert_exit 74 rx run lab1 t.mark --param n=4 --json
echo "4. $(head -c 600 "$OUT")"
assert_contains "$OUT" '"executed":true'
assert_contains "$OUT" "No space left on device"
run4=$(json run_id)
[[ -e ${M}4 ]] || fail "the command did not run"
[[ -z $(find "$WS/evidence" -name '.tmp-*') ]] || fail "half-written evidence left"
[[ ! -e $WS/evidence/$run4 ]] || fail "the failed commit left its directory (evidence/$run4)"
rm -f "$WS/evidence/filler"

# ---- 5. evidence/ read-only -------------------------------------------------------------------
mount -o remount,ro "$WS/evidence"
assert_exit 74 rx run lab1 t.mark --param n=5 --json
assert_contains "$OUT" '"executed":false'
assert_contains "$OUT" "$WS/evidence/.tmp-"
assert_contains "$OUT" "Read-only file system"
[[ ! -e ${M}5 ]] || fail "ran although evidence/ is read-only"
unmount "$WS/evidence"
# the outcomes of 4 and 5 are in the audit
grep -F "$run4" "$WS/audit/audit.log" | grep -qF '"phase":"outcome"' \
    || fail "no outcome record for run 4 (evidence full)"
assert_audit_whole
pass
