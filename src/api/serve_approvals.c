/* serve's approvals (serve_approvals.h).
 *
 * The hub keeps the challenges serve knows of (its calls made them, or a watcher saw them
 * pending): a decision through serve is told to the watchers at once; one made elsewhere (at a
 * terminal) and an expiry are seen by looking at the known challenges' files once a second
 * while there are any. The list is bounded (HUB_KNOWN_MAX, oldest forgotten first), and so is
 * what a watcher may leave unread (RX_WATCH_QUEUE_MAX: then it is dropped, never waited for). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "approval_record.h"
#include "approvals.h"
#include "err.h"
#include "jsonx.h"
#include "request.h"
#include "serve_approvals.h"
#include "serve_notify.h"

#define HUB_KNOWN_MAX 4096
#define HUB_TICK_MS 1000
#define HUB_NOTE_MAX 1024 /* a comment or reason */

typedef struct hub_watcher {
    void *cl;
    cJSON *id;
    struct hub_watcher *next;
} hub_watcher;

typedef struct hub_known {
    char id[RX_APPROVAL_ID_LEN + 1];
    rx_approval_state state; /* as last seen */
    int announced;           /* approval_pending went out */
    struct hub_known *next;
} hub_known;

typedef struct hub_batch { /* a fan-out request of serve whose gates have not all decided */
    char id[REXEC_BATCH_ID_SIZE];
    struct hub_batch *next;
} hub_batch;

typedef struct hub_wait {
    char id[RX_APPROVAL_ID_LEN + 1];
    uint64_t deadline; /* uv_now, ms */
    double wait_s;
    rx_hub_decided_fn fn;
    void *ud;
    struct hub_wait *next;
} hub_wait;

struct rx_hub {
    rexec_ctx *ctx;
    rx_hub_port port;
    uv_timer_t tick;
    int ticking, closing, handles;
    hub_watcher *watchers;
    hub_known *known;
    size_t n_known;
    hub_wait *waits;
    hub_batch *batches;
    rx_notifier *notify;
    void (*on_closed)(void *ud);
    void *closed_ud;
};

/* ---- the challenge as JSON --------------------------------------------------------------- */

static void add_time(cJSON *o, const char *key, int64_t t)
{
    char s[32];
    if (t == 0) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    rx_approval_time_str(t, s);
    cJSON_AddStringToObject(o, key, s);
}

static cJSON *hosts_json(const rx_challenge *c)
{
    cJSON *a = cJSON_CreateArray();
    if (c->n_targets == 0)
        cJSON_AddItemToArray(a, cJSON_CreateString(c->host ? c->host : "?"));
    for (size_t i = 0; i < c->n_targets; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(c->targets[i].host));
    return a;
}

static const char *state_now(const rx_challenge *c)
{
    return rx_challenge_expired(c, rx_approvals_now()) ? "expired"
                                                       : rx_approval_state_name(c->state);
}

/* A script as the call's shell gets it: one export line per secret of the action, the value
 * shown as [SECRET:NAME] (the value itself never leaves serve), then the command. */
static void add_script(cJSON *o, const char *key, const rx_challenge *c, const char *command)
{
    size_t n = strlen(command) + 1;
    for (size_t i = 0; i < c->n_secrets; i++)
        n += 2 * strlen(c->secrets[i]) + sizeof("export =[SECRET:]\n");
    char *s = malloc(n), *at = s;
    if (s == NULL)
        return; /* the caller's object lacks it: redacted JSON fails closed on no memory anyway */
    for (size_t i = 0; i < c->n_secrets; i++)
        at += snprintf(at, n - (size_t)(at - s), "export %s=[SECRET:%s]\n", c->secrets[i],
                       c->secrets[i]);
    snprintf(at, n - (size_t)(at - s), "%s", command);
    cJSON_AddStringToObject(o, key, s);
    free(s);
}

static void add_request(cJSON *o, const rx_challenge *c)
{
    cJSON *p = cJSON_AddObjectToObject(o, "params");
    for (size_t i = 0; p && i < c->n_params; i++)
        cJSON_AddStringToObject(p, c->param_names[i], c->param_values[i]);
    if (c->has_stdin) {
        cJSON *s = cJSON_AddObjectToObject(o, "stdin");
        cJSON_AddNumberToObject(s, "bytes", (double)c->stdin_len);
        rx_json_add_str_or_null(s, "sha256", c->stdin_sha256);
    } else {
        cJSON_AddNullToObject(o, "stdin");
    }
    cJSON *sec = cJSON_AddArrayToObject(o, "secrets");
    for (size_t i = 0; sec && i < c->n_secrets; i++)
        cJSON_AddItemToArray(sec, cJSON_CreateString(c->secrets[i]));
    if (c->rendered != NULL)
        add_script(o, "script", c, c->rendered);
    else
        cJSON_AddNullToObject(o, "script");
    cJSON *scripts = NULL;
    for (size_t i = 0; i < c->n_targets; i++)
        if (c->targets[i].rendered != NULL) {
            if (scripts == NULL)
                scripts = cJSON_AddObjectToObject(o, "scripts");
            add_script(scripts, c->targets[i].host, c, c->targets[i].rendered);
        }
}

static void add_decision(cJSON *o, const rx_challenge *c)
{
    if (c->state == RX_AP_APPROVED || c->approved_by != NULL) {
        rx_json_add_str_or_null(o, "approved_by", c->approved_by);
        rx_json_add_id_or_null(o, "approved_uid", c->approved_uid);
        rx_json_add_str_or_null(o, "via", c->approved_via);
        rx_json_add_str_or_null(o, "comment", c->comment);
    } else if (c->state == RX_AP_DENIED || c->state == RX_AP_WITHDRAWN) {
        rx_json_add_str_or_null(o, "denied_by", c->denied_by);
        rx_json_add_id_or_null(o, "denied_uid", c->denied_uid);
        rx_json_add_str_or_null(o, "via", c->denied_via);
        rx_json_add_str_or_null(o, "reason_denied", c->deny_reason);
    }
}

/* Everything an approver needs to decide, and no secret: every string goes through the
 * workspace's redactor before it leaves (a secret value typed into a parameter shows as
 * [REDACTED:NAME]). NULL: no memory. */
static cJSON *challenge_json(const rx_hub *h, const rx_challenge *c)
{
    cJSON *o = cJSON_CreateObject(), *shown;
    if (o == NULL)
        return NULL;
    cJSON_AddStringToObject(o, "challenge_id", c->id);
    cJSON_AddStringToObject(o, "state", state_now(c));
    cJSON_AddItemToObject(o, "hosts", hosts_json(c));
    rx_json_add_str_or_null(o, "action", c->action);
    add_request(o, c);
    rx_json_add_str_or_null(o, "risk", c->risk);
    rx_json_add_str_or_null(o, "declared_risk", c->declared_risk);
    rx_json_add_str_or_null(o, "reason", c->risk_why);
    if (c->requester_uid >= 0) {
        cJSON *r = cJSON_AddObjectToObject(o, "requester");
        rx_json_add_id_or_null(r, "uid", c->requester_uid);
        rx_json_add_str_or_null(r, "user", c->requester_user);
    } else {
        cJSON_AddNullToObject(o, "requester");
    }
    rx_json_add_str_or_null(o, "request_id", c->request_id);
    add_time(o, "created", c->created);
    add_time(o, "expires", c->expires);
    add_decision(o, c);
    shown = rx_redact_json(rx_ctx_redactor(h->ctx), o); /* the scan before it leaves */
    cJSON_Delete(o);
    return shown;
}

/* ---- watchers -------------------------------------------------------------------------- */

static void watcher_free(hub_watcher *w)
{
    cJSON_Delete(w->id);
    free(w);
}

/* One event to every watcher; one that has more than RX_WATCH_QUEUE_MAX unread is dropped. */
static void emit(rx_hub *h, const char *event, cJSON *body)
{
    for (hub_watcher **pp = &h->watchers, *w; (w = *pp) != NULL;) {
        if (h->port.queued(w->cl) > RX_WATCH_QUEUE_MAX) {
            *pp = w->next;
            h->port.drop(w->cl, "watch: this client fell behind (more than 1 MiB of events "
                                "unread): dropped");
            watcher_free(w);
            continue;
        }
        cJSON *o = cJSON_Duplicate(body, 1);
        if (o != NULL) {
            cJSON_AddItemToObject(o, "id", w->id ? cJSON_Duplicate(w->id, 1) : cJSON_CreateNull());
            cJSON_AddStringToObject(o, "type", "event");
            cJSON_AddStringToObject(o, "event", event);
            h->port.send(w->cl, o);
            cJSON_Delete(o);
        }
        pp = &w->next;
    }
}

static void emit_pending(rx_hub *h, const rx_challenge *c)
{
    cJSON *b = cJSON_CreateObject(), *ch = challenge_json(h, c);
    if (b != NULL && ch != NULL) {
        cJSON_AddItemToObject(b, "challenge", ch);
        ch = NULL;
        emit(h, "approval_pending", b);
    }
    cJSON_Delete(ch);
    cJSON_Delete(b);
}

static void emit_decided(rx_hub *h, const rx_challenge *c)
{
    int approved = c->state == RX_AP_APPROVED;
    cJSON *b = cJSON_CreateObject(), *shown;
    if (b == NULL)
        return;
    cJSON_AddStringToObject(b, "challenge_id", c->id);
    cJSON_AddItemToObject(b, "hosts", hosts_json(c));
    cJSON_AddStringToObject(b, "decision", approved ? "approved" : rx_approval_state_name(c->state));
    rx_json_add_str_or_null(b, "by", approved ? c->approved_by : c->denied_by);
    rx_json_add_id_or_null(b, "uid", approved ? c->approved_uid : c->denied_uid);
    rx_json_add_str_or_null(b, "via",
                            approved ? (c->approved_via ? c->approved_via : "tty") : c->denied_via);
    rx_json_add_str_or_null(b, approved ? "comment" : "reason",
                            approved ? c->comment : c->deny_reason);
    if ((shown = rx_redact_json(rx_ctx_redactor(h->ctx), b)) != NULL)
        emit(h, "approval_decided", shown);
    cJSON_Delete(shown);
    cJSON_Delete(b);
}

static void emit_expired(rx_hub *h, const rx_challenge *c)
{
    cJSON *b = cJSON_CreateObject();
    if (b == NULL)
        return;
    cJSON_AddStringToObject(b, "challenge_id", c->id);
    cJSON_AddItemToObject(b, "hosts", hosts_json(c));
    emit(h, "approval_expired", b);
    cJSON_Delete(b);
}

/* ---- the challenges serve knows ---------------------------------------------------------- */

static void on_tick(uv_timer_t *t);

static void tick_start(rx_hub *h)
{
    if (h->ticking || h->closing)
        return;
    h->ticking = 1;
    uv_timer_start(&h->tick, on_tick, HUB_TICK_MS, HUB_TICK_MS);
}

static hub_known *known_find(rx_hub *h, const char *id)
{
    for (hub_known *k = h->known; k; k = k->next)
        if (strcmp(k->id, id) == 0)
            return k;
    return NULL;
}

static void known_drop(rx_hub *h, const char *id)
{
    for (hub_known **pp = &h->known, *k; (k = *pp) != NULL; pp = &k->next)
        if (strcmp(k->id, id) == 0) {
            *pp = k->next;
            free(k);
            h->n_known--;
            return;
        }
}

/* Adds id (newest first); past the bound the oldest is forgotten. */
static hub_known *known_add(rx_hub *h, const char *id, rx_approval_state st)
{
    hub_known *k = known_find(h, id);
    if (k != NULL)
        return k;
    if (h->n_known >= HUB_KNOWN_MAX) {
        hub_known **pp = &h->known;
        while ((*pp)->next)
            pp = &(*pp)->next;
        free(*pp);
        *pp = NULL;
        h->n_known--;
    }
    if ((k = calloc(1, sizeof(*k))) == NULL)
        return NULL;
    snprintf(k->id, sizeof(k->id), "%s", id);
    k->state = st;
    k->next = h->known;
    h->known = k;
    h->n_known++;
    tick_start(h);
    return k;
}

/* ---- waits ------------------------------------------------------------------------------- */

/* Tells the requests waiting on id how it ended (each is removed before it is told: it may
 * wait again, or go). */
static void wake(rx_hub *h, const char *id, int approved, const char *why)
{
    for (;;) {
        hub_wait *found = NULL;
        for (hub_wait **pp = &h->waits; *pp; pp = &(*pp)->next)
            if (strcmp((*pp)->id, id) == 0) {
                found = *pp;
                *pp = found->next;
                break;
            }
        if (found == NULL)
            return;
        found->fn(found->ud, approved, why);
        free(found);
    }
}

static void why_of(const rx_challenge *c, char *why, size_t cap)
{
    if (c->state == RX_AP_DENIED)
        snprintf(why, cap, "challenge %s was denied by %s%s%s: nothing ran", c->id,
                 c->denied_by ? c->denied_by : "?", c->deny_reason ? ": " : "",
                 c->deny_reason ? c->deny_reason : "");
    else if (c->state == RX_AP_WITHDRAWN)
        snprintf(why, cap, "challenge %s was withdrawn (%s): nothing ran", c->id,
                 c->deny_reason ? c->deny_reason : "?");
    else if (c->state == RX_AP_USED)
        snprintf(why, cap, "challenge %s: its grant was used by another call: nothing ran", c->id);
    else
        snprintf(why, cap, "challenge %s expired before an approver decided: nothing ran", c->id);
}

/* A decision (or expiry) is known: the watchers hear of it, waiting requests go on. */
static void decided(rx_hub *h, const rx_challenge *c, int expired)
{
    char why[768];
    if (expired)
        emit_expired(h, c);
    else
        emit_decided(h, c);
    known_drop(h, c->id);
    why_of(c, why, sizeof(why));
    wake(h, c->id, !expired && c->state == RX_AP_APPROVED, why);
}

/* ---- the tick: terminal approvals, expiries, waits that ran out ---------------------------- */

static void withdraw_as(rx_hub *h, const char *id, const char *why);

static void poll_known(rx_hub *h)
{
    int64_t now = rx_approvals_now();
    for (hub_known *k = h->known, *next; k; k = next) {
        rx_challenge c;
        rexec_error e;
        next = k->next;
        if (rx_approvals_load(h->ctx->ws, k->id, &c, &e) != 0) {
            known_drop(h, k->id); /* pruned, or unreadable: nothing more to tell */
            continue;
        }
        if (rx_challenge_expired(&c, now) && c.state == RX_AP_PENDING)
            decided(h, &c, 1);
        else if (c.state != k->state && c.state != RX_AP_USED)
            decided(h, &c, 0);
        else if (c.state == RX_AP_USED || c.state == RX_AP_APPROVED)
            known_drop(h, k->id);
        rx_challenge_free(&c);
    }
}

static void poll_waits(rx_hub *h)
{
    uint64_t now = uv_now(h->ctx->loop);
    for (hub_wait *w = h->waits, *next; w; w = next) {
        next = w->next;
        if (now >= w->deadline) {
            char why[160], id[RX_APPROVAL_ID_LEN + 1];
            snprintf(id, sizeof(id), "%s", w->id);
            snprintf(why, sizeof(why), "no decision within wait_approval_s (%.10g s)",
                     w->wait_s);
            withdraw_as(h, id, why); /* wakes it, and any other wait on id */
            next = h->waits;         /* the list changed */
        }
    }
}

static void on_tick(uv_timer_t *t)
{
    rx_hub *h = t->data;
    poll_waits(h);
    poll_known(h);
    if (h->known == NULL && h->waits == NULL) {
        uv_timer_stop(&h->tick);
        h->ticking = 0;
    }
}

/* ---- notify ------------------------------------------------------------------------------ */

static void notify(rx_hub *h, const rx_challenge *c)
{
    const rx_serve_conf *sc = &h->ctx->ws->serve;
    cJSON *o;
    char *text;
    if (sc->notify_argv == NULL)
        return;
    if (h->notify == NULL && (h->notify = rx_notifier_new(h->ctx->loop)) == NULL)
        return;
    if ((o = challenge_json(h, c)) == NULL || (text = cJSON_PrintUnformatted(o)) == NULL) {
        cJSON_Delete(o);
        return;
    }
    rx_notify_start(h->notify, sc->notify_argv, sc->notify_timeout_s, text, c->id);
    free(text);
    cJSON_Delete(o);
}

/* ---- entry points ------------------------------------------------------------------------ */

void rx_hub_pending(rx_hub *h, const char *id)
{
    if (h == NULL || h->closing)
        return;
    rx_challenge c;
    rexec_error e;
    hub_known *k = known_find(h, id);
    if ((k != NULL && k->announced) || rx_approvals_load(h->ctx->ws, id, &c, &e) != 0)
        return;
    if (c.state == RX_AP_PENDING && (k = known_add(h, id, c.state)) != NULL) {
        k->announced = 1;
        emit_pending(h, &c);
        notify(h, &c);
    }
    rx_challenge_free(&c);
}

int rx_hub_batch_begin(rx_hub *h, const char *batch_id)
{
    hub_batch *b;
    if (h == NULL || batch_id == NULL || (b = calloc(1, sizeof(*b))) == NULL)
        return -1;
    snprintf(b->id, sizeof(b->id), "%s", batch_id);
    b->next = h->batches;
    h->batches = b;
    return 0;
}

void rx_hub_batch_end(rx_hub *h, const char *batch_id)
{
    for (hub_batch **pp = h && batch_id ? &h->batches : NULL, *b; pp && (b = *pp) != NULL;
         pp = &b->next)
        if (strcmp(b->id, batch_id) == 0) {
            *pp = b->next;
            free(b);
            return;
        }
}

/* A fan-out's challenge while its request's hosts are still being decided: its host list may
 * still grow, so it is neither listed, replayed nor approvable through serve yet. */
static int still_gating(const rx_hub *h, const rx_challenge *c)
{
    for (const hub_batch *b = h->batches; c->request_id != NULL && b; b = b->next)
        if (strcmp(b->id, c->request_id) == 0)
            return 1;
    return 0;
}

int rx_hub_wait(rx_hub *h, const char *id, double wait_s, rx_hub_decided_fn fn, void *ud)
{
    if (h == NULL || h->closing)
        return -1;
    hub_wait *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return -1;
    snprintf(w->id, sizeof(w->id), "%s", id);
    w->wait_s = wait_s;
    w->deadline = uv_now(h->ctx->loop) + (uint64_t)(wait_s * 1000);
    w->fn = fn;
    w->ud = ud;
    w->next = h->waits;
    h->waits = w;
    known_add(h, id, RX_AP_PENDING);
    tick_start(h);
    return 0;
}

void rx_hub_unwait(rx_hub *h, void *ud)
{
    if (h == NULL)
        return;
    for (hub_wait **pp = &h->waits, *w; (w = *pp) != NULL;)
        if (w->ud == ud) {
            *pp = w->next;
            free(w);
        } else {
            pp = &w->next;
        }
}

static void withdraw_as(rx_hub *h, const char *id, const char *why)
{
    rx_approval_decision d = {.approve = 0, .user = "serve", .uid = -1, .via = "serve",
                              .note = why, .withdraw = 1};
    rx_challenge c;
    rexec_error e;
    int r = rx_approvals_decide(h->ctx->ws, id, &d, &c, &e);
    if (r == 0) {
        if (rx_ctx_audit_approval(h->ctx, &c, &e) != 0)
            fprintf(stderr, "rexec serve: the audit record of withdrawing %s: %s\n", id, e.msg);
        decided(h, &c, 0);
        rx_challenge_free(&c);
        return;
    }
    if (r == 1)
        rx_challenge_free(&c);
    /* approved or decided meanwhile: the waiters hear what it is now */
    if (rx_approvals_load(h->ctx->ws, id, &c, &e) == 0) {
        decided(h, &c, rx_challenge_expired(&c, rx_approvals_now()));
        rx_challenge_free(&c);
    } else {
        char m[600];
        snprintf(m, sizeof(m), "challenge %s: %.500s: nothing ran", id, e.msg);
        wake(h, id, 0, m);
    }
}

void rx_hub_withdraw(rx_hub *h, const char *id, const char *why)
{
    if (h == NULL)
        return;
    withdraw_as(h, id, why);
}

void rx_hub_forget(rx_hub *h, void *cl)
{
    if (h == NULL)
        return;
    for (hub_watcher **pp = &h->watchers, *w; (w = *pp) != NULL;)
        if (w->cl == cl) {
            *pp = w->next;
            watcher_free(w);
        } else {
            pp = &w->next;
        }
}

int rx_hub_watching(const rx_hub *h, const void *cl)
{
    if (h == NULL)
        return 0;
    for (const hub_watcher *w = h->watchers; w; w = w->next)
        if (w->cl == cl)
            return 1;
    return 0;
}

/* ---- the ops ----------------------------------------------------------------------------- */

static cJSON *reply_head(const cJSON *root, const char *type)
{
    cJSON *o = cJSON_CreateObject();
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    cJSON_AddItemToObject(o, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

/* challenge_id: required or not; malformed is 65 (it names no file). */
static int get_id(const cJSON *root, int required, const char **id, rexec_error *err)
{
    int r = rx_json_get_string(root, "challenge_id", "", required, id, REXEC_EREQUEST, err);
    if (r == 0 && *id != NULL && !rx_approval_id_ok(*id))
        return rx_fail(err, REXEC_EREQUEST, "challenge_id: not a challenge id (ch- and 16 "
                                            "lowercase hex digits)");
    return r;
}

static int get_note(const cJSON *root, const char *key, const char **out, rexec_error *err)
{
    int r = rx_json_get_string(root, key, "", 0, out, REXEC_EREQUEST, err);
    if (r == 0 && *out != NULL && strlen(*out) > HUB_NOTE_MAX)
        return rx_fail(err, REXEC_EREQUEST, "%s: longer than %d bytes", key, HUB_NOTE_MAX);
    return r;
}

/* via: how the approver's front end took the decision, recorded with it. "socket" (default) or
 * "web" (`rexec approvals web`, which runs as the approver: the uid is the proof either way). */
static int get_via(const cJSON *root, const char **via, rexec_error *err)
{
    const char *v = NULL;
    int r = rx_json_get_string(root, "via", "", 0, &v, REXEC_EREQUEST, err);
    if (r == 0 && v != NULL && strcmp(v, "socket") != 0 && strcmp(v, "web") != 0)
        return rx_fail(err, REXEC_EREQUEST, "via: \"socket\" or \"web\"");
    *via = r == 0 && v != NULL ? v : "socket";
    return r;
}

static int op_list(rx_hub *h, void *cl, const cJSON *root, rexec_error *err)
{
    const char *id = NULL;
    rx_challenge *v = NULL, one;
    size_t n = 0;
    int r;
    if ((r = rx_serve_check_keys(root, "approvals", err)) != 0 || (r = get_id(root, 0, &id, err)))
        return r;
    if (id != NULL && (r = rx_approvals_load(h->ctx->ws, id, &one, err)) != 0)
        return r; /* unknown: 77 */
    if (id == NULL && (r = rx_approvals_list(h->ctx->ws, 0, &v, &n, err)) != 0)
        return r;
    cJSON *o = reply_head(root, "approvals"), *a = cJSON_AddArrayToObject(o, "approvals");
    if (id != NULL)
        cJSON_AddItemToArray(a, challenge_json(h, &one));
    for (size_t i = 0; i < n; i++)
        if (v[i].state == RX_AP_PENDING && !rx_challenge_expired(&v[i], rx_approvals_now()) &&
            !still_gating(h, &v[i]))
            cJSON_AddItemToArray(a, challenge_json(h, &v[i]));
    cJSON_AddNumberToObject(o, "notify_failures", (double)rx_notifier_failures(h->notify));
    h->port.send(cl, o);
    cJSON_Delete(o);
    if (id != NULL)
        rx_challenge_free(&one);
    rx_challenges_free(v, n);
    return 0;
}

/* Not a fan-out's challenge still growing (still_gating). */
static int approvable_now(const rx_hub *h, const char *id, rexec_error *err)
{
    rx_challenge c;
    int r = rx_approvals_load(h->ctx->ws, id, &c, err), gating = r == 0 && still_gating(h, &c);
    if (r == 0)
        rx_challenge_free(&c);
    if (r != 0 || !gating)
        return r;
    return rx_fail(err, REXEC_EDENIED, "challenge %s: its request's hosts are still being "
                   "decided; approve it once it is announced (approval_pending)", id);
}

static int op_decide(rx_hub *h, void *cl, const rx_peer *p, const cJSON *root, int approve,
                     rexec_error *err)
{
    const char *op = approve ? "approve" : "deny", *id = NULL, *note = NULL;
    rx_approval_decision d = {.approve = approve, .user = p->user, .uid = (long)p->uid,
                              .via = "socket", .not_self = 1};
    rx_challenge c;
    int r;
    if ((r = rx_serve_check_keys(root, op, err)) != 0 || (r = get_id(root, 1, &id, err)) != 0 ||
        (r = get_note(root, approve ? "comment" : "reason", &note, err)) != 0 ||
        (r = get_via(root, &d.via, err)) != 0)
        return r;
    d.note = note ? note : approve ? NULL : "denied by the operator";
    if (approve && (r = approvable_now(h, id, err)) != 0)
        return r;
    if ((r = rx_approvals_decide(h->ctx->ws, id, &d, &c, err)) == 1) {
        r = rx_fail(err, REXEC_EDENIED, "challenge %s was already approved by %s", id,
                    c.approved_by ? c.approved_by : "?");
        rx_challenge_free(&c);
    }
    if (r != 0)
        return r;
    if (rx_ctx_audit_approval(h->ctx, &c, err) != 0)
        fprintf(stderr, "rexec serve: the audit record of the decision on %s: %s\n", id,
                err->msg); /* decided all the same: the challenge file records it */
    cJSON *o = reply_head(root, approve ? "approved" : "denied");
    cJSON_AddStringToObject(o, "challenge_id", c.id);
    cJSON_AddItemToObject(o, "hosts", hosts_json(&c));
    cJSON_AddStringToObject(o, approve ? "approved_by" : "denied_by", p->user);
    cJSON_AddNumberToObject(o, approve ? "approved_uid" : "denied_uid", (double)p->uid);
    cJSON_AddStringToObject(o, "via", d.via);
    if (approve)
        add_time(o, "expires", c.expires);
    h->port.send(cl, o);
    cJSON_Delete(o);
    decided(h, &c, 0);
    rx_challenge_free(&c);
    return 0;
}

static int op_watch(rx_hub *h, void *cl, const cJSON *root, rexec_error *err)
{
    rx_challenge *v = NULL;
    size_t n = 0;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    int r = rx_serve_check_keys(root, "watch", err);
    if (r != 0)
        return r;
    if (rx_hub_watching(h, cl))
        return rx_fail(err, REXEC_EREQUEST, "watch: this connection watches already");
    hub_watcher *w = calloc(1, sizeof(*w));
    if (w == NULL || (id && (w->id = cJSON_Duplicate(id, 1)) == NULL)) {
        free(w);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    if ((r = rx_approvals_list(h->ctx->ws, 0, &v, &n, err)) != 0) {
        watcher_free(w);
        return r;
    }
    cJSON *o = reply_head(root, "watching");
    h->port.send(cl, o);
    cJSON_Delete(o);
    /* what is pending now, to this watcher only: then everything as it happens */
    hub_watcher *others = h->watchers;
    h->watchers = w;
    w->cl = cl;
    for (size_t i = 0; i < n && h->watchers == w; i++)
        if (v[i].state == RX_AP_PENDING && !rx_challenge_expired(&v[i], rx_approvals_now()) &&
            !still_gating(h, &v[i])) {
            hub_known *k = known_add(h, v[i].id, RX_AP_PENDING);
            if (k != NULL)
                k->announced = 1;
            emit_pending(h, &v[i]);
        }
    if (h->watchers == w)
        w->next = others;
    else
        h->watchers = others; /* dropped already (it fell behind): w is gone */
    rx_challenges_free(v, n);
    return 0;
}

int rx_hub_op(rx_hub *h, void *cl, const rx_peer *p, const cJSON *root, const char *op,
              rexec_error *err)
{
    if (h == NULL || h->closing)
        return rx_fail(err, REXEC_ENOMEM, "%s: serve's approvals are off (out of memory at "
                       "start, or stopping)", op);
    if (strcmp(op, "approvals") == 0)
        return op_list(h, cl, root, err);
    if (strcmp(op, "approve") == 0 || strcmp(op, "deny") == 0)
        return op_decide(h, cl, p, root, op[0] == 'a', err);
    return op_watch(h, cl, root, err);
}

/* ---- life ---------------------------------------------------------------------------------- */

rx_hub *rx_hub_new(rexec_ctx *ctx, const rx_hub_port *port)
{
    rx_hub *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->ctx = ctx;
    h->port = *port;
    uv_timer_init(ctx->loop, &h->tick);
    h->tick.data = h;
    h->handles = 1;
    return h;
}

static void hub_maybe_closed(rx_hub *h)
{
    if (h->handles > 0)
        return;
    void (*cb)(void *) = h->on_closed;
    void *ud = h->closed_ud;
    while (h->watchers) {
        hub_watcher *w = h->watchers;
        h->watchers = w->next;
        watcher_free(w);
    }
    while (h->known) {
        hub_known *k = h->known;
        h->known = k->next;
        free(k);
    }
    while (h->waits) {
        hub_wait *w = h->waits;
        h->waits = w->next;
        free(w);
    }
    while (h->batches) {
        hub_batch *b = h->batches;
        h->batches = b->next;
        free(b);
    }
    free(h);
    if (cb)
        cb(ud);
}

static void on_tick_closed(uv_handle_t *t)
{
    rx_hub *h = t->data;
    h->handles--;
    hub_maybe_closed(h);
}

static void on_notifier_closed(void *ud)
{
    rx_hub *h = ud;
    h->handles--;
    hub_maybe_closed(h);
}

void rx_hub_close(rx_hub *h, void (*on_closed)(void *ud), void *ud)
{
    h->closing = 1;
    h->on_closed = on_closed;
    h->closed_ud = ud;
    if (h->notify != NULL) {
        h->handles++;
        rx_notifier_close(h->notify, on_notifier_closed, h);
        h->notify = NULL;
    }
    uv_close((uv_handle_t *)&h->tick, on_tick_closed);
}
