/* The risk gate. Parameters are mapped and validated first (a bad or out-of-scope value never
 * reaches a decision), then the action's effective risk is held against the host's two limits:
 *
 *     risk <= allow            ALLOW_LEVEL
 *     allow < risk <= approve  a single-use grant: ALLOW_GRANT, a GRANT_* denial, or a pending
 *                              challenge (REQUIRES_APPROVAL)
 *     risk > approve           DENY_LEVEL
 *
 * Every outcome is a complete rx_decision: the orchestrator audits denials and pending
 * challenges like runs. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "approvals.h"
#include "err.h"
#include "gate.h"
#include "jsonx.h"
#include "params.h"

#define HASH_TAG "rexec-request-v1"
#define QUOTE_MAX 64

/* Our own names rather than rx_risk_name: the gate links without the workspace loader. */
static const char *risk_str(rx_risk r)
{
    static const char *const names[] = {"L0", "L1", "L2", "L3"};
    return (unsigned)r <= RX_L3 ? names[r] : "L?";
}

/* Why the action has its effective risk, for messages and the challenge. */
static const char *risk_why(const rx_action *a, char *buf, size_t cap)
{
    if (a->risk_floor_reason != NULL && a->risk > a->declared_risk)
        snprintf(buf, cap, "raised from %s: %s", risk_str(a->declared_risk),
                 a->risk_floor_reason);
    else if (a->state_changing)
        snprintf(buf, cap, "state_changing");
    else if (a->risk_floor_reason != NULL)
        snprintf(buf, cap, "%s", a->risk_floor_reason);
    else
        snprintf(buf, cap, "declared");
    return buf;
}

/* d->message, cut to fit: messages name things, and a cut name still says which. */
static void say(rx_decision *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(rx_decision *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->message, sizeof(d->message), fmt, ap);
    va_end(ap);
}

/* ---- Parameters ------------------------------------------------------------------------- */

static void param_names(const rx_action *a, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < a->n_params && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? ", " : "", a->params[i].name);
    if (a->n_params == 0)
        snprintf(buf, cap, "none");
}

static long find_spec(const rx_action *a, const char *name)
{
    for (size_t i = 0; i < a->n_params; i++)
        if (strcmp(a->params[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* Puts each given parameter at its spec's index; unknown and repeated names are errors. */
static int place_given(const rx_action *a, const rexec_param *given, size_t n_given,
                       rexec_param *v, unsigned char *seen, rexec_error *err)
{
    char q[QUOTE_MAX + 16], names[512];
    for (size_t i = 0; i < n_given; i++) {
        const char *name = given[i].name ? given[i].name : "";
        long k = find_spec(a, name);
        rx_msg_quote(q, sizeof(q), name, strlen(name), QUOTE_MAX);
        if (k < 0) {
            param_names(a, names, sizeof(names));
            return rx_fail(err, REXEC_EREQUEST, "action %s has no parameter %s (it takes: %s)",
                           a->name, q, names);
        }
        if (seen[k])
            return rx_fail(err, REXEC_EREQUEST, "action %s: parameter %s given twice", a->name, q);
        if (given[i].value == NULL)
            return rx_fail(err, REXEC_EREQUEST, "action %s: parameter %s has no value", a->name, q);
        seen[k] = 1;
        v[k] = (rexec_param){a->params[k].name, given[i].value, given[i].value_len};
    }
    return 0;
}

/* Omitted parameters take their default; a required one without a value is an error. */
static int fill_omitted(const rx_action *a, rexec_param *v, const unsigned char *seen,
                        rexec_error *err)
{
    for (size_t k = 0; k < a->n_params; k++) {
        const rx_param_spec *ps = &a->params[k];
        if (seen[k])
            continue;
        if (ps->default_value != NULL)
            v[k] = (rexec_param){ps->name, ps->default_value, strlen(ps->default_value)};
        else if (ps->required)
            return rx_fail(err, REXEC_EREQUEST, "action %s: missing required parameter \"%s\"",
                           a->name, ps->name);
        else /* optional without a default: the empty word (validated like any value) */
            v[k] = (rexec_param){ps->name, "", 0};
    }
    return 0;
}

static void scope_denial(const rx_action *a, const rexec_error *err, rx_decision *d)
{
    if (d == NULL)
        return;
    memset(d, 0, sizeof(*d));
    d->verdict = RX_DENY;
    d->reason = "DENY_SCOPE";
    d->effective_risk = a->risk;
    say(d, "action %s: %s", a->name, err->msg);
}

int rx_gate_resolve_params(const rx_ws *ws, const rx_action *action, const rexec_param *given,
                           size_t n_given, rexec_param **values, rx_decision *out_decision,
                           rexec_error *err)
{
    size_t n = action->n_params ? action->n_params : 1;
    rexec_param *v = calloc(n, sizeof(*v));
    unsigned char *seen = calloc(n, 1);
    int r = REXEC_ENOMEM;

    if (v == NULL || seen == NULL) {
        rx_fail(err, r, "out of memory");
        goto out;
    }
    if ((r = place_given(action, given, given ? n_given : 0, v, seen, err)) != 0 ||
        (r = fill_omitted(action, v, seen, err)) != 0)
        goto out;
    for (size_t k = 0; k < action->n_params && r == 0; k++)
        r = rx_param_validate(&action->params[k], v[k].value, v[k].value_len,
                              ws ? ws->scope : NULL, err);
    if (r == REXEC_EDENIED)
        scope_denial(action, err, out_decision);
out:
    free(seen);
    if (r != 0) {
        free(v);
        v = NULL;
    }
    *values = v;
    return r;
}

/* ---- The request hash ------------------------------------------------------------------- */

/* One field: its length as 8 bytes big-endian, then its bytes. No two different field lists
 * encode to the same bytes, whatever the fields hold. */
static int hash_field(EVP_MD_CTX *ctx, const void *p, size_t len)
{
    unsigned char n[8];
    for (int i = 0; i < 8; i++)
        n[i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
    return EVP_DigestUpdate(ctx, n, 8) == 1 && (len == 0 || EVP_DigestUpdate(ctx, p, len) == 1);
}

static int hash_str(EVP_MD_CTX *ctx, const char *s)
{
    return hash_field(ctx, s ? s : "", s ? strlen(s) : 0);
}

/* A count, as a field of its own, so lists of different lengths never run into each other. */
static int hash_count(EVP_MD_CTX *ctx, size_t n)
{
    char s[32];
    snprintf(s, sizeof(s), "%zu", n);
    return hash_str(ctx, s);
}

static int hash_request(EVP_MD_CTX *ctx, const rx_gate_input *in, const char *stdin_hex)
{
    const rx_action *a = in->action;
    int ok = (a->n_params == 0 || in->values != NULL) && hash_str(ctx, HASH_TAG) &&
             hash_str(ctx, in->host->name) &&
             hash_str(ctx, a->name) && hash_count(ctx, a->n_params);
    for (size_t i = 0; ok && i < a->n_params; i++)
        ok = hash_str(ctx, a->params[i].name) &&
             hash_field(ctx, in->values[i].value, in->values[i].value_len);
    ok = ok && hash_str(ctx, stdin_hex ? "stdin-sha256" : "stdin-none") && hash_str(ctx, stdin_hex);
    ok = ok && hash_count(ctx, a->n_secrets);
    for (size_t i = 0; ok && i < a->n_secrets; i++)
        ok = hash_str(ctx, a->secrets[i]);
    /* What the operator saw is the template expanded with the parameters: an edit of the
     * template (or of where it runs) in rexec.json after the approval is drift too. */
    return ok && hash_str(ctx, a->command) && hash_str(ctx, a->cwd ? "cwd" : "no-cwd") &&
           hash_str(ctx, a->cwd);
}

static void request_hash_with(const rx_gate_input *in, const char *stdin_hex, char out[65])
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    out[0] = 0; /* on failure: empty, which no challenge holds */
    if (ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
        hash_request(ctx, in, stdin_hex) && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 &&
        mdlen == 32)
        rx_hex_encode(md, 32, out);
    EVP_MD_CTX_free(ctx);
}

static int gate_has_stdin(const rx_gate_input *in)
{
    return in->stdin_data != NULL || in->stdin_hex != NULL || in->stdin_hash != NULL;
}

static int stdin_digest(const rx_gate_input *in, char out[65], rexec_error *err)
{
    out[0] = 0;
    if (in->stdin_hex != NULL)
        snprintf(out, 65, "%s", in->stdin_hex);
    else if (in->stdin_data != NULL)
        rx_sha256_hex(in->stdin_data, in->stdin_len, out);
    else if (in->stdin_hash != NULL)
        return in->stdin_hash(in->ud, out, err);
    return 0;
}

void rx_gate_request_hash(const rx_gate_input *in, char out[65])
{
    char sh[65];
    rx_gate_input direct = *in; /* stdin_hex or stdin_data only: no file is read from here */
    direct.stdin_hash = NULL;
    stdin_digest(&direct, sh, NULL);
    request_hash_with(in, gate_has_stdin(in) ? sh : NULL, out);
}

/* ---- Decisions -------------------------------------------------------------------------- */

static int decided(rx_decision *d, rx_verdict v, const char *reason)
{
    d->verdict = v;
    d->reason = reason;
    return 0;
}

/* "action svc.restart is L2 (state_changing); host lab1 runs up to L1 without approval" */
static int level_msg(const rx_gate_input *in, char *buf, size_t cap)
{
    char why[96];
    return snprintf(buf, cap, "action %s is %s (%s); host %s runs up to %s without approval",
                    in->action->name, risk_str(in->action->risk),
                    risk_why(in->action, why, sizeof(why)), in->host->name,
                    risk_str(in->host->allow));
}

static int deny_level(const rx_gate_input *in, rx_decision *d)
{
    char lv[384];
    level_msg(in, lv, sizeof(lv));
    if (in->host->approve > in->host->allow)
        say(d, "%s and up to %s with approval: denied", lv, risk_str(in->host->approve));
    else
        say(d, "%s and approves nothing above: denied", lv);
    return decided(d, RX_DENY, "DENY_LEVEL");
}

static int deny_containment(const rx_gate_input *in, rx_decision *d)
{
    static const char *const names[] = {"none", "process-group", "cgroup", "pid-namespace"};
    rx_containment want = in->action->containment, have = in->host->max_containment;
    say(d, "action %s requires containment %s; host %s offers at most %s: denied",
        in->action->name, (unsigned)want <= 3 ? names[want] : "?", in->host->name,
        (unsigned)have <= 3 ? names[have] : "?");
    return decided(d, RX_DENY, "DENY_CONTAINMENT");
}

static int allow_level(const rx_gate_input *in, rx_decision *d)
{
    char lv[384];
    level_msg(in, lv, sizeof(lv));
    if (in->grant_id != NULL)
        say(d, "%s (grant %.*s not needed, not used)", lv, RX_APPROVAL_ID_LEN, in->grant_id);
    else
        say(d, "%s", lv);
    return decided(d, RX_ALLOW, "ALLOW_LEVEL");
}

typedef struct challenge_hook {
    const rx_gate_input *in;
    rx_decision *d;
    const char *lv;
} challenge_hook;

/* The decision is known once the id is: the caller records it before the file exists. */
static int before_challenge(void *ud, const char *id, rexec_error *err)
{
    challenge_hook *h = ud;
    snprintf(h->d->challenge_id, sizeof(h->d->challenge_id), "%s", id);
    say(h->d, "%s: approval required (challenge %s)", h->lv, id);
    decided(h->d, RX_REQUIRES_APPROVAL, "REQUIRES_APPROVAL");
    return h->in->on_challenge ? h->in->on_challenge(h->in->ud, h->d, err) : 0;
}

/* A fan-out's later host joins the request's challenge: its refusal is recorded (on_challenge)
 * with that id, then it is added to the file. 0 when it joined, 1 when there is nothing to join
 * (or the challenge was decided meanwhile), or an error. */
static int join_challenge(const rx_gate_input *in, const char *hash, const char *lv,
                          rx_decision *d, rexec_error *err)
{
    const char *id = in->fanout->id;
    int r;
    if (id[0] == 0)
        return 1;
    snprintf(d->challenge_id, sizeof(d->challenge_id), "%s", id);
    say(d, "%s: approval required (challenge %s, for every host of this request)", lv, id);
    decided(d, RX_REQUIRES_APPROVAL, "REQUIRES_APPROVAL");
    if (in->on_challenge && (r = in->on_challenge(in->ud, d, err)) != 0)
        return r;
    return rx_approvals_add_target(in->ws, id, in->host->name, hash, in->rendered, in->redactor,
                                   err);
}

/* Writes a pending challenge bound to the request (unless eval_only) and asks for approval. */
static int require_approval(const rx_gate_input *in, const char *hash, const char *stdin_hex,
                            rx_decision *d, rexec_error *err)
{
    char lv[384], why[96];
    const rx_action *a = in->action;
    rx_challenge_in c = {
        .host = in->host->name, .action = a->name, .risk = a->risk,
        .declared_risk = a->declared_risk, .risk_why = risk_why(a, why, sizeof(why)),
        .request_hash = hash, .rendered = in->rendered, .params = in->values,
        .n_params = a->n_params, .has_stdin = gate_has_stdin(in), .stdin_sha256 = stdin_hex,
        .stdin_len = in->stdin_len, .secrets = a->secrets, .n_secrets = a->n_secrets,
        .redactor = in->redactor, .before_write = before_challenge,
        .requester_uid = in->requester_uid, .requester_user = in->requester_user,
        .request_id = in->request_id};
    challenge_hook hook = {in, d, lv};
    int r;

    c.ud = &hook;
    level_msg(in, lv, sizeof(lv));
    if (in->eval_only) {
        say(d, "%s: approval required (eval: no challenge written)", lv);
        return decided(d, RX_REQUIRES_APPROVAL, "REQUIRES_APPROVAL");
    }
    if (in->fanout != NULL) {
        pthread_mutex_lock(&in->fanout->mu);
        r = join_challenge(in, hash, lv, d, err);
        if (r == 1 && (r = rx_approvals_create(in->ws, &c, d->challenge_id, err)) == 0)
            snprintf(in->fanout->id, sizeof(in->fanout->id), "%s", d->challenge_id);
        pthread_mutex_unlock(&in->fanout->mu);
    } else {
        r = rx_approvals_create(in->ws, &c, d->challenge_id, err);
    }
    if (r != 0) {
        memset(d, 0, sizeof(*d));
        d->effective_risk = a->risk;
        return r;
    }
    if (d->message[0] == 0 || strstr(d->message, "for every host") == NULL)
        say(d, "%s: approval required (challenge %s)", lv, d->challenge_id);
    return decided(d, RX_REQUIRES_APPROVAL, "REQUIRES_APPROVAL");
}

/* ---- Grants ----------------------------------------------------------------------------- */

static int str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static int params_differ(const rx_gate_input *in, const rx_challenge *c, char *what, size_t cap)
{
    const rx_action *a = in->action;
    if (c->n_params != a->n_params) {
        snprintf(what, cap, "the action's parameters changed");
        return 1;
    }
    for (size_t i = 0; i < a->n_params; i++) {
        const rexec_param *v = &in->values[i];
        if (!str_eq(c->param_names[i], a->params[i].name) ||
            strlen(c->param_values[i]) != v->value_len ||
            memcmp(c->param_values[i], v->value, v->value_len) != 0) {
            snprintf(what, cap, "parameter \"%s\" differs", a->params[i].name);
            return 1;
        }
    }
    return 0;
}

/* Names the first thing that differs between the approved request and this one. */
static void mismatch_what(const rx_gate_input *in, const rx_challenge *c, const char *stdin_hex,
                          char *what, size_t cap)
{
    if (!str_eq(c->host, in->host->name))
        snprintf(what, cap, "it was approved for host %s, not %s", c->host, in->host->name);
    else if (!str_eq(c->action, in->action->name))
        snprintf(what, cap, "it was approved for action %s, not %s", c->action,
                 in->action->name);
    else if (params_differ(in, c, what, cap))
        return;
    else if (c->has_stdin != gate_has_stdin(in) ||
             (c->has_stdin && !str_eq(c->stdin_sha256, stdin_hex)))
        snprintf(what, cap, "the stdin differs");
    else
        snprintf(what, cap, "the action's command, directory or secrets changed in rexec.json");
}

/* Checks a loaded grant against this request; 1 when it may be consumed, 0 when d says why not. */
static int grant_usable(const rx_gate_input *in, const rx_challenge *c, const char *hash,
                        const char *stdin_hex, rx_decision *d)
{
    char what[256];
    const char *id = c->id;
    if (c->state == RX_AP_USED) {
        say(d, "grant %s was already used: a grant runs once", id);
        decided(d, RX_DENY, "GRANT_USED");
        return 0;
    }
    if (rx_challenge_expired(c, rx_approvals_now())) {
        say(d, "%s %s expired: ask for a new approval",
            c->state == RX_AP_APPROVED ? "grant" : "challenge", id);
        decided(d, RX_DENY, "GRANT_EXPIRED");
        return 0;
    }
    if (c->state == RX_AP_DENIED || c->state == RX_AP_WITHDRAWN) {
        say(d, "challenge %s was %s%s%s%s: it can never be used", id,
            c->state == RX_AP_DENIED ? "denied by " : "withdrawn",
            c->state == RX_AP_DENIED ? (c->denied_by ? c->denied_by : "?") : "",
            c->deny_reason ? ": " : "", c->deny_reason ? c->deny_reason : "");
        decided(d, RX_DENY, "GRANT_NOT_APPROVED");
        return 0;
    }
    if (c->state != RX_AP_APPROVED) {
        say(d, "challenge %s has not been approved: an operator runs `rexec approve %s` at a "
            "terminal", id, id);
        decided(d, RX_DENY, "GRANT_NOT_APPROVED");
        return 0;
    }
    if (hash[0] == 0 || !str_eq(c->request_hash, hash)) {
        mismatch_what(in, c, stdin_hex, what, sizeof(what));
        say(d, "grant %s does not match this request (%s): the grant was not used", id, what);
        decided(d, RX_DENY, "GRANT_MISMATCH");
        return 0;
    }
    return 1;
}

/* A fan-out grant is checked as the grant of this host: its target's request hash and use. 1
 * when this host is not one the grant lists (d says so). */
static int fanout_view(const rx_gate_input *in, rx_challenge *c, rx_decision *d)
{
    char hosts[256];
    const rx_challenge_target *t;
    if (c->n_targets == 0)
        return 0;
    if ((t = rx_challenge_target_of(c, in->host->name)) == NULL) {
        say(d, "grant %s does not match this request (it was approved for hosts %s, not %s): "
            "the grant was not used", c->id, rx_challenge_hosts_str(c, hosts, sizeof(hosts)),
            in->host->name);
        decided(d, RX_DENY, "GRANT_MISMATCH");
        return 1;
    }
    c->host = t->host;
    c->request_hash = t->request_hash;
    if (t->used && c->state != RX_AP_USED)
        c->state = RX_AP_USED;
    return 0;
}

static int use_grant(const rx_gate_input *in, const char *hash, const char *stdin_hex,
                     rx_decision *d, rexec_error *err)
{
    rx_challenge c;
    rexec_error e = {0};
    char lv[384];
    int used = 0;
    int r = rx_approvals_load(in->ws, in->grant_id, &c, &e);

    if (r == REXEC_EDENIED) {
        say(d, "%s", e.msg);
        return decided(d, RX_DENY, "GRANT_UNKNOWN");
    }
    if (r != 0) {
        if (err != NULL)
            *err = e;
        return r;
    }
    if ((r = fanout_view(in, &c, d)) != 0) {
        r = r == 1 ? 0 : r;
        goto out;
    }
    if (in->grant_used != NULL &&
        (r = in->grant_used(in->ud, c.id, c.n_targets ? in->host->name : NULL, c.created, &used,
                            &e)) != 0) {
        if (err != NULL)
            *err = e;
        goto out;
    }
    if (used) {
        say(d, "grant %s was already used: the audit log records a call that ran on it (a grant "
               "runs once)", c.id);
        decided(d, RX_DENY, "GRANT_USED");
        goto out;
    }
    if (!grant_usable(in, &c, hash, stdin_hex, d))
        goto out;
    level_msg(in, lv, sizeof(lv));
    if (!in->eval_only && (r = rx_approvals_consume_host(in->ws, c.id, in->host->name, &e)) ==
                              REXEC_EDENIED) {
        say(d, "grant %s was already used: a grant runs once", c.id);
        decided(d, RX_DENY, "GRANT_USED");
        r = 0;
        goto out;
    }
    if (r != 0) {
        if (err != NULL)
            *err = e;
        goto out;
    }
    say(d, "%s: allowed by grant %s (approved by %s)%s", lv, c.id,
        c.approved_by ? c.approved_by : "?", in->eval_only ? " (eval: not used)" : "");
    decided(d, RX_ALLOW, "ALLOW_GRANT");
out:
    rx_challenge_free(&c);
    return r;
}

int rx_gate_decide(const rx_gate_input *in, rx_decision *out, rexec_error *err)
{
    char hash[65], stdin_hex[65];
    const rx_action *a = in->action;
    const rx_host *h = in->host;
    int r;

    memset(out, 0, sizeof(*out));
    out->effective_risk = a->risk;
    if (a->n_params > 0 && in->values == NULL) /* a caller bug, never a decision */
        return rx_fail(err, REXEC_EINTERNAL, "gate: action %s: parameters not resolved", a->name);
    if (a->risk > h->approve)
        return deny_level(in, out);
    if (a->containment > h->max_containment)
        return deny_containment(in, out);
    if (a->risk <= h->allow)
        return allow_level(in, out);
    if ((r = stdin_digest(in, stdin_hex, err)) != 0)
        return r;
    request_hash_with(in, gate_has_stdin(in) ? stdin_hex : NULL, hash);
    if (in->grant_id != NULL)
        return use_grant(in, hash, stdin_hex, out, err);
    return require_approval(in, hash, stdin_hex, out, err);
}
