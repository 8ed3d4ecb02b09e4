#!/usr/bin/env bash
# docs/ci-recipe.sh: a CI job's use of rexec against a disposable lab, end to end (docs/ci.md).
#   1. start the lab (LAB_PROVIDER: docker = a container running sshd, built from
#      docs/lab.Dockerfile; external = already started by the CI, e.g. a GitLab service;
#      local = scripts/lab from a checkout, sshd on loopback)
#   2. write a workspace from CI secrets (files 0600, never a value on a command line)
#   3. pin the lab's host key (known beforehand: never trust-on-first-use)
#   4. run actions with --json; fail the job on the documented exit codes
#   5. collect the audit log and evidence as artifacts; `rexec audit verify`
#   6. tear down (trap): the lab, and the workspace with its key and secrets
# Environment: REXEC (the rexec binary), ARTIFACTS (a directory), LAB_API_TOKEN (a CI secret),
# LAB_PROVIDER, LAB_PORT, LAB_WAIT_S (how long the lab's sshd may take to answer, default 60);
# for external: LAB_ADDRESS, LAB_USER, LAB_CLIENT_KEY_FILE (private key) and
# LAB_HOST_KEY_PUB_FILE (the lab's ssh_host_ed25519_key.pub).
set -euo pipefail
REXEC=${REXEC:-rexec}
ARTIFACTS=${ARTIFACTS:-$PWD/rexec-artifacts}
LAB_PROVIDER=${LAB_PROVIDER:-docker}
LAB_PORT=${LAB_PORT:-2222}
: "${LAB_API_TOKEN:?set LAB_API_TOKEN from a CI secret}"
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd) # where lab.Dockerfile is
umask 077 # every file written below (key, secret, workspace) is 0600, directories 0700
work=$(mktemp -d "${TMPDIR:-/tmp}/rexec-ci.XXXXXX")
ws=$work/workspace
mkdir -p "$ws/keys" "$ws/secrets" "$ARTIFACTS"

# --- 1. the lab ------------------------------------------------------------------------------
lab_up() {
    case $LAB_PROVIDER in
    docker) # host and client keys made here, so the host key is known before the lab starts
        mkdir -p "$work/lab"
        ssh-keygen -q -t ed25519 -N '' -C rexec-lab-host -f "$work/lab/host_key"
        ssh-keygen -q -t ed25519 -N '' -C rexec-ci -f "$work/lab/client_key"
        chmod 644 "$work/lab/host_key" # read by the container's sshd (root); gone at teardown
        docker build -q -t rexec-lab -f "$here/lab.Dockerfile" "$here" >/dev/null
        docker run -d --rm --name "rexec-lab-$$" -p "127.0.0.1:$LAB_PORT:22" \
            -v "$work/lab/host_key:/etc/ssh/ssh_host_ed25519_key:ro" \
            -e "LAB_AUTHORIZED_KEY=$(cat "$work/lab/client_key.pub")" rexec-lab >/dev/null
        LAB_ADDRESS=127.0.0.1 LAB_USER=lab
        LAB_CLIENT_KEY_FILE=$work/lab/client_key LAB_HOST_KEY_PUB_FILE=$work/lab/host_key.pub ;;
    local) # sshd on loopback from a checkout (what tests/install/t_ci_recipe.sh runs)
        "${REXEC_SRC:-$here/..}/scripts/lab" up --dir "$work/lab" --hosts 1 --base-port "$LAB_PORT" >/dev/null
        LAB_ADDRESS=127.0.0.1 LAB_USER=$(id -un)
        LAB_CLIENT_KEY_FILE=$work/lab/workspace/keys/id_ed25519
        LAB_HOST_KEY_PUB_FILE=$work/lab/hosts/lab1/ssh_host_ed25519_key.pub ;;
    external) : "${LAB_ADDRESS:?}" "${LAB_USER:?}" "${LAB_CLIENT_KEY_FILE:?}" "${LAB_HOST_KEY_PUB_FILE:?}" ;;
    *) echo "ci-recipe: unknown LAB_PROVIDER $LAB_PROVIDER" >&2; return 64 ;;
    esac
}
# A started container (or a CI service) is not yet a listening sshd: docker's port proxy accepts
# and closes at once until it is. Wait for sshd's banner ("SSH-2.0-"), a bounded LAB_WAIT_S.
lab_wait() {
    local deadline=$((SECONDS + ${LAB_WAIT_S:-60})) banner said=0
    while :; do
        banner=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2" && head -c 8 <&3' _ \
            "$LAB_ADDRESS" "$LAB_PORT" 2>/dev/null) || banner=""
        [[ $banner != SSH-2.0- ]] || return 0
        if [[ $LAB_PROVIDER == docker ]] &&
            [[ $(docker inspect -f '{{.State.Running}}' "rexec-lab-$$" 2>/dev/null) != true ]]; then
            echo "ci-recipe: the lab container is not running; its log:" >&2
            docker logs "rexec-lab-$$" >&2 || true
            return 1
        fi
        if ((SECONDS >= deadline)); then
            echo "ci-recipe: the lab's sshd at $LAB_ADDRESS:$LAB_PORT did not answer within ${LAB_WAIT_S:-60} s" >&2
            return 1
        fi
        ((said++)) || echo "ci-recipe: waiting for the lab's sshd at $LAB_ADDRESS:$LAB_PORT" >&2
        sleep 1 # a poll of something outside this script; bounded by the deadline above
    done
}
lab_down() {
    case $LAB_PROVIDER in
    docker) docker rm -f "rexec-lab-$$" >/dev/null 2>&1 || true ;;
    local) "${REXEC_SRC:-$here/..}/scripts/lab" down --purge --dir "$work/lab" >/dev/null 2>&1 || true ;;
    esac
}
# --- 6. teardown, whatever happens --------------------------------------------------------------
trap 'lab_down; rm -rf -- "$work"' EXIT
lab_up
lab_wait

# --- 2. the workspace, from CI secrets ---------------------------------------------------------
cp -- "$LAB_CLIENT_KEY_FILE" "$ws/keys/lab"
printf '%s' "$LAB_API_TOKEN" >"$ws/secrets/api_token" # printf is a builtin: no command line
# --- 3. the host key, pinned ([addr]:port as OpenSSH writes it for ports other than 22)
read -r key_type key_b64 _ <"$LAB_HOST_KEY_PUB_FILE"
known_name="[$LAB_ADDRESS]:$LAB_PORT"
[[ $LAB_PORT != 22 ]] || known_name=$LAB_ADDRESS
printf '%s %s %s\n' "$known_name" "$key_type" "$key_b64" >"$ws/known_hosts"
# The lab is disposable, so its host allows L2 (state-changing actions) without approval; the
# gate still decides, records and denies anything above. Never point this at a shared host.
cat >"$ws/rexec.json" <<JSON
{
  "hosts": {
    "lab1": {"address": "$LAB_ADDRESS", "port": $LAB_PORT, "user": "$LAB_USER", "key": "keys/lab",
             "host_key": "strict", "allow": "L2", "approve": "L2",
             "description": "disposable CI lab: L2 allowed here only"}
  },
  "groups": {"lab": ["lab1"]},
  "scope": {"cidrs": ["127.0.0.0/8"]},
  "secrets": {"API_TOKEN": {"file": "secrets/api_token"}},
  "actions": {
    "sys.uname":   {"risk": "L0", "command": "uname -a"},
    "lab.reset":   {"risk": "L2", "state_changing": true,
                    "command": "rm -rf -- \"\$HOME/ci-scratch\" && mkdir -p -- \"\$HOME/ci-scratch\""},
    "api.check":   {"risk": "L1", "secrets": ["API_TOKEN"],
                    "command": "printf 'token of %s bytes, echoed: %s\\\\n' \"\${#API_TOKEN}\" \"\$API_TOKEN\""},
    "test.suite":  {"risk": "L0", "timeout_s": 60,
                    "command": "cd \"\$HOME/ci-scratch\" && echo {name} > result && cat result",
                    "params": {"name": {"type": "string", "pattern": "^[a-z0-9-]{1,32}$"}}},
    "fs.rootwipe": {"risk": "L3", "command": "echo never runs on the lab"}
  },
  "limits": {"timeout_s": 120, "connect_timeout_s": 20}
}
JSON
export REXEC_WORKSPACE=$ws

# --- 4. actions with --json; the exit codes decide the job ---------------------------------------
# step NAME ARGS...: `rexec ARGS --json` into $ARTIFACTS/NAME.json; returns its exit status,
# after saying what a documented code means (docs/exit-codes.md).
step() {
    local name=$1 rc=0
    shift
    "$REXEC" "$@" --json >"$ARTIFACTS/$name.json" || rc=$?
    case $rc in
    0) echo "ci: $name: ok" ;;
    255) echo "ci: $name: the lab is unavailable (255): infrastructure, not the test" >&2 ;;
    64 | 65 | 78) echo "ci: $name: the job's request or workspace is wrong ($rc)" >&2 ;;
    74) echo "ci: $name: the audit record could not be written (74): nothing ran" >&2 ;;
    75) echo "ci: $name: needs approval (75): raise the lab host's allow, don't work around it" >&2 ;;
    77) echo "ci: $name: denied by policy (77)" >&2 ;;
    124) echo "ci: $name: the action timed out (124)" >&2 ;;
    *) echo "ci: $name: the remote command failed with status $rc" >&2 ;;
    esac
    return "$rc"
}
step check check lab1 # host key, login, bash and timeout on the lab
step reset run lab1 lab.reset # L2: allowed by the lab host's allow
step api run lab1 api.check
step suite run @lab test.suite --param name=smoke
# L3 is above the lab's approve level: the gate must deny it (77), and the job checks that it did.
rc=0
step rootwipe run lab1 fs.rootwipe || rc=$?
[[ $rc == 77 ]] || { echo "ci: fs.rootwipe was not denied (exit $rc)" >&2; exit 1; }

# --- 5. evidence, audit log, verification ------------------------------------------------------
cp -R -- "$ws/audit" "$ws/evidence" "$ARTIFACTS/"
step audit-verify audit verify
# The secret is in no artifact: redacted from output, evidence and audit (grep reads it from the
# file, so it is on no command line either).
if grep -rqF -f "$ws/secrets/api_token" -- "$ARTIFACTS"; then
    echo "ci: the API token leaked into the artifacts" >&2
    exit 1
fi
echo "ci: done; artifacts in $ARTIFACTS"
