/* `rexec approve ID` and `rexec approvals`: the operator's side of the risk gate. approve asks
 * at /dev/tty (src/approvals.c), never on stdin/stdout, so a pipe or a headless caller cannot
 * approve; it exits 0 when approved, 77 when not (no terminal, wrong code, unknown, expired or
 * used), 74 when approvals/ cannot be used, 78 for a bad workspace, 64 for usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "approvals.h"
#include "cli.h"
#include "rexec.h"
#include "workspace.h"

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

static int load_ws(const cli_global *g, rx_ws **ws)
{
    rexec_error e = {0};
    int r = rx_ws_load(ws, g->workspace, &e);
    return r == 0 ? 0 : fail_with(&e, r);
}

/* Already approved and still valid: say so rather than ask again. 1 when it was. */
static int already_approved(const rx_ws *ws, const char *id)
{
    char t[32];
    rexec_error e = {0};
    rx_challenge c;
    int r = 0;
    if (rx_approvals_load(ws, id, &c, &e) != 0)
        return 0; /* confirm reports it */
    if (c.state == RX_AP_APPROVED && !rx_challenge_expired(&c, rx_approvals_now())) {
        rx_approval_time_str(c.expires, t);
        fprintf(stderr, "rexec: %s is already approved (by %s); the caller runs it once with "
                "--grant %s until %s\n", c.id, c.approved_by ? c.approved_by : "?", c.id, t);
        r = 1;
    }
    rx_challenge_free(&c);
    return r;
}

int cli_approve(const cli_global *g, int argc, char **argv)
{
    rx_ws *ws = NULL;
    rexec_error e = {0};
    int r;

    if (help_asked(argc, argv))
        return 0;
    if (argc != 2 || argv[1][0] == '-')
        return cli_error(64, "usage: rexec approve CHALLENGE_ID (see `rexec help approve`)");
    if ((r = load_ws(g, &ws)) != 0)
        return r;
    if (already_approved(ws, argv[1]))
        r = 0;
    else if ((r = rx_approvals_confirm_tty(ws, argv[1], &e)) != 0)
        r = fail_with(&e, r);
    rx_ws_free(ws);
    return r;
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
                             "[--json] [--all] [--prune])", argv[i]);
    }
    return 0;
}

static const char *shown_state(const rx_challenge *c, int64_t now)
{
    return rx_challenge_expired(c, now) ? "expired" : rx_approval_state_name(c->state);
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

static void print_row(const rx_challenge *c, int64_t now)
{
    char created[32], expires[32], host[64], action[64], risk[4], by[64];
    rx_approval_time_str(c->created, created);
    rx_approval_time_str(c->expires, expires);
    printf("%-19s %-8s %-16s %-24s %-4s %-20s %-20s %s\n", c->id, shown_state(c, now),
           printable(c->host, host, sizeof(host)), printable(c->action, action, sizeof(action)),
           printable(c->risk, risk, sizeof(risk)), created, c->state == RX_AP_USED ? "-" : expires,
           c->approved_by ? printable(c->approved_by, by, sizeof(by)) : "-");
}

static int add_time(cJSON *o, const char *key, int64_t t)
{
    char s[32];
    if (t == 0)
        return cJSON_AddNullToObject(o, key) != NULL;
    rx_approval_time_str(t, s);
    return cJSON_AddStringToObject(o, key, s) != NULL;
}

static int print_json(const rx_challenge *c, int64_t now)
{
    cJSON *o = cJSON_CreateObject();
    char *text = NULL;
    int ok = o != NULL && cJSON_AddStringToObject(o, "id", c->id) &&
             cJSON_AddStringToObject(o, "state", shown_state(c, now)) &&
             cJSON_AddStringToObject(o, "host", c->host) &&
             cJSON_AddStringToObject(o, "action", c->action) &&
             cJSON_AddStringToObject(o, "risk", c->risk) && add_time(o, "created", c->created) &&
             add_time(o, "expires", c->expires) && add_time(o, "approved_at", c->approved_at) &&
             (c->approved_by ? cJSON_AddStringToObject(o, "approved_by", c->approved_by)
                             : cJSON_AddNullToObject(o, "approved_by")) &&
             add_time(o, "used_at", c->used_at) &&
             cJSON_AddStringToObject(o, "request_hash", c->request_hash) &&
             (text = cJSON_PrintUnformatted(o)) != NULL;
    if (ok)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
    return ok ? 0 : cli_error(71, "approvals: out of memory");
}

static int print_list(const rx_challenge *v, size_t n, int json)
{
    int64_t now = rx_approvals_now();
    int r = 0;
    if (!json && n == 0)
        printf("no pending challenges or unused grants\n");
    else if (!json)
        printf("%-19s %-8s %-16s %-24s %-4s %-20s %-20s %s\n", "ID", "STATE", "HOST", "ACTION",
               "RISK", "CREATED", "EXPIRES", "APPROVED_BY");
    for (size_t i = 0; i < n && r == 0; i++) {
        if (json)
            r = print_json(&v[i], now);
        else
            print_row(&v[i], now);
    }
    return r;
}

int cli_approvals(const cli_global *g, int argc, char **argv)
{
    list_opts o = {0};
    rx_ws *ws = NULL;
    rx_challenge *v = NULL;
    size_t n = 0, removed = 0;
    rexec_error e = {0};
    int r;

    if (help_asked(argc, argv))
        return 0;
    if ((r = list_args(argc, argv, &o)) != 0 || (r = load_ws(g, &ws)) != 0)
        return r;
    if (o.prune && (r = rx_approvals_prune(ws, &removed, &e)) != 0) {
        r = fail_with(&e, r);
        goto out;
    }
    if (o.prune)
        fprintf(stderr, "rexec: removed %zu expired or used approval(s)\n", removed);
    if ((r = rx_approvals_list(ws, o.all, &v, &n, &e)) != 0) {
        r = fail_with(&e, r);
        goto out;
    }
    r = print_list(v, n, o.json);
out:
    rx_challenges_free(v, n);
    rx_ws_free(ws);
    return r;
}
