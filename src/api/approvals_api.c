/* The operator's side of the gate without a context (include/rexec.h, "Approvals"): list, get,
 * prune and the terminal confirmation on a workspace directory, for `rexec approve` and
 * `rexec approvals`. The workspace is loaded for its approvals/ and grant TTL only. */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "approval_record.h"
#include "approvals.h"
#include "approve_tty.h"
#include "err.h"
#include "rexec.h"
#include "workspace.h"

static void approval_clear(rexec_approval *a)
{
    const char **s[] = {&a->id,       &a->state,   &a->host,        &a->action,
                        &a->risk,     &a->created, &a->expires,     &a->approved_at,
                        &a->used_at,  &a->approved_by, &a->request_hash};
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        free((char *)*s[i]);
    memset(a, 0, sizeof(*a));
}

void rexec_approvals_free(rexec_approval *list, size_t n)
{
    for (size_t i = 0; list != NULL && i < n; i++)
        approval_clear(&list[i]);
    free(list);
}

/* dup_str: strdup that keeps NULL, counting a failure in *bad. */
static const char *dup_str(const char *s, int *bad)
{
    char *d = s ? strdup(s) : NULL;
    *bad |= s != NULL && d == NULL;
    return d;
}

static const char *dup_time(int64_t t, int *bad) /* NULL for 0 */
{
    char s[32];
    if (t == 0)
        return NULL;
    rx_approval_time_str(t, s);
    return dup_str(s, bad);
}

static int approval_fill(rexec_approval *a, const rx_challenge *c, int64_t now)
{
    int bad = 0;
    a->id = dup_str(c->id, &bad);
    a->state = dup_str(rx_challenge_expired(c, now) ? "expired" : rx_approval_state_name(c->state),
                   &bad);
    a->host = dup_str(c->host, &bad);
    a->action = dup_str(c->action, &bad);
    a->risk = dup_str(c->risk, &bad);
    a->created = dup_time(c->created, &bad);
    a->expires = dup_time(c->expires, &bad);
    a->approved_at = dup_time(c->approved_at, &bad);
    a->used_at = dup_time(c->used_at, &bad);
    a->approved_by = dup_str(c->approved_by, &bad);
    a->request_hash = dup_str(c->request_hash, &bad);
    return bad ? REXEC_ENOMEM : 0;
}

static int to_public(const rx_challenge *v, size_t n, rexec_approval **out, rexec_error *err)
{
    int64_t now = rx_approvals_now();
    rexec_approval *list = n ? calloc(n, sizeof(*list)) : NULL;
    if (n && list == NULL)
        return rx_fail(err, REXEC_ENOMEM, "approvals: out of memory");
    for (size_t i = 0; i < n; i++)
        if (approval_fill(&list[i], &v[i], now) != 0) {
            rexec_approvals_free(list, n);
            return rx_fail(err, REXEC_ENOMEM, "approvals: out of memory");
        }
    *out = list;
    return 0;
}

int rexec_approvals_list(const char *workspace_dir, int include_used, rexec_approval **out,
                         size_t *n, rexec_error *err)
{
    rx_ws *ws = NULL;
    rx_challenge *v = NULL;
    size_t k = 0;
    int r;
    *out = NULL;
    *n = 0;
    if ((r = rx_ws_load(&ws, workspace_dir, err)) != 0)
        return r;
    if ((r = rx_approvals_list(ws, include_used, &v, &k, err)) == 0 &&
        (r = to_public(v, k, out, err)) == 0)
        *n = k;
    rx_challenges_free(v, k);
    rx_ws_free(ws);
    return r;
}

int rexec_approvals_get(const char *workspace_dir, const char *id, rexec_approval **out,
                        rexec_error *err)
{
    rx_ws *ws = NULL;
    rx_challenge c;
    int r;
    *out = NULL;
    if ((r = rx_ws_load(&ws, workspace_dir, err)) != 0)
        return r;
    if ((r = rx_approvals_load(ws, id, &c, err)) == 0) {
        r = to_public(&c, 1, out, err);
        rx_challenge_free(&c);
    }
    rx_ws_free(ws);
    return r;
}

int rexec_approvals_prune(const char *workspace_dir, size_t *removed, rexec_error *err)
{
    rx_ws *ws = NULL;
    int r = rx_ws_load(&ws, workspace_dir, err);
    if (r == 0)
        r = rx_approvals_prune(ws, removed, err);
    rx_ws_free(ws);
    return r;
}

int rexec_approve_tty_at(const char *workspace_dir, const char *challenge_id, rexec_error *err)
{
    rx_ws *ws = NULL;
    int r = rx_ws_load(&ws, workspace_dir, err);
    if (r == 0)
        r = rx_approve_tty(ws, challenge_id, err);
    rx_ws_free(ws);
    return r;
}

int rexec_approvals_deny(const char *workspace_dir, const char *challenge_id,
                         const char *reason, rexec_error *err)
{
    char user[128];
    struct passwd *pw = getpwuid(getuid());
    rx_ws *ws = NULL;
    rx_challenge after;
    rexec_error e;
    int r = rx_ws_load(&ws, workspace_dir, err);
    if (pw != NULL && pw->pw_name != NULL)
        snprintf(user, sizeof(user), "%s", pw->pw_name);
    else
        snprintf(user, sizeof(user), "uid %u", (unsigned)getuid());
    rx_approval_decision d = {.approve = 0, .user = user, .uid = (long)getuid(), .via = "cli",
                              .note = reason ? reason : "denied by the operator"};
    if (r == 0 && (r = rx_approvals_decide(ws, challenge_id, &d, &after, err)) == 0) {
        if (rx_ws_audit_approval(ws, &after, &e) != 0)
            fprintf(stderr, "rexec: denied %s, but its audit record could not be written: %s\n",
                    challenge_id, e.msg);
        rx_challenge_free(&after);
    }
    rx_ws_free(ws);
    return r;
}
