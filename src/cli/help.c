/* Help texts: `rexec help [COMMAND]` and `rexec COMMAND --help` print the same words. */
#include <string.h>

#include "cli.h"

static const char overview[] =
    "usage: rexec [--workspace DIR] [--socket PATH] [--no-progress] COMMAND [ARGS]\n"
    "       rexec help [COMMAND] | rexec COMMAND --help | rexec --version\n"
    "\n"
    "Runs operator-approved actions on tool VMs over SSH.\n"
    "\n"
    "commands:\n"
    "  run TARGETS ACTION   run an action (exit status = the remote command's)\n"
    "  eval TARGETS ACTION  the gate's decision only; nothing runs\n"
    "  put | get HOST ACTION LOCAL_FILE  send | fetch a file with a file action\n"
    "  check TARGETS        connect, verify the host key, probe the VM\n"
    "  hosts | actions      list the inventory | the catalog (actions --lint: its templates)\n"
    "  groups               list the host groups (@name) and their hosts\n"
    "  approve ID           confirm a pending challenge at a terminal\n"
    "  approvals            list pending challenges and unused grants\n"
    "  audit verify|show|head|prune|recover  the audit log (`rexec help audit`)\n"
    "  evidence prune       remove old evidence (--older-than 30d by default)\n"
    "  serve --socket PATH  long-lived controller with warm connections\n"
    "  help [COMMAND]       this text, or a command's\n"
    "\n"
    "global options:\n"
    "  --workspace DIR, -w  the workspace (default $REXEC_WORKSPACE, else .)\n"
    "  --socket PATH        hand run/eval/check to `rexec serve` (default $REXEC_SOCKET)\n"
    "  --no-progress        no fan-out progress line on a terminal\n"
    "  --version, -V        print the version\n"
    "  --help, -h           this text (rexec COMMAND --help: the command's)\n"
    "  (global options may also come after the command, up to a --)\n"
    "\n"
    "exit codes: 0-254 the remote status (a remote 255 shows as 254, 124 = timeout),\n"
    "  255 host unavailable, 64 usage, 65 invalid request or parameter, 74 audit record\n"
    "  not written (nothing ran), 75 approval required, 77 denied, 78 configuration error,\n"
    "  71 out of memory or file descriptors (RLIMIT_NOFILE, named in the message).\n"
    "See docs/cli.md and docs/exit-codes.md.\n";

static const char run_help[] =
    "usage: rexec run TARGETS ACTION [--param NAME=VALUE]... [--request FILE] [--stdin FILE]\n"
    "                 [--output FILE] [--approve | --grant ID] [--timeout S] [--json]\n"
    "                 [--parallel N] [--socket PATH]\n"
    "\n"
    "Runs ACTION from the catalog on each target host. TARGETS is a host name, a\n"
    "comma-separated list, or @group. The redacted remote stdout and stderr go to rexec's\n"
    "stdout and stderr, like ssh; with several hosts each line is prefixed with [host].\n"
    "\n"
    "  --param NAME=VALUE, -p  a parameter of the action (repeatable); each value becomes one\n"
    "                          shell word after validation against its type\n"
    "  --request FILE          a JSON request: {\"action\", \"params\", \"stdin\" | \"stdin_base64\",\n"
    "                          \"rationale\", \"hypothesis_id\", \"timeout_s\"} (strict, <= 64 KiB)\n"
    "  --stdin FILE            the command's stdin, byte for byte (- for rexec's own stdin);\n"
    "                          without it the command reads /dev/null. Staged on the VM before\n"
    "                          the command starts, or fed as it arrives if the action says\n"
    "                          \"stdin\": \"piped\" (docs/workspace.md)\n"
    "  --output FILE           the (redacted) stdout into FILE as it arrives, not on the\n"
    "                          terminal: written to a temporary file next to FILE, which\n"
    "                          becomes FILE once the call exited 0 with all of its output\n"
    "                          (else it is removed; FILE is left as it was; 73 when FILE\n"
    "                          cannot be written). One host\n"
    "  --grant ID              run with a single-use grant from `rexec approve`\n"
    "  --approve               ask for approval here, at this terminal, then run\n"
    "  --timeout S             shorten the action's timeout (never lengthen it)\n"
    "  --json                  one JSON object per host on stdout instead of the streams:\n"
    "                          run_id host action decision reason executed exit_code signal\n"
    "                          timed_out truncated stdout stderr stdout_bytes stderr_bytes\n"
    "                          stdout_sha256 duration_ms containment evidence challenge_id error\n"
    "                          (stdout/stderr that are not UTF-8 come as stdout_base64/...)\n"
    "  --parallel N            hosts at once (default 16)\n"
    "  --socket PATH           through a running `rexec serve` (as the global option)\n"
    "\n"
    "Exit status with one host: the remote command's (0-254), else 255 host unavailable,\n"
    "64 usage, 65 bad request/parameter, 74 audit failure, 75 approval required, 77 denied,\n"
    "78 configuration. With several hosts: 0 when every host returned 0, else the largest\n"
    "status among the hosts (so 255 if any host was unavailable).\n"
    "71: too few file descriptors free (the message names RLIMIT_NOFILE; raise ulimit -n).\n"
    "Ctrl-C, SIGTERM or SIGHUP (the terminal closed, the ssh session dropped) stops the remote\n"
    "commands, waits for them and their outcome records, and exits 130; a second signal\n"
    "leaves at once.\n";

static const char put_help[] =
    "usage: rexec put TARGETS ACTION LOCAL_FILE [--param NAME=VALUE]... [--approve | --grant ID]\n"
    "                 [--timeout S] [--json] [--parallel N] [--socket PATH]\n"
    "\n"
    "Sends LOCAL_FILE to each target with ACTION, a \"put\" action of the catalog, which names\n"
    "the path on the VM (docs/workspace.md, \"put and get\"). rexec takes the file's SHA-256\n"
    "and size (the parameters content_sha256 and content_size) and streams it; the VM writes\n"
    "it to a temporary file in the destination's directory, checks size and SHA-256, sets mode\n"
    "and owner, syncs it and renames it into place. Any failure leaves the old file as it was\n"
    "and nothing half-written. A symbolic link or a directory at the destination is refused.\n"
    "Same gate, approvals, audit and evidence as `rexec run`.\n"
    "\n"
    "  --param NAME=VALUE, -p  a parameter of the action (the path's placeholders)\n"
    "  --grant ID, --approve   as for run (an approval binds the file's SHA-256)\n"
    "  --timeout S             shorten the action's timeout\n"
    "  --json                  one JSON object per host on stdout\n"
    "  --parallel N            hosts at once\n"
    "  --socket PATH           through `rexec serve` (this client reads LOCAL_FILE)\n"
    "\n"
    "Exit status: 0 written; the VM's 2 refused (path, symlink, directory), 3 cannot write\n"
    "(directory, disk full, owner), 4 the bytes differ (size or SHA-256); else as run.\n";

static const char get_help[] =
    "usage: rexec get HOST ACTION LOCAL_FILE [--param NAME=VALUE]... [--approve | --grant ID]\n"
    "                 [--timeout S] [--json] [--socket PATH]\n"
    "\n"
    "Fetches the file that ACTION, a \"get\" action of the catalog, names on HOST into\n"
    "LOCAL_FILE: streamed to a temporary file next to it and renamed once whole (never\n"
    "half-written); its size and SHA-256 are printed and recorded in the audit log. Text\n"
    "passes the redactor; an action with \"binary\": true (and no secrets) skips it. The\n"
    "file may be at most the action's max_output_bytes. It is `rexec run --output`.\n"
    "\n"
    "  --param NAME=VALUE, -p  a parameter of the action (the path's placeholders)\n"
    "  --grant ID, --approve   as for run\n"
    "  --timeout S             shorten the action's timeout\n"
    "  --json                  one JSON object on stdout (the file's bytes are not in it)\n"
    "  --socket PATH           through `rexec serve` (this client writes LOCAL_FILE)\n"
    "\n"
    "Exit status: 0 written; 73 LOCAL_FILE cannot be written or the file passed\n"
    "max_output_bytes; the VM's 2 refused (path, not a regular file), 3 cannot read, 4 the\n"
    "file changed while it was read; else as run.\n";

static const char eval_help[] =
    "usage: rexec eval TARGETS ACTION [--param NAME=VALUE]... [--request FILE] [--stdin FILE]\n"
    "                  [--output FILE] [--approve | --grant ID] [--timeout S] [--json]\n"
    "                  [--parallel N] [--socket PATH]\n"
    "\n"
    "The options are run's (`rexec help run`): eval answers for exactly the call run would\n"
    "make with them (--param, --request, --stdin, --grant, --approve, --timeout, --json,\n"
    "--parallel, --socket; --output is refused, 64: nothing runs, nothing is written).\n"
    "The gate's decision for the call, without running anything, writing a challenge or\n"
    "consuming a grant: ALLOW, DENY or REQUIRES_APPROVAL with its reason code and the\n"
    "rendered command (secrets by name only). Exit 0 for ALLOW, 75 for REQUIRES_APPROVAL,\n"
    "77 for DENY, 65/78 for an invalid request or configuration.\n";

static const char check_help[] =
    "usage: rexec check TARGETS [--json] [--socket PATH]\n"
    "\n"
    "  --json         one JSON object per host on stdout\n"
    "  --socket PATH  through a running `rexec serve` (as the global option)\n"
    "\n"
    "Connects to each host, verifies its host key, authenticates, and probes the VM: bash,\n"
    "coreutils timeout, base64, setsid, unshare, systemd-run, and the strongest containment\n"
    "it offers (pid-namespace or process-group). Nothing from the catalog runs.\n"
    "When the workspace does not load, it reports what `rexec actions --lint` does: every\n"
    "template the loader refuses, or why it does not load (exit 78).\n"
    "Exit 0 when every host is fine, 255 when one is unavailable, 78 for an unknown host.\n";

static const char hosts_help[] =
    "usage: rexec hosts [--json]\n"
    "       rexec hosts import-ssh-config [PATTERN]\n"
    "       rexec hosts import-ansible INVENTORY [--groups]\n\n"
    "Lists the inventory of rexec.json (--json: one JSON array). No connection is made.\n\n"
    "import-ssh-config prints inventory entries ({\"ssh_alias\": NAME}) to paste under \"hosts\"\n"
    "for each Host of ~/.ssh/config ($REXEC_SSH_CONFIG if set) whose name matches the glob\n"
    "PATTERN, each resolved by `ssh -G NAME` (shown in its description), with \"auth\":\n"
    "\"agent\" where ssh would use the agent (SSH_AUTH_SOCK set, and no IdentityFile exists\n"
    "or IdentitiesOnly is no). Exit 1 if none.\n\n"
    "import-ansible prints the same from an Ansible inventory: INVENTORY is the JSON of\n"
    "`ansible-inventory --list` (a file, or - for stdin), or an inventory ansible-inventory\n"
    "reads (INI, YAML, a directory; it is run). ansible_host, ansible_port, ansible_user,\n"
    "ansible_ssh_private_key_file, and a ProxyJump in ansible_ssh_common_args (-o ProxyJump=X,\n"
    "-J X) become address, port, user, key and proxy_jump; what has no field is named on stderr.\n"
    "  --groups  the groups instead, children flattened, to paste under \"groups\"\n"
    "Exit 1 when no host (group), 78 when the inventory cannot be read.\n";

static const char actions_help[] =
    "usage: rexec actions [--json]\n"
    "       rexec actions --lint [--json]\n\nLists the catalog: each action's effective risk, its\n"
    "parameters with their types, and the secrets it receives (by name).\n\n"
    "--lint checks every action's command template as the loader does and reports each one it\n"
    "refuses, not only the first: \"rexec: actions.NAME.command: line L, column C: why\" on\n"
    "stderr (--json: {\"actions\",\"loads\",\"error\",\"problems\":[{\"action\",\"line\",\n"
    "\"column\",\"why\",\"error\"}]} on stdout), and says so when the workspace does not load\n"
    "for another reason. Reads no secret. Exit 0 when the catalog is clean and the workspace\n"
    "loads, else 78. `rexec check` reports the same when the workspace does not load.\n";

static const char evidence_help[] =
    "usage: rexec evidence prune [--older-than D] [--keep N] [--json]\n"
    "\n"
    "Removes the evidence (evidence/<run_id>/) of runs older than D: an age (90s, 30m, 12h,\n"
    "30d, 1w) or a time (2026-12-01T00:00:00Z).\n"
    "  --older-than D  the age or time (default 30d)\n"
    "  --keep N        keep the newest N runs whatever their age\n"
    "  --json          one JSON object on stdout\n"
    "The audit log is not touched (see `rexec audit prune`).\n"
    "See docs/audit.md, \"Retention\".\n";

static const char groups_help[] =
    "usage: rexec groups [--json]\n\nLists the host groups of rexec.json (TARGETS @name) with\n"
    "their hosts (--json: one JSON array). No connection is made.\n";

static const char approve_help[] =
    "usage: rexec approve CHALLENGE_ID\n"
    "       rexec approvals [--json] [--all] [--prune]\n"
    "\n"
    "approve shows an operator what a pending call will run and asks, at the terminal\n"
    "(/dev/tty, never a pipe), for the challenge's confirmation code. The caller then runs\n"
    "with --grant CHALLENGE_ID: the grant is single-use and expires. approvals lists pending\n"
    "challenges and unused grants:\n"
    "  --json   one JSON object a line\n"
    "  --all    also the grants already used\n"
    "  --prune  first remove expired challenges and old used grants\n"
    "See docs/gate.md.\n";

static const char audit_help[] =
    "usage: rexec audit verify [--key FILE] [--head H] [--json]\n"
    "       rexec audit head [--key FILE] [--reset]\n"
    "       rexec audit show [--run ID] [--since TIME] [--host H] [--action A] [--json]\n"
    "       rexec audit prune --before TIME [--key FILE] [--json]\n"
    "       rexec audit recover [--key FILE] [--include-unregistered] [--json]\n"
    "\n"
    "verify  checks every audit file of the workspace (audit/audit-*.log oldest first, then\n"
    "        audit/audit.log) as one hash chain and names each bad line as FILE:LINE.\n"
    "        --head H  also hold the log against a head shipped earlier (H: the JSON that\n"
    "                  `audit head` printed, a file holding it, or - for stdin): records cut\n"
    "                  after it, a deleted current or newest rotated file, or an older copy\n"
    "                  put back are reported (exit 1). audit/head.json is always checked.\n"
    "        --json  one JSON object: status, first_bad, last_seq, last_hash, shipped_head,\n"
    "                errors[], warnings[], n_abandoned, abandoned[]\n"
    "        Intents closed by `audit recover` are listed as abandoned; they do not change\n"
    "        the exit status.\n"
    "        exit 0   intact, every intent has its outcome\n"
    "             1   tampered or corrupt: an edited, removed, reordered, truncated or foreign\n"
    "                 line, or a missing audit file\n"
    "             2   intact, but an intent has no outcome (rexec stopped between the two, or\n"
    "                 the run is still going; see recover)\n"
    "             74  an audit file cannot be read\n"
    "             78  the key is refused (symlink, readable by others, inside the workspace)\n"
    "head    prints the head: one JSON line {\"seq\",\"hash\",\"ts\",\"keyed\",\"mac\"} naming the\n"
    "        last record, checked against the log first. Ship it elsewhere (a timer, the\n"
    "        orchestrator) to check the log against later with verify --head. Exit 74 when\n"
    "        audit/head.json and the log disagree; then every append is refused too.\n"
    "        --reset  after you have seen why: rewrite audit/head.json from the log's end and\n"
    "                 chain a \"head_reset\" record, so appends go on.\n"
    "show    prints the records oldest first: a table (time, run id, phase, host, action,\n"
    "        decision/reason, exit), or with --json the stored lines unchanged.\n"
    "        --run ID      only this run's records\n"
    "        --since TIME  2026-12-02T10:00:00Z, 2026-12-02, or an age: 90s, 30m, 1h, 2d, 1w\n"
    "        --host H      only this host's records\n"
    "        --action A    only this action's records\n"
    "        show does not verify: use `rexec audit verify` for that.\n"
    "prune   removes rotated audit files older than --before (whole files, oldest first, never\n"
    "        audit.log, never cutting an intent from its outcome). A \"prune\" record in the\n"
    "        chain and audit/anchor.json keep the rest verifiable: verify starts at the anchor.\n"
    "recover after a crash or a kill: appends an \"abandoned\" record (executed unknown) for\n"
    "        each intent whose writer process is gone, so verify exits 0 again and reports\n"
    "        them. Intents of a process still running (a `rexec serve`, a long run) stay open:\n"
    "        each writer holds a lock in audit/writers/ while it lives.\n"
    "        --include-unregistered  also close intents that name no writer (written by an\n"
    "                 rexec from before writers were registered): only once no such rexec runs\n"
    "        exit 0 nothing left open, 2 some kept (their writer runs), 1 the log does not\n"
    "             verify (nothing appended), 74, 78 as for verify\n"
    "\n"
    "The key of a keyed log: --key FILE, else $REXEC_AUDIT_KEY, else rexec.json's\n"
    "\"audit\": {\"key_file\": \"/abs/path\"}. It must lie outside the workspace, not be a\n"
    "symlink, and be readable by its owner only.\n";

static const char serve_help[] =
    "usage: rexec serve --socket PATH [--idle-timeout S] [--stdin-timeout S]\n"
    "                   [--log auto|json|journal|off]\n"
    "\n"
    "A long-lived controller on a Unix socket, speaking newline-delimited JSON (run, eval,\n"
    "check, cancel, stdin, ping, hosts, actions, groups, reload). Its own user may use every op; the\n"
    "users and groups in rexec.json's serve.clients only the verbs listed there (never\n"
    "approve); anyone else is refused. The socket is 0600 unless serve.clients asks for\n"
    "more (serve.socket_mode, serve.socket_group). See docs/gate.md, \"Two users\".\n"
    "Connections to hosts stay warm between calls. SIGHUP reloads rexec.json (a file that does\n"
    "not load is refused; calls in flight finish on their configuration); SIGTERM stops.\n"
    "--log: one structured line per request and per call (time, client uid and user, op, id,\n"
    "run_id, host, action, decision, exit, duration): JSON lines on stderr, or journald\n"
    "fields (REXEC_*) when stderr is the journal (auto, the default), or nothing (off).\n"
    "--socket PATH: the Unix socket to listen on (or the global --socket, $REXEC_SOCKET).\n"
    "--idle-timeout S: close a client idle that long with nothing running (default 300, 0 never).\n"
    "--stdin-timeout S: a run sent with \"stdin_stream\" whose stdin pauses longer than S\n"
    "(no \"stdin\" line, no byte of a raw piece) ends, nothing run (default 60).\n"
    "See docs/serve-protocol.md.\n";

static const struct {
    const char *name, *text;
} helps[] = {
    {"run", run_help},         {"eval", eval_help},           {"put", put_help},
    {"get", get_help},           {"check", check_help},
    {"hosts", hosts_help},     {"actions", actions_help},     {"approve", approve_help},
    {"approvals", approve_help}, {"audit", audit_help},       {"serve", serve_help},
    {"groups", groups_help},   {"evidence", evidence_help},   {"help", overview},
};

const char *cli_help_text(const char *command)
{
    if (command == NULL)
        return overview;
    for (size_t i = 0; i < sizeof(helps) / sizeof(*helps); i++)
        if (strcmp(helps[i].name, command) == 0)
            return helps[i].text;
    return NULL;
}
