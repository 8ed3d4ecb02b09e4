# shellcheck shell=bash
# scripts/bench.d/lab_up.sh — sourced by scripts/bench and scripts/soak: a lab of their own on a
# free block of ports on 127.0.0.1.

# free_block N: a base port P with nothing listening on P..P+N-1, in 20000..32767.
free_block() {
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
    echo "no free block of $n ports" >&2
    return 1
}

# lab_up_free DIR HOSTS LOG: `scripts/lab up` of HOSTS hosts in DIR on a free block, trying
# another block when a port was taken meanwhile (exit 4), at most 10 times; sets base. On
# failure prints LOG (lab's output) and exits 1.
lab_up_free() {
    local dir=$1 n=$2 log=$3 try rc
    for ((try = 1; ; try++)); do
        base=$(free_block "$n")
        rc=0
        scripts/lab up --dir "$dir" --hosts "$n" --base-port "$base" >"$log" 2>&1 || rc=$?
        [[ $rc == 0 ]] && return 0
        if [[ $rc != 4 || $try -ge 10 ]]; then
            cat "$log" >&2
            exit 1
        fi
    done
}
