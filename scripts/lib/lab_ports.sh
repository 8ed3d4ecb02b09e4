# shellcheck shell=bash
# scripts/lib/lab_ports.sh — sourced by scripts/bench, scripts/soak, scripts/lib/bench_lab.sh and
# tests/e2e/lib.sh: a lab of their own on a free block of ports on 127.0.0.1, the one copy of the
# port search.

# rx_free_block N: print a base port P with nothing listening on P..P+N-1, chosen at random in
# 20000..32767 (below Linux's ephemeral ports) so parallel runs rarely pick the same one.
# Returns 1, saying so on stderr, when 100 tries found none.
rx_free_block() {
    local n=$1 base p busy tries listening
    listening=" $(ss -Htln 2>/dev/null | awk '{ n = split($4, a, ":"); printf "%s ", a[n] }') "
    for ((tries = 0; tries < 100; tries++)); do
        base=$(( 20000 + (RANDOM * 32768 + RANDOM) % (12768 - n) ))
        busy=0
        for ((p = base; p < base + n; p++)); do
            [[ $listening != *" $p "* ]] || { busy=1; break; }
        done
        [[ $busy == 1 ]] || { echo "$base"; return 0; }
    done
    echo "no free block of $n ports found" >&2
    return 1
}

# rx_lab_up_free LAB DIR HOSTS LOG [UP_OPTION...]: `LAB up` (the scripts/lab script) of HOSTS
# hosts in DIR, with the UP_OPTIONs (for example --vm-tmp D), on a free block, trying another block when a port was taken meanwhile (exit 4, a parallel run won
# the race), at most 10 times. Sets base (the block) and rx_lab_rc (lab's exit status); LOG
# holds lab's output (or why no block was found). Returns 0, or 1 when lab up failed otherwise,
# ten times, or no free block was found.
rx_lab_up_free() {
    local lab=$1 dir=$2 n=$3 log=$4 try
    shift 4
    for ((try = 1; ; try++)); do
        base=$(rx_free_block "$n" 2>"$log") || { rx_lab_rc=1; return 1; } # LOG says why
        rx_lab_rc=0
        "$lab" up --dir "$dir" --hosts "$n" --base-port "$base" "$@" >"$log" 2>&1 || rx_lab_rc=$?
        [[ $rx_lab_rc == 0 ]] && return 0
        [[ $rx_lab_rc == 4 && $try -lt 10 ]] || return 1
    done
}
