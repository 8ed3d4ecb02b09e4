/* The one table of the command line: see interface.h for who reads it. A new command or option
 * goes here first; the suite then names every place (help.c, man/rexec.1, docs/cli.md) that
 * does not say the same. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "interface.h"

const cli_opt cli_global_opts[] = {
    {"--workspace", "-w", "DIR", "the workspace (default $REXEC_WORKSPACE, else .)"},
    {"--socket", NULL, "PATH", "hand run/eval/check to `rexec serve` (default $REXEC_SOCKET)"},
    {"--no-progress", NULL, NULL, "no fan-out progress line on a terminal"},
    {"--version", "-V", NULL, "print the version and those of the libraries in use"},
    {"--help", "-h", NULL, "the overview, or a command's help"},
    {NULL, NULL, NULL, NULL},
};

/* eval takes run's options but the fan-out's controls: it answers for exactly the call run
 * would make, and runs nothing. */
static const cli_opt eval_opts[] = {
    {"--param", "-p", "NAME=VALUE", "a parameter of the action (repeatable)"},
    {"--request", NULL, "FILE", "a JSON request (strict, <= 64 KiB)"},
    {"--stdin", NULL, "FILE", "the command's stdin, byte for byte (- for rexec's own)"},
    {"--approve", NULL, NULL, "ask for approval at this terminal, then run"},
    {"--grant", NULL, "ID", "run with a single-use grant from `rexec approve`"},
    {"--timeout", NULL, "S", "shorten the action's timeout (never lengthen it)"},
    {"--stdin-timeout", NULL, "S", "end a piped --stdin that pauses longer (default 60)"},
    {"--json", NULL, NULL, "one JSON object per host on stdout"},
    {"--parallel", NULL, "N", "hosts at once (default limits.parallel, 16)"},
    {"--socket", NULL, "PATH", "through a running `rexec serve` (as the global option)"},
    {"--traceparent", NULL, "VALUE", "a W3C traceparent recorded with the call (or $TRACEPARENT)"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt run_opts[] = {
    {"--param", "-p", "NAME=VALUE", "a parameter of the action (repeatable)"},
    {"--request", NULL, "FILE", "a JSON request (strict, <= 64 KiB)"},
    {"--stdin", NULL, "FILE", "the command's stdin, byte for byte (- for rexec's own)"},
    {"--output", NULL, "FILE", "stdout into FILE as it arrives, renamed in place once whole"},
    {"--approve", NULL, NULL, "ask for approval at this terminal, then run"},
    {"--grant", NULL, "ID", "run with a single-use grant from `rexec approve` (once)"},
    {"--timeout", NULL, "S", "shorten the action's timeout (never lengthen it)"},
    {"--stdin-timeout", NULL, "S", "end a piped --stdin that pauses longer (default 60)"},
    {"--json", NULL, NULL, "one JSON object per host on stdout"},
    {"--parallel", NULL, "N", "hosts at once (default limits.parallel, 16)"},
    {"--socket", NULL, "PATH", "through a running `rexec serve` (as the global option)"},
    {"--batch", NULL, "N|P%", "hosts in batches of N (or P% of them): one batch at a time"},
    {"--canary", NULL, "N", "the first N hosts run first, alone"},
    {"--max-failures", NULL, "N|P%", "once more hosts than that failed, start no more"},
    {"--retry-unavailable", NULL, "N", "try again (up to N) a host the call never reached"},
    {"--traceparent", NULL, "VALUE", "a W3C traceparent recorded with the call (or $TRACEPARENT)"},
    {NULL, NULL, NULL, NULL},
};
/* put and get: run's options, less those they set themselves (--stdin, --output) */
static const cli_opt put_opts[] = {
    {"--param", "-p", "NAME=VALUE", "a parameter of the action (repeatable)"},
    {"--approve", NULL, NULL, "ask for approval at this terminal, then run"},
    {"--grant", NULL, "ID", "run with a single-use grant from `rexec approve`"},
    {"--timeout", NULL, "S", "shorten the action's timeout (never lengthen it)"},
    {"--json", NULL, NULL, "one JSON object per host on stdout"},
    {"--parallel", NULL, "N", "hosts at once (default limits.parallel, 16)"},
    {"--socket", NULL, "PATH", "through a running `rexec serve` (as the global option)"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt get_opts[] = {
    {"--param", "-p", "NAME=VALUE", "a parameter of the action (repeatable)"},
    {"--approve", NULL, NULL, "ask for approval at this terminal, then run"},
    {"--grant", NULL, "ID", "run with a single-use grant from `rexec approve`"},
    {"--timeout", NULL, "S", "shorten the action's timeout (never lengthen it)"},
    {"--json", NULL, NULL, "one JSON object on stdout"},
    {"--socket", NULL, "PATH", "through a running `rexec serve` (as the global option)"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt check_opts[] = {
    {"--json", NULL, NULL, "one JSON object per host on stdout"},
    {"--socket", NULL, "PATH", "through a running `rexec serve` (as the global option)"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt json_only[] = {
    {"--json", NULL, NULL, "JSON on stdout instead of a table"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt actions_opts[] = {
    {"--json", NULL, NULL, "JSON on stdout instead of a table"},
    {"--lint", NULL, NULL, "every action template the loader refuses, not only the first"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt none[] = {{NULL, NULL, NULL, NULL}};
static const cli_opt ansible_opts[] = {
    {"--groups", NULL, NULL, "the groups (children flattened) instead of the hosts"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt approvals_opts[] = {
    {"--json", NULL, NULL, "one JSON object a line"},
    {"--all", NULL, NULL, "also the grants already used"},
    {"--prune", NULL, NULL, "first remove expired challenges and old used grants"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt approvals_watch_opts[] = {
    {"--socket", NULL, "PATH", "the `rexec serve` to watch, as an approver (as the global option)"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt approvals_web_opts[] = {
    {"--listen", NULL, "unix:PATH", "the page's Unix socket, 0600 (reach it with ssh -L)"},
    {"--socket", NULL, "PATH", "the `rexec serve` to decide on, as an approver (as the global option)"},
    {"--quiet", NULL, NULL, "no line per request on stderr"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt deny_opts[] = {
    {"--reason", NULL, "TEXT", "why: recorded, and told to a caller waiting on it"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt verify_opts[] = {
    {"--key", NULL, "FILE", "the key of a keyed log (else $REXEC_AUDIT_KEY, rexec.json)"},
    {"--head", NULL, "H", "also hold the log against a head shipped earlier"},
    {"--json", NULL, NULL, "one JSON object on stdout"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt head_opts[] = {
    {"--key", NULL, "FILE", "the key of a keyed log"},
    {"--reset", NULL, NULL, "rewrite audit/head.json from the log's end"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt show_opts[] = {
    {"--run", NULL, "ID", "only this run's records"},
    {"--since", NULL, "TIME", "from this time or age (90s, 30m, 1h, 2d, 1w) on"},
    {"--host", NULL, "H", "only this host's records"},
    {"--action", NULL, "A", "only this action's records"},
    {"--json", NULL, NULL, "the stored lines unchanged"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt prune_opts[] = {
    {"--before", NULL, "TIME", "remove rotated files older than this (required)"},
    {"--key", NULL, "FILE", "the key of a keyed log"},
    {"--json", NULL, NULL, "one JSON object on stdout"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt recover_opts[] = {
    {"--key", NULL, "FILE", "the key of a keyed log"},
    {"--include-unregistered", NULL, NULL, "also close intents that name no writer"},
    {"--json", NULL, NULL, "one JSON object on stdout"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt evidence_opts[] = {
    {"--older-than", NULL, "D", "remove runs older than D (default 30d)"},
    {"--keep", NULL, "N", "keep the newest N runs whatever their age"},
    {"--json", NULL, NULL, "one JSON object on stdout"},
    {NULL, NULL, NULL, NULL},
};
static const cli_opt serve_opts[] = {
    {"--socket", NULL, "PATH", "the Unix socket to listen on"},
    {"--idle-timeout", NULL, "S", "close a client idle that long (default 300, 0 never)"},
    {"--stdin-timeout", NULL, "S", "end a streamed stdin that pauses longer (default 60)"},
    {"--log", NULL, "auto|json|journal|off", "one structured line per request and per call"},
    {"--metrics-file", NULL, "PATH", "Prometheus text for node_exporter, replaced every interval"},
    {"--metrics-interval-s", NULL, "N", "how often --metrics-file is written (default 15)"},
    {NULL, NULL, NULL, NULL},
};

const cli_entry cli_entries[] = {
    {"run", NULL, "TARGETS ACTION", "run an action (exit status = the remote command's)", run_opts},
    {"eval", NULL, "TARGETS ACTION", "the gate's decision only; nothing runs", eval_opts},
    {"put", NULL, "TARGETS ACTION LOCAL_FILE", "send a file with a put action", put_opts},
    {"get", NULL, "HOST ACTION LOCAL_FILE", "fetch a file with a get action", get_opts},
    {"check", NULL, "TARGETS", "connect, verify the host key, probe the VM", check_opts},
    {"hosts", NULL, "", "list the inventory", json_only},
    {"hosts", "import-ssh-config", "[PATTERN]", "inventory entries from ~/.ssh/config", none},
    {"hosts", "import-ansible", "INVENTORY", "inventory entries from an Ansible inventory",
     ansible_opts},
    {"actions", NULL, "", "list the catalog (--lint: its templates)", actions_opts},
    {"groups", NULL, "", "list the host groups (@name) and their hosts", json_only},
    {"approve", NULL, "CHALLENGE_ID", "confirm a pending challenge at a terminal", none},
    {"deny", NULL, "CHALLENGE_ID", "refuse a pending challenge for good", deny_opts},
    {"approvals", NULL, "", "list pending challenges and unused grants", approvals_opts},
    {"approvals", "watch", "", "live console: pending approvals, approve or deny (through serve)",
     approvals_watch_opts},
    {"approvals", "web", "", "a web page to approve or deny, on a Unix socket for ssh -L",
     approvals_web_opts},
    {"audit", "verify", "", "check the audit chain (and a shipped head)", verify_opts},
    {"audit", "head", "", "the log's head, to ship elsewhere", head_opts},
    {"audit", "show", "", "the audit records, oldest first", show_opts},
    {"audit", "prune", "", "drop old rotated files, keep the chain verifiable", prune_opts},
    {"audit", "recover", "", "close intents whose process is gone", recover_opts},
    {"evidence", "prune", "", "remove old evidence (30d by default)", evidence_opts},
    {"serve", NULL, "", "long-lived controller with warm connections", serve_opts},
    {"help", NULL, "[COMMAND]", "the overview, or a command's help", none},
};
const unsigned cli_n_entries = sizeof(cli_entries) / sizeof(*cli_entries);

static int opt_is(const cli_opt *o, const char *name, size_t len)
{
    return (strlen(o->name) == len && strncmp(o->name, name, len) == 0) ||
           (o->alias && strlen(o->alias) == len && strncmp(o->alias, name, len) == 0);
}

int cli_takes_value(const char *opt)
{
    size_t len = strcspn(opt, "=");
    for (const cli_opt *o = cli_global_opts; o->name; o++)
        if (opt_is(o, opt, len))
            return o->value != NULL;
    for (unsigned i = 0; i < cli_n_entries; i++)
        for (const cli_opt *o = cli_entries[i].opts; o->name; o++)
            if (opt_is(o, opt, len))
                return o->value != NULL;
    return 0;
}

static cJSON *opts_json(const cli_opt *opts)
{
    cJSON *a = cJSON_CreateArray();
    for (const cli_opt *o = opts; o->name; o++) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", o->name);
        cJSON_AddItemToObject(j, "alias", o->alias ? cJSON_CreateString(o->alias) : cJSON_CreateNull());
        cJSON_AddItemToObject(j, "value", o->value ? cJSON_CreateString(o->value) : cJSON_CreateNull());
        cJSON_AddStringToObject(j, "help", o->help);
        cJSON_AddItemToArray(a, j);
    }
    return a;
}

char *cli_interface_json(void)
{
    cJSON *root = cJSON_CreateObject(), *cmds = cJSON_CreateArray();
    cJSON_AddItemToObject(root, "global", opts_json(cli_global_opts));
    for (unsigned i = 0; i < cli_n_entries; i++) {
        const cli_entry *e = &cli_entries[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "command", e->command);
        cJSON_AddItemToObject(j, "sub", e->sub ? cJSON_CreateString(e->sub) : cJSON_CreateNull());
        cJSON_AddStringToObject(j, "args", e->args);
        cJSON_AddStringToObject(j, "summary", e->summary);
        cJSON_AddItemToObject(j, "options", opts_json(e->opts));
        cJSON_AddItemToArray(cmds, j);
    }
    cJSON_AddItemToObject(root, "commands", cmds);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}
