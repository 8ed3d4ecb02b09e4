#!/usr/bin/env bash
# Files in and out (docs/workspace.md "put and get", docs/cli.md): `rexec put` writes a file on
# the VM whole or not at all (temporary file, size and SHA-256 checked against the controller's,
# synced, renamed; mode set; a symlink or directory at the destination refused; the old file kept
# on any failure); `rexec get` fetches one into LOCAL_FILE whole or not at all (redacted unless the
# action is binary, bounded by max_output_bytes); `rexec run --output FILE` streams stdout into
# FILE past the result cap. Every transfer is in the audit log (direction, path, bytes, sha256).
# shellcheck disable=SC2016 # a template with $(...) the loader must refuse, in single quotes
tid="put and get: files in and out, whole or not at all"
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"

lab_start 1
vm=$RX_TMP/vm          # the "VM"'s directory (the lab's sshd runs on this machine)
loc=$RX_TMP/local      # the controller's side
mkdir -p "$vm/app" "$loc"
export RX_TEST_TOKEN=tok-3f9a1c0e5b7d2a64-secret
ws_edit 'c["hosts"]["lab1"]["allow"] = "L2"
c["limits"]["max_stdin_bytes"] = 64 * 1024 * 1024
c["limits"]["max_result_bytes"] = 65536
c.setdefault("secrets", {})["TOKEN"] = {"env": "RX_TEST_TOKEN"}'
ws_add_action t.put "{\"risk\": \"L1\", \"put\": {\"path\": \"$vm/app/{name}.bin\", \"mode\": \"0640\"},
  \"params\": {\"name\": {\"type\": \"path\"}}}"
ws_add_action t.put.str "{\"risk\": \"L1\", \"put\": {\"path\": \"$vm/app/{name}\"},
  \"params\": {\"name\": {\"type\": \"string\"}}}"
ws_add_action t.put.tiny "{\"risk\": \"L1\", \"put\": {\"path\": \"$vm/app/tiny\", \"max_bytes\": 10}}"
ws_add_action t.put.proc '{"risk": "L1", "put": {"path": "/proc/{name}"}, "params": {"name": {"type": "path"}}}'
ws_add_action t.get "{\"risk\": \"L1\", \"get\": {\"path\": \"$vm/{name}\"}, \"max_output_bytes\": 8388608,
  \"params\": {\"name\": {\"type\": \"path\"}}}"
ws_add_action t.get.bin "{\"risk\": \"L1\", \"get\": {\"path\": \"$vm/{name}\"}, \"binary\": true,
  \"max_output_bytes\": 8388608, \"params\": {\"name\": {\"type\": \"path\"}}}"
ws_add_action t.get.small "{\"risk\": \"L1\", \"get\": {\"path\": \"$vm/{name}\"}, \"max_output_bytes\": 1000,
  \"params\": {\"name\": {\"type\": \"path\"}}}"
ws_add_action t.cat '{"risk": "L0", "command": "cat", "max_output_bytes": 8388608}'

sha() { sha256sum <"$1" | cut -d' ' -f1; }
no_temp_left() { ! compgen -G "$1/.rexec-*" >/dev/null; }
last_outcome() {  # last_outcome PYEXPR: PYEXPR over the newest outcome record `r`
    "$RX_PYTHON" - "$WS/audit/audit.log" "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in recs if x.get("phase") == "outcome"][-1]
v = eval(sys.argv[2], {"r": r})
print(v if isinstance(v, str) else json.dumps(v))
PY
}

# ---- put ----------------------------------------------------------------------------------------
head -c 3000000 /dev/urandom >"$loc/a.bin"
assert_exit 0 rx put lab1 t.put "$loc/a.bin" --param name=a
cmp "$loc/a.bin" "$vm/app/a.bin" || fail "the file put differs from the local one"
assert_eq 640 "$(stat -c %a "$vm/app/a.bin")" "mode of the file put"
assert_contains "$ERR" "sha256 $(sha "$loc/a.bin")"
no_temp_left "$vm/app" || fail "a temporary file was left in $vm/app"
assert_eq put "$(last_outcome 'r["transfer"]["direction"]')" "audit: direction"
assert_eq "$vm/app/a.bin" "$(last_outcome 'r["transfer"]["path"]')" "audit: path"
assert_eq 3000000 "$(last_outcome 'r["transfer"]["bytes"]')" "audit: bytes"
assert_eq "$(sha "$loc/a.bin")" "$(last_outcome 'r["transfer"]["sha256"]')" "audit: sha256"
# replaced whole by a second put
printf 'second version\n' >"$loc/b.bin"
assert_exit 0 rx put lab1 t.put "$loc/b.bin" --param name=a --json
cmp "$loc/b.bin" "$vm/app/a.bin" || fail "the second put did not replace the file"

# A failure leaves the old file as it was and nothing half-written: bytes that are not the
# controller's (as a file changed under rexec would be), by SHA-256 and by size.
cp "$vm/app/a.bin" "$loc/old"
printf 'x%.0s' {1..100} >"$loc/c.bin"
assert_exit 4 rx run lab1 t.put --stdin "$loc/c.bin" --param name=a \
    --param content_sha256="$(printf '0%.0s' {1..64})" --param content_size=100
assert_contains "$ERR" "not the controller's"
cmp "$loc/old" "$vm/app/a.bin" || fail "a put with a wrong sha256 changed the file"
assert_exit 4 rx run lab1 t.put --stdin "$loc/c.bin" --param name=a \
    --param content_sha256="$(sha "$loc/c.bin")" --param content_size=99
assert_contains "$ERR" "more bytes than content_size arrived"
cmp "$loc/old" "$vm/app/a.bin" || fail "a put with a wrong size changed the file"
no_temp_left "$vm/app" || fail "a failed put left a temporary file"

# What is at the destination: a symlink is refused (neither it nor its target changes), and so
# is a directory.
printf 'target\n' >"$vm/target"
ln -s "$vm/target" "$vm/app/link.bin"
assert_exit 2 rx put lab1 t.put "$loc/c.bin" --param name=link
assert_contains "$ERR" "is a symbolic link"
assert_eq "$vm/target" "$(readlink "$vm/app/link.bin")" "the symlink at the destination"
assert_eq target "$(cat "$vm/target")" "the symlink's target"
mkdir "$vm/app/dir.bin"
assert_exit 2 rx put lab1 t.put "$loc/c.bin" --param name=dir
assert_contains "$ERR" "is a directory"
assert_exit 2 rx put lab1 t.put "$loc/c.bin" --param name=nodir/x
assert_contains "$ERR" "does not exist"
assert_exit 3 rx put lab1 t.put.proc "$loc/c.bin" --param name=x
assert_contains "$ERR" "cannot create a file in /proc"
no_temp_left "$vm/app" || fail "a refused put left a temporary file"

# Path values: '..', a newline (path type: 65 before anything runs); a string parameter that
# makes a '..' component is refused by the path check of the whole path.
assert_exit 65 rx put lab1 t.put "$loc/c.bin" --param name=../x
assert_exit 65 rx put lab1 t.put "$loc/c.bin" --param "name=a
b"
printf '{"params": {"name": "a\\u0000b"}}' >"$RX_TMP/nul.json"
assert_exit 65 rx put lab1 t.put "$loc/c.bin" --request "$RX_TMP/nul.json"
assert_contains "$ERR" "u0000"
assert_exit 65 rx put lab1 t.put.str "$loc/c.bin" --param name=../../x
assert_contains "$ERR" "'..' component"
assert_exit 65 rx put lab1 t.put "$RX_TMP/no-such-file" --param name=a
assert_exit 65 rx put lab1 t.put.tiny "$loc/c.bin"
assert_contains "$ERR" "actions.t.put.tiny.put.max_bytes is 10"
[[ ! -e $vm/app/tiny ]] || fail "a put past max_bytes wrote the file"
assert_exit 64 rx put lab1 t.put "$loc/c.bin" --param name=a --stdin "$loc/c.bin"
cmp "$loc/old" "$vm/app/a.bin" || fail "a refused put changed the file"

# ---- get ----------------------------------------------------------------------------------------
printf 'line one\nthe token is %s here\nlast\n' "$RX_TEST_TOKEN" >"$vm/secret.txt"
assert_exit 0 rx get lab1 t.get "$loc/got.txt" --param name=secret.txt
assert_not_contains "$loc/got.txt" "$RX_TEST_TOKEN"
assert_contains "$loc/got.txt" "[REDACTED:TOKEN]"
assert_contains "$loc/got.txt" "last"
assert_contains "$ERR" "sha256 $(sha "$loc/got.txt")"
assert_eq get "$(last_outcome 'r["transfer"]["direction"]')" "audit: direction"
assert_eq "$(sha "$loc/got.txt")" "$(last_outcome 'r["transfer"]["sha256"]')" "audit: sha256 of the get"
assert_eq "$(wc -c <"$loc/got.txt")" "$(last_outcome 'r["transfer"]["bytes"]')" "audit: bytes of the get"
no_temp_left "$loc" || fail "get left a temporary file next to LOCAL_FILE"
# evidence keeps the hash, not the bytes (no keep_bytes)
ev=$(last_outcome 'r["evidence"]')
[[ ! -s $ev/stdout ]] || fail "evidence kept the bytes of a get without keep_bytes"
assert_contains "$ev/meta.json" "$(sha "$loc/got.txt")"

# keep_bytes: evidence keeps the bytes too
ws_add_action t.get.keep "{\"risk\": \"L1\", \"get\": {\"path\": \"$vm/{name}\"}, \"keep_bytes\": true,
  \"params\": {\"name\": {\"type\": \"path\"}}}"
assert_exit 0 rx get lab1 t.get.keep "$loc/kept.txt" --param name=secret.txt
cmp "$loc/kept.txt" "$(last_outcome 'r["evidence"]')/stdout" || fail "keep_bytes: evidence lacks the bytes"

# binary: every byte as it is (NUL, invalid UTF-8), no redaction
head -c 2000000 /dev/urandom >"$vm/blob"
assert_exit 0 rx get lab1 t.get.bin "$loc/blob" --param name=blob
cmp "$vm/blob" "$loc/blob" || fail "the binary get differs"

# LOCAL_FILE is replaced only by a whole download: larger than max_output_bytes (73), a
# missing remote file (2), LOCAL_FILE unwritable (73, before anything runs).
printf 'keep me\n' >"$loc/keep"
assert_exit 73 rx get lab1 t.get.small "$loc/keep" --param name=blob
assert_contains "$ERR" "max_output_bytes"
assert_eq "keep me" "$(cat "$loc/keep")" "LOCAL_FILE after a get past the cap"
# a local write that fails while the file arrives (a file-size limit: EFBIG, as a full disk)
# stops the call: 73, LOCAL_FILE as it was, no temporary file
assert_exit 73 bash -c 'ulimit -f 1024 && exec "$@"' _ "$REXEC_BIN" --workspace "$WS" get lab1 t.get.bin "$loc/keep" --param name=blob
assert_contains "$ERR" "File too large"
assert_eq "keep me" "$(cat "$loc/keep")" "LOCAL_FILE after a local write failed"
assert_exit 2 rx get lab1 t.get "$loc/keep" --param name=nosuch
assert_contains "$ERR" "no such file"
assert_eq "keep me" "$(cat "$loc/keep")" "LOCAL_FILE after a get of a missing file"
assert_exit 2 rx get lab1 t.get "$loc/keep" --param name=app
assert_contains "$ERR" "is a directory"
n_before=$(wc -l <"$WS/audit/audit.log")
assert_exit 73 rx get lab1 t.get "$RX_TMP/nodir/f" --param name=secret.txt
assert_exit 73 rx get lab1 t.get "$loc" --param name=secret.txt
assert_eq "$n_before" "$(wc -l <"$WS/audit/audit.log")" "audit lines after gets that could not write"
no_temp_left "$loc" || fail "a failed get left a temporary file"

# ---- run --output -------------------------------------------------------------------------------
# past max_result_bytes (64 KiB here): all of it in FILE, none on the terminal
assert_exit 0 rx run lab1 t.cat --stdin "$vm/blob" --output "$loc/out"
cmp "$vm/blob" "$loc/out" || fail "--output FILE differs from the command's stdout"
[[ ! -s $OUT ]] || fail "--output also wrote stdout to the terminal"
assert_exit 0 rx run lab1 t.cat --stdin "$vm/secret.txt" --output "$loc/out2" --json
assert_contains "$loc/out2" "[REDACTED:TOKEN]"
assert_eq "$(sha "$loc/out2")" "$(json stdout_sha256)" "--json's stdout_sha256 and FILE"
assert_exit 64 rx eval lab1 t.cat --output "$loc/out3"

# ---- the catalog ----------------------------------------------------------------------------------
ws_add_action t.bad '{"risk": "L1", "get": {"path": "/x/{n}"}, "binary": true, "secrets": ["TOKEN"], "params": {"n": {"type": "path"}}}'
assert_exit 78 rx actions
assert_contains "$ERR" "actions.t.bad.binary: a binary download is not redacted"
ws_add_action t.bad '{"risk": "L1", "put": {"path": "/x/{n}", "mode": "4755"}, "params": {"n": {"type": "path"}}}'
assert_exit 78 rx actions
assert_contains "$ERR" "actions.t.bad.put.mode"
ws_add_action t.bad '{"risk": "L1", "put": {"path": "/x/$(id)"}}'
assert_exit 78 rx actions
assert_contains "$ERR" "actions.t.bad.put.path"
ws_add_action t.bad '{"risk": "L1", "command": "true", "put": {"path": "/x/y"}}'
assert_exit 78 rx actions
assert_contains "$ERR" "actions.t.bad.command"
ws_edit 'del c["actions"]["t.bad"]'

pass
