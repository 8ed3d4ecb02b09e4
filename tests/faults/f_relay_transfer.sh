#!/usr/bin/env bash
# A delaying, re-chunking relay during a 200 MB transfer (issue #12, "What to deliver" 2). The
# kernel has no netem, so a relay on 127.0.0.1 stands between rexec and lab1's sshd: every chunk
# it forwards is held for a random 0-4 ms and cut at random boundaries into pieces of 1 B to
# 64 KiB, in both directions (bytes keep their order: TCP itself never delivers them out of
# order, so an application relay that reordered bytes would only corrupt the stream). Through
# it:
#   - 200 MB of random output: the evidence file and stdout_sha256 are exact;
#   - 200 MB of random stdin (--stdin FILE): the VM's sha256 of what it read is exact;
#   - the relay cut mid-transfer: the call ends 255 (connection lost), executed, within the
#     connect/keepalive bound; nothing is left on the VM;
# and after each, the audit log verifies with an outcome for every intent.
tid="faults: a delaying, re-chunking relay during 200 MB transfers, and a cut mid-transfer"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
. "$REXEC_SRC/tests/faults/lib_faults.sh"

lab_start 1
MB=${REXEC_RELAY_MB:-200}
head -c $((MB << 20)) /dev/urandom >"$RX_TMP/big"
want=$(sha256sum <"$RX_TMP/big" | cut -d' ' -f1)

# The relay: prints its port, then forwards; "$RX_TMP/relay.cut" makes it drop every
# connection (both sockets closed at once), "$RX_TMP/relay.bytes" counts the bytes sent toward
# the client so far (all connections).
cat >"$RX_TMP/relay.py" <<'PY'
import asyncio, os, random, sys
target, cut, count = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rnd = random.Random(int(sys.argv[4]))
total = [0]
conns = []

async def pipe(r, w, to_client):
    while True:
        data = await r.read(262144)
        if not data or os.path.exists(cut):
            break
        while data:
            n = rnd.randint(1, 65536)
            piece, data = data[:n], data[n:]
            await asyncio.sleep(rnd.random() * 0.004)
            w.write(piece)
            await w.drain()
            if to_client:
                total[0] += len(piece)
    for _, sw, _, cw in conns:
        for x in (sw, cw):
            x.transport.abort()

async def conn(cr, cw):
    sr, sw = await asyncio.open_connection("127.0.0.1", target)
    conns.append((sr, sw, cr, cw))
    await asyncio.gather(pipe(cr, sw, False), pipe(sr, cw, True), return_exceptions=True)

async def report():
    while True:
        await asyncio.sleep(0.2)
        with open(count + ".tmp", "w") as f:
            f.write(str(total[0]))
        os.replace(count + ".tmp", count)

async def main():
    srv = await asyncio.start_server(conn, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    asyncio.get_running_loop().create_task(report())
    await srv.serve_forever()

asyncio.run(main())
PY
"$RX_PYTHON" "$RX_TMP/relay.py" "$(lab_port lab1)" "$RX_TMP/relay.cut" "$RX_TMP/relay.bytes" \
    "${RANDOM}" >"$RX_TMP/relay.port" &
RELAY=$!
trap '_t_rc=$?; kill $RELAY 2>/dev/null; _f_stop_serves; if (exit "$_t_rc"); then _rx_cleanup; else _rx_cleanup; fi' EXIT
wait_until 20 test -s "$RX_TMP/relay.port"
RP=$(cat "$RX_TMP/relay.port")
read -r _ key _ <"$LAB_DIR/hosts/lab1/ssh_host_ed25519_key.pub"
printf '[127.0.0.1]:%s ssh-ed25519 %s\n' "$RP" "$key" >>"$WS/known_hosts"
ws_edit '
c["hosts"]["relayed"] = dict(c["hosts"]["lab1"], port=int(args[0]))
c["limits"].update({"keepalive_s": 2, "max_stdin_bytes": 1 << 30})' "$RP"
ws_edit 'c["actions"]["t.big"] = {"risk": "L0", "command": "cat " + args[0], "max_output_bytes": 1 << 30, "timeout_s": 300}' "$RX_TMP/big"
ws_add_action t.sum '{"risk": "L0", "command": "sha256sum", "timeout_s": 300}'
ws_add_action t.slow '{"risk": "L0", "command": "while :; do head -c 65536 /dev/zero; sleep 0.01; done", "max_output_bytes": 1073741824, "timeout_s": 300}'

# --- 200 MB out: the evidence and the sha256 are exact
assert_exit 0 timeout 600 "$REXEC_BIN" --workspace "$WS" run relayed t.big --json
assert_eq "$want" "$(json stdout_sha256)" "stdout_sha256 through the relay"
assert_eq $((MB << 20)) "$(json stdout_bytes)" "stdout_bytes through the relay"
ev=$(json evidence)
assert_eq "$want" "$(sha256sum <"$ev/stdout" | cut -d' ' -f1)" "evidence stdout through the relay"
rm -rf "$ev" # 200 MB is enough on disk
assert_audit_whole

# --- 200 MB in: what the VM read is exact
assert_exit 0 timeout 600 "$REXEC_BIN" --workspace "$WS" run relayed t.sum --stdin "$RX_TMP/big"
assert_contains "$OUT" "$want"
assert_audit_whole

# --- the relay cuts every connection mid-transfer: 255, executed, bounded; the VM is clean
before=$(cat "$RX_TMP/relay.bytes")
timeout 120 "$REXEC_BIN" --workspace "$WS" run relayed t.slow --json >"$OUT" 2>"$ERR" &
CALL=$!
wait_until 60 bash -c '[[ $(cat "$1") -gt $2 ]]' _ "$RX_TMP/relay.bytes" $((before + 4194304))
t0=${EPOCHREALTIME/[.,]/}
touch "$RX_TMP/relay.cut"
RC=0; wait "$CALL" || RC=$?
t1=${EPOCHREALTIME/[.,]/}
assert_eq 255 "$RC" "exit status of a call whose connection was cut"
assert_eq true "$(json executed)" "the cut call is reported executed"
ms=$(( (t1 - t0) / 1000 ))
(( ms < 10000 )) || fail "the cut was noticed after $ms ms (keepalive 2 s: expected well under 10 s)"
assert_vm_clean 'head -c 65536|sleep 0.01'
assert_audit_whole
echo "cut noticed after $ms ms" >&2
pass
