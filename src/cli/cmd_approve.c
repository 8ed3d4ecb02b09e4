/* `rexec approve ID` and `rexec approvals`: the operator's side of the risk gate, through the
 * library's approvals API (include/rexec.h). approve asks at /dev/tty, never on stdin/stdout,
 * so a pipe or a headless caller cannot approve; it exits 0 when approved, 77 when not (no terminal, wrong code, unknown, expired or
 * used), 74 when approvals/ cannot be used, 78 for a bad workspace, 64 for usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "rexec.h"

static int help_asked(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            const char *text = cli_help_text(argv[0]);
            if (text != NULL)
                fputs(text, stdout);
            return 1;
        }
    return 0;
}

static int fail_with(const rexec_error *e, int r)
{
    return cli_error(rexec_err_exit_code(r), "%s", e->msg);
}

/* Names come from files in approvals/: nothing but printable ASCII reaches the terminal. */
static const char *printable(const char *s, char *buf, size_t cap)
{
    size_t i = 0;
    for (; s != NULL && s[i] != 0 && i + 1 < cap; i++)
        buf[i] = s[i] > 0x20 && s[i] < 0x7f ? s[i] : '?';
    buf[i] = 0;
    return buf;
}

/* Already approved and still valid: say so rather than ask again. 1 when it was. */
static int already_approved(const cli_global *g, const char *id)
{
    rexec_error e = {0};
    rexec_approval *a = NULL;
    char by[64];
    int r = 0;
    if (rexec_approvals_get(g->workspace, id, &a, &e) != 0)
        return 0; /* the confirmation reports it */
    if (strcmp(a->state, "approved") == 0) {
        char *shown_id = cli_redact(a->id);
        fprintf(stderr, "rexec: %s is already approved (by %s); the caller runs it once with "
                "--grant %s until %s\n", shown_id,
                a->approved_by ? printable(a->approved_by, by, sizeof(by)) : "?", shown_id,
                a->expires ? a->expires : "?");
        free(shown_id);
        r = 1;
    }
    rexec_approvals_free(a, 1);
    return r;
}

int cli_approve(const cli_global *g, int argc, char **argv)
{
    rexec_error e = {0};
    int r;

    if (help_asked(argc, argv))
        return 0;
    if (argc != 2 || argv[1][0] == '-')
        return cli_error(64, "usage: rexec approve CHALLENGE_ID (see `rexec help approve`)");
    if (already_approved(g, argv[1]))
        return 0;
    if ((r = rexec_approve_tty_at(g->workspace, argv[1], &e)) != 0)
        r = fail_with(&e, r);
    return r;
}

/* ---- rexec deny ---------------------------------------------------------------------------- */

#define DENY_REASON_MAX 1024

int cli_deny(const cli_global *g, int argc, char **argv)
{
    const char *id = NULL, *reason = NULL;
    rexec_error e = {0};
    int r;

    if (help_asked(argc, argv))
        return 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reason") == 0 && i + 1 < argc && reason == NULL)
            reason = argv[++i];
        else if (strncmp(argv[i], "--reason=", 9) == 0 && reason == NULL)
            reason = argv[i] + 9;
        else if (argv[i][0] != '-' && id == NULL)
            id = argv[i];
        else
            return cli_error(64, "deny: unexpected argument \"%s\" (usage: rexec deny "
                             "CHALLENGE_ID [--reason TEXT])", cli_arg(argv[i]));
    }
    if (id == NULL)
        return cli_error(64, "usage: rexec deny CHALLENGE_ID [--reason TEXT]");
    if (reason != NULL && strlen(reason) > DENY_REASON_MAX)
        return cli_error(64, "deny: --reason is longer than %d bytes", DENY_REASON_MAX);
    if ((r = rexec_approvals_deny(g->workspace, id, reason, &e)) != 0)
        return fail_with(&e, r);
    char *shown = cli_redact(id);
    fprintf(stderr, "rexec: denied %s: it can never be approved or used\n", shown);
    free(shown);
    return 0;
}

/* ---- rexec approvals ---------------------------------------------------------------------- */

typedef struct list_opts {
    int json, all, prune;
} list_opts;

static int list_args(int argc, char **argv, list_opts *o)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o->json = 1;
        else if (strcmp(argv[i], "--all") == 0)
            o->all = 1;
        else if (strcmp(argv[i], "--prune") == 0)
            o->prune = 1;
        else
            return cli_error(64, "approvals: unexpected argument \"%s\" (usage: rexec approvals "
                             "[--json] [--all] [--prune])", cli_arg(argv[i]));
    }
    return 0;
}

static void print_row(const rexec_approval *a)
{
    char host[64], action[64], risk[4], by[64];
    char *h = cli_redact(a->host ? a->host : "-"), *act = cli_redact(a->action ? a->action : "-");
    printf("%-19s %-8s %-16s %-24s %-4s %-20s %-20s %s\n", a->id, a->state,
           printable(h, host, sizeof(host)), printable(act, action, sizeof(action)),
           printable(a->risk, risk, sizeof(risk)), a->created ? a->created : "-",
           strcmp(a->state, "used") == 0 || !a->expires ? "-" : a->expires,
           a->approved_by ? printable(a->approved_by, by, sizeof(by)) : "-");
    free(h), free(act);
}

static int add_str(cJSON *o, const char *key, const char *v) /* null for NULL */
{
    return (v ? cJSON_AddStringToObject(o, key, v) : cJSON_AddNullToObject(o, key)) != NULL;
}

static int print_json(const rexec_approval *a)
{
    cJSON *o = cJSON_CreateObject();
    char *text = NULL;
    int ok = o != NULL && add_str(o, "id", a->id) && add_str(o, "state", a->state) &&
             add_str(o, "host", a->host) && add_str(o, "action", a->action) &&
             add_str(o, "risk", a->risk) && add_str(o, "created", a->created) &&
             add_str(o, "expires", a->expires) && add_str(o, "approved_at", a->approved_at) &&
             add_str(o, "approved_by", a->approved_by) && add_str(o, "used_at", a->used_at) &&
             add_str(o, "request_hash", a->request_hash) &&
             (text = cJSON_PrintUnformatted(o)) != NULL;
    char *shown = ok ? cli_redact_json_text(text) : NULL;
    if (shown)
        printf("%s\n", shown);
    free(shown);
    free(text);
    cJSON_Delete(o);
    return ok ? 0 : cli_error(71, "approvals: out of memory");
}

static int print_list(const rexec_approval *v, size_t n, int json)
{
    int r = 0;
    if (!json && n == 0)
        printf("no pending challenges or unused grants\n");
    else if (!json)
        printf("%-19s %-8s %-16s %-24s %-4s %-20s %-20s %s\n", "ID", "STATE", "HOST", "ACTION",
               "RISK", "CREATED", "EXPIRES", "APPROVED_BY");
    for (size_t i = 0; i < n && r == 0; i++) {
        if (json)
            r = print_json(&v[i]);
        else
            print_row(&v[i]);
    }
    return r;
}

int cli_approvals(const cli_global *g, int argc, char **argv)
{
    list_opts o = {0};
    rexec_approval *v = NULL;
    size_t n = 0, removed = 0;
    rexec_error e = {0};
    int r;

    if (help_asked(argc, argv))
        return 0;
    if (argc > 1 && (strcmp(argv[1], "watch") == 0 || strcmp(argv[1], "web") == 0))
        return cli_approvals_ui(g, argc - 1, argv + 1); /* cmd_approvals_ui.c */
    if ((r = list_args(argc, argv, &o)) != 0)
        return r;
    if (o.prune && (r = rexec_approvals_prune(g->workspace, &removed, &e)) != 0)
        return fail_with(&e, r);
    if (o.prune)
        fprintf(stderr, "rexec: removed %zu expired or used approval(s)\n", removed);
    if ((r = rexec_approvals_list(g->workspace, o.all, &v, &n, &e)) != 0)
        return fail_with(&e, r);
    r = print_list(v, n, o.json);
    rexec_approvals_free(v, n);
    return r;
}
