#!/usr/bin/env bash
# put and get through `rexec serve` (docs/python-client.md "Files: put and get", docs/cli.md):
# the client reads and writes the local file itself (serve never opens a path a client names):
# `rexec --socket S put` streams the file as the call's stdin with its size (serve's call hashes it
# as it sends it; the result's put_sha256 names the hash), `rexec
# --socket S get` writes the output lines into a temporary file renamed once whole; the Python
# client's Client.put/get and AsyncClient.get do the same.
tid="put and get through serve and the Python client"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
vm=$RX_TMP/vm
loc=$RX_TMP/local
mkdir -p "$vm" "$loc"
export RX_TEST_TOKEN=tok-91c0e5b7d2a64f3a-secret
ws_edit 'c["hosts"]["lab1"]["allow"] = "L2"
c.setdefault("secrets", {})["TOKEN"] = {"env": "RX_TEST_TOKEN"}'
ws_add_action t.put "{\"risk\": \"L1\", \"put\": {\"path\": \"$vm/{name}\", \"mode\": \"0600\"},
  \"params\": {\"name\": {\"type\": \"path\"}}}"
ws_add_action t.get "{\"risk\": \"L1\", \"get\": {\"path\": \"$vm/{name}\"}, \"max_output_bytes\": 4194304,
  \"params\": {\"name\": {\"type\": \"path\"}}}"
ws_add_action t.get.small "{\"risk\": \"L1\", \"get\": {\"path\": \"$vm/{name}\"}, \"max_output_bytes\": 100,
  \"params\": {\"name\": {\"type\": \"path\"}}}"

SOCK=$RX_TMP/s.sock
start_serve
sha() { sha256sum <"$1" | cut -d' ' -f1; }

# ---- the CLI through serve ----------------------------------------------------------------------
head -c 300000 /dev/urandom >"$loc/a"
assert_exit 0 rx --socket "$SOCK" put lab1 t.put "$loc/a" --param name=a
cmp "$loc/a" "$vm/a" || fail "put through serve differs"
# (the CLI reads the file once, to send it: the hash it names is the one serve's call took)
assert_contains "$ERR" "put $loc/a: 300000 bytes, sha256 $(sha256sum <"$loc/a" | cut -d' ' -f1)"
assert_eq 600 "$(stat -c %a "$vm/a")" "mode of the file put through serve"
assert_exit 0 rx --socket "$SOCK" get lab1 t.get "$loc/a.back" --param name=a
cmp "$loc/a" "$loc/a.back" || fail "get through serve differs"
assert_contains "$ERR" "sha256 $(sha "$loc/a")"
printf 'token %s end\n' "$RX_TEST_TOKEN" >"$vm/s.txt"
assert_exit 0 rx --socket "$SOCK" get lab1 t.get "$loc/s.txt" --param name=s.txt
assert_contains "$loc/s.txt" "[REDACTED:TOKEN]"
assert_not_contains "$loc/s.txt" "$RX_TEST_TOKEN"
printf 'keep\n' >"$loc/keep"
assert_exit 73 rx --socket "$SOCK" get lab1 t.get.small "$loc/keep" --param name=a
assert_eq keep "$(cat "$loc/keep")" "LOCAL_FILE after a get past the cap through serve"
! compgen -G "$loc/.rexec-*" >/dev/null || fail "a temporary file was left in $loc"

# ---- the Python client --------------------------------------------------------------------------
head -c 200000 /dev/urandom >"$loc/p"
cat >"$RX_TMP/t.py" <<'PY'
import asyncio, filecmp, hashlib, os, sys
sys.path.insert(0, os.path.join(os.environ["REXEC_SRC"], "python"))
from rexec_client import AsyncClient, Client, RexecError

sock, vm, loc = sys.argv[1:4]
c = Client(sock, timeout=120)
r = c.put("lab1", "t.put", loc + "/p", {"name": "p"})
assert r["exit_status"] == 0, r
assert filecmp.cmp(loc + "/p", vm + "/p", shallow=False)
# read once, to send it: serve's call took the hash as it sent the bytes
assert r["results"][0]["put_sha256"] == hashlib.sha256(open(loc + "/p", "rb").read()).hexdigest(), r
os.mkfifo(loc + "/fifo")
try:
    c.put("lab1", "t.put", loc + "/fifo", {"name": "f"})  # never opened for reading: no writer
    raise SystemExit("a put of a FIFO was not refused")
except RexecError as e:
    assert e.exit_status == 65 and "not a regular file" in str(e), e
os.unlink(loc + "/fifo")
g = c.get("lab1", "t.get", loc + "/p.back", {"name": "p"})
data = open(loc + "/p.back", "rb").read()
assert data == open(loc + "/p", "rb").read()
assert g["stdout_sha256"] == hashlib.sha256(data).hexdigest(), g
open(loc + "/keep2", "w").write("keep\n")
try:
    c.get("lab1", "t.get.small", loc + "/keep2", {"name": "p"})
    raise SystemExit("a get past the cap did not raise")
except RexecError as e:
    assert e.exit_status == 73, e.exit_status
assert open(loc + "/keep2").read() == "keep\n"
g = c.get("lab1", "t.get", loc + "/keep2", {"name": "nosuch"})
assert g["exit_status"] == 2 and open(loc + "/keep2").read() == "keep\n", g
# a put whose file changed after it was hashed: the VM refuses it, the old file stays
r = c.run("lab1", "t.put", {"name": "p", "content_sha256": "0" * 64, "content_size": "200000"},
          stdin=open(loc + "/p", "rb"))
assert r["exit_status"] == 4, r
assert filecmp.cmp(loc + "/p", vm + "/p", shallow=False)
# without content_sha256 serve sends the SHA-256 trailer after the bytes (an inline stdin, a
# streamed one); a size short of the bytes puts file bytes where the trailer goes: refused
small = os.urandom(1000)
r = c.run("lab1", "t.put", {"name": "s", "content_size": "1000"}, stdin=small)
assert r["exit_status"] == 0, r
assert open(vm + "/s", "rb").read() == small
r = c.run("lab1", "t.put", {"name": "s2", "content_size": "200000"}, stdin=open(loc + "/p", "rb"))
assert r["exit_status"] == 0, r
assert filecmp.cmp(loc + "/p", vm + "/s2", shallow=False)
r = c.run("lab1", "t.put", {"name": "s", "content_size": "999"}, stdin=small)
assert r["exit_status"] == 4, r
assert open(vm + "/s", "rb").read() == small

async def main():
    async with AsyncClient(sock) as ac:
        g = await ac.get("lab1", "t.get", loc + "/p.async", {"name": "p"})
        assert g["exit_status"] == 0, g
        r = await ac.put("lab1", "t.put", loc + "/p.async", {"name": "p2"})
        assert r["exit_status"] == 0, r
asyncio.run(main())
assert filecmp.cmp(loc + "/p", vm + "/p2", shallow=False)
assert not [f for f in os.listdir(loc) if f.startswith(".rexec-")]
print("python ok")
PY
assert_exit 0 env REXEC_SRC="$REXEC_SRC" timeout 120 "$RX_PYTHON" "$RX_TMP/t.py" "$SOCK" "$vm" "$loc"
assert_contains "$OUT" "python ok"
pass
