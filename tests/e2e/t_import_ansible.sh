#!/usr/bin/env bash
# `rexec hosts import-ansible` (issue 35, item 6): from the committed JSON of `ansible-inventory
# --list` (tests/e2e/ansible/inventory.json, made from inventory.ini by ansible-core 2.14), every
# entry and note exactly; from the INI itself through a real ansible-inventory (when installed)
# the same; and a lab host imported from an inventory, pasted into rexec.json, runs.
tid="hosts import-ansible: hosts, groups with children, ProxyJump, a lab host that runs"
# shellcheck source=tests/e2e/lib.sh
. "${REXEC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/lib.sh"
fx=$REXEC_SRC/tests/e2e/ansible
export SSH_AUTH_SOCK=$RX_TMP/no-agent.sock # hosts without a key file: "auth": "agent", as ssh
d='"description":"from the Ansible inventory"'

assert_exit 0 "$REXEC_BIN" hosts import-ansible "$fx/inventory.json"
cat >"$RX_TMP/want" <<WANT
  "bastion": {"address":"192.0.2.1","user":"jump","auth":"agent",$d},
  "db1": {"address":"192.0.2.7","user":"ops","key":"/keys/db","proxy_jump":"bastion",$d},
  "db2": {"address":"192.0.2.8","port":2200,"user":"pg","auth":"agent",$d},
  "db3": {"address":"db3","user":"ops","auth":"agent","proxy_jump":"b.example",$d},
  "web1": {"address":"192.0.2.5","port":2222,"user":"deploy","key":"/keys/deploy",$d},
  "web2": {"address":"192.0.2.6","user":"ops","auth":"agent","proxy_jump":"bastion",$d}
WANT
diff -u "$RX_TMP/want" "$OUT" >&2 || fail "import-ansible's hosts differ (above)"
for n in "skipped ctl: ansible_connection is local, not ssh" \
    "db2: ansible_password is not used (rexec logs in with keys only)" \
    "db3: ansible_host is a template ansible resolves at run time: left out" \
    "db3: ProxyJump a.example,b.example has several hops: the last one is kept" \
    "db3: its ProxyJump host b.example is not in the inventory: add it under \"hosts\""; do
    assert_contains "$ERR" "rexec: import-ansible: $n"
done
assert_not_contains "$ERR" "not-a-real-password-42"
assert_not_contains "$OUT" "not-a-real-password-42"
[[ $(grep -c "template ansible resolves" "$ERR") == 1 ]] || fail "the template note is repeated: $(cat "$ERR")"

assert_exit 0 "$REXEC_BIN" hosts import-ansible --groups - <"$fx/inventory.json"
cat >"$RX_TMP/want" <<'WANT'
  "db": ["db1","db2","db3"],
  "everything": ["web1","web2","db1","db2","db3"],
  "prod": ["web1","web2","db1","db2","db3"],
  "web": ["web1","web2"]
WANT
diff -u "$RX_TMP/want" "$OUT" >&2 || fail "import-ansible --groups differs (above)"

# refusals
assert_exit 64 "$REXEC_BIN" hosts import-ansible
assert_contains "$ERR" "usage: rexec hosts import-ansible INVENTORY [--groups]"
assert_exit 64 "$REXEC_BIN" hosts import-ansible "$fx/inventory.json" --frob
assert_contains "$ERR" 'hosts import-ansible: unexpected argument "--frob"'
echo '[1]' >"$RX_TMP/bad.json"
assert_exit 78 "$REXEC_BIN" hosts import-ansible - <"$RX_TMP/bad.json"
assert_contains "$ERR" "not the JSON object of \`ansible-inventory --list\`"
echo '{"_meta": {"hostvars": {}}}' >"$RX_TMP/empty.json"
assert_exit 1 "$REXEC_BIN" hosts import-ansible "$RX_TMP/empty.json"
assert_contains "$ERR" "no host in the inventory"

if ! command -v ansible-inventory >/dev/null; then
    echo "note: ansible-inventory is not installed (apt-get install ansible-core): the INI is not read" >&2
    pass
fi
# the INI through the real ansible-inventory: the same entries as from the committed JSON
assert_exit 0 "$REXEC_BIN" hosts import-ansible "$fx/inventory.json"
mv "$OUT" "$RX_TMP/from-json"
HOME=$RX_TMP assert_exit 0 "$REXEC_BIN" hosts import-ansible "$fx/inventory.ini"
diff -u "$RX_TMP/from-json" "$OUT" >&2 || fail "the INI read by ansible-inventory differs from inventory.json (above): regenerate it"
HOME=$RX_TMP assert_exit 78 "$REXEC_BIN" hosts import-ansible "$RX_TMP/absent.ini"
assert_contains "$ERR" "rexec: import-ansible: $RX_TMP/absent.ini: No such file or directory"
printf '[web\n' >"$RX_TMP/broken.ini"  # ansible-inventory fails on it (exit 1, or lists nothing)
HOME=$RX_TMP "$REXEC_BIN" hosts import-ansible "$RX_TMP/broken.ini" >"$OUT" 2>"$ERR" && fail "a broken INI was imported: $(cat "$OUT")"
[[ ! -s $OUT ]] || fail "a broken INI printed entries: $(cat "$OUT")"

# a lab host from an inventory, pasted as printed, runs; its group too
lab_start 1
marker=$RX_TMP/ran
ws_add_action t.touch '{"risk": "L0", "command": "touch {path}", "params": {"path": {"type": "path"}}}'
cat >"$RX_TMP/lab.ini" <<INI
[labs]
fromansible ansible_host=127.0.0.1 ansible_port=$(lab_port lab1) ansible_user=$LAB_USER ansible_ssh_private_key_file=$WS/keys/id_ed25519
INI
members_json() { "$RX_PYTHON" -c 'import json, sys; print(json.dumps(json.loads("{" + open(sys.argv[1]).read() + "}")))' "$1"; }
HOME=$RX_TMP assert_exit 0 "$REXEC_BIN" hosts import-ansible "$RX_TMP/lab.ini"
members_json "$OUT" >"$RX_TMP/hosts.json"
HOME=$RX_TMP assert_exit 0 "$REXEC_BIN" hosts import-ansible --groups "$RX_TMP/lab.ini"
members_json "$OUT" >"$RX_TMP/groups.json"
ws_edit 'import json as j
c["hosts"].update(j.load(open(args[0]))); c.setdefault("groups", {}).update(j.load(open(args[1])))' \
    "$RX_TMP/hosts.json" "$RX_TMP/groups.json"
# the lab's known_hosts pins 127.0.0.1 at that port: the same host key
assert_exit 0 rx run @labs t.touch --param "path=$marker"
[[ -e $marker ]] || fail "the host imported from Ansible did not run"
pass
