#!/usr/bin/env bash
# A command's environment holds what the VM's sessions give it, whatever rexec's own shell
# code names its variables (docs/remote-contract.md, "Names reserved for rexec"). In bash a
# variable assigned in a function (local or not) whose name the environment exports is
# exported with the value bash gave it, so a command started while it is live would see
# rexec's value instead: a slot's `c`, a call's `nonce`, or its `code` (the secrets' exports).
# lab1's sshd gives its sessions exported variables named like every short name the remote
# scripts used before they took the reserved __rx_ prefix, with sentinel values; through serve:
#  - with runners, in a PID namespace and under process-group containment: a oneshot command
#    (`env`, which may run in a fork of its slot) and a non-oneshot one (`env; :`, a fresh call
#    shell) see every sentinel unchanged, and no __rx_ variable;
#  - the same with "runner": false (a channel per call: remote/wrapper.sh).
tid="runner: rexec's shell variables never reach a command's environment"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
mkdir -m 700 "$RX_TMP/vmtmp"
lab_set_tmpdir lab1 "$RX_TMP/vmtmp"
ws_edit 'c.setdefault("limits", {})["connect_timeout_s"] = 60'

NAMES=(c d k e cont line nonce st rc killed incall phase started bad desync kind fk wk min inlen
    clen code in s i how hdr v n first r t t0 t1 to h own o p w a u l m)
SENT=()
for n in "${NAMES[@]}"; do SENT+=("$n=rxenv-$n"); done
lab_set_env lab1 "${SENT[@]}"

SLOT_RE='^bash /[^ ]*/\.rexec-[0-9]+/r\.[^ /]*/slot '

ws_add_action t.env '{"risk": "L0", "command": "env"}'
ws_add_action t.env.fresh '{"risk": "L0", "command": "env; :"}'
ws_add_action t.uname '{"risk": "L0", "command": "uname -a"}'

# check WHAT RESULT: the call exited 0 and its environment holds every sentinel, no __rx_*
check() {
    local out n
    assert_eq 0 "$(field "$2" exit_code)" "$1: exit code"
    out=$(field "$2" stdout)
    for n in "${NAMES[@]}"; do
        grep -qxF -- "$n=rxenv-$n" <<<"$out" ||
            fail "$1: the command's $n is not the environment's: $(grep -E "^$n=" <<<"$out" | head -c 200)"
    done
    ! grep -q '^__rx_' <<<"$out" || fail "$1: rexec's variables in the command's environment"
}

for mode in runner channel; do
    [[ $mode == runner ]] || ws_edit 'c["hosts"]["lab1"]["runner"] = False'
    for cont in pid-namespace process-group; do
        if [[ $cont == pid-namespace ]]; then
            ws_edit 'c["hosts"]["lab1"].pop("containment", None)'
        else
            ws_edit 'c["hosts"]["lab1"]["containment"] = "process-group"'
        fi
        start_serve
        # (the first call to a host takes a channel of its own; then one runner, two slots)
        calls t.uname:6 >"$OUT" || fail "$mode/$cont: warm-up: $(cat "$OUT")"
        # the calls below run in the runner's slots (none with "runner": false)
        if [[ $mode == runner ]]; then
            has_remote "$SLOT_RE" || fail "$mode/$cont: no runner on lab1"
        else
            no_remote "$SLOT_RE" || fail "$mode/$cont: a runner on lab1"
        fi
        mapfile -t res < <(calls t.env t.env t.env t.env.fresh t.env.fresh)
        [[ ${#res[@]} == 5 ]] || fail "$mode/$cont: ${#res[@]} results"
        for i in 0 1 2 3 4; do
            assert_eq "$cont" "$(field "${res[$i]}" containment)" "$mode/$cont: containment"
            check "$mode/$cont: call $i" "${res[$i]}"
        done
        stop_serve
    done
done
pass
