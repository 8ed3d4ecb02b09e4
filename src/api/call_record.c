/* What a finished call leaves behind: its outcome read from the wrapper's status, the audit
 * records, the evidence files, and the public rexec_result. Every text field that could carry a
 * secret (the rendered command, messages, the rationale) passes the call's redactor first. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "call.h"
#include "err.h"
#include "metrics.h"
#include "traceparent.h"
#include "transfer.h"

static const char *const sig_names[] = {
    NULL,   "HUP",  "INT",  "QUIT", "ILL",  "TRAP", "ABRT",   "BUS",  "FPE",  "KILL", "USR1",
    "SEGV", "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN",
    "TTOU", "URG",  "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS"};

/* A shell reports death by signal N as status 128+N; a command that exits 128+N by itself
 * looks the same, so this is the shell's convention, not proof (docs/remote-contract.md). */
const char *rx_signal_from_status(int rc)
{
    if (rc > 128 && rc < 128 + (int)(sizeof(sig_names) / sizeof(*sig_names)))
        return sig_names[rc - 128];
    return NULL;
}

/* ---- the outcome ---------------------------------------------------------------------------- */

/* A runner's slot saw the call's shell end before it reported the command's start (phase
 * "setup"): how it ended, from the end line's rc, tells a containment that failed (unshare's
 * or the shell's own status) from a shell that was killed (a signal) or never started. */
static int setup_failure(rexec_call *c)
{
    const rx_exec_result *x = &c->x;
    const char *sig = rx_signal_from_status(x->rc);
    char how[64];
    if (sig)
        snprintf(how, sizeof(how), "was killed by signal %s (status %d)", sig, x->rc);
    else
        snprintf(how, sizeof(how), "exited with status %d", x->rc);
    return rx_fail(&c->err, REXEC_EHOST,
                   "%s: setting up containment (%s) failed: the call's shell %s before the "
                   "command started; the command did not run", c->host->name, x->containment,
                   how);
}

static int wrapper_failure(rexec_call *c)
{
    const rx_exec_result *x = &c->x;
    const char *h = c->host->name;
    if (strcmp(x->phase, "cd") == 0)
        return rx_fail(&c->err, REXEC_EHOST,
                       "%s: working directory %s is missing or not accessible; the command did "
                       "not run", h, c->action->cwd ? c->action->cwd : "?");
    if (strcmp(x->phase, "contain") == 0) {
        c->dec.verdict = RX_DENY;
        c->dec.reason = "DENY_CONTAINMENT";
        return rx_fail(&c->err, REXEC_EDENIED,
                       "action %s requires containment %s; %s offers %s; the command did not run",
                       c->action->name, rx_containment_name(c->action->containment), h,
                       x->containment);
    }
    if (strcmp(x->phase, "cancel") == 0) /* EOF reached the wrapper before the command started */
        return rx_fail(&c->err, REXEC_ECANCELLED,
                       "%s: cancelled before the command started; the command did not run", h);
    /* Stopped before its command began (a runner's slot killed the call's shell while it was
     * still setting up): the stop, not a failure of the host. */
    if (x->cancelled || (c->cancelled && strcmp(x->phase, "setup") == 0))
        return rx_fail(&c->err, REXEC_ECANCELLED,
                       "%s: cancelled before the command started; the command did not run", h);
    if (x->timed_out) {
        c->timed_out = 1;
        return rx_fail(&c->err, REXEC_ETIMEDOUT,
                       "%s: the call's timeout (%.10g s) passed before the command started; the "
                       "command did not run", h, c->timeout_s);
    }
    if (strcmp(x->phase, "stdin") == 0)
        return rx_fail(&c->err, REXEC_EHOST,
                       "%s: could not stage the call's stdin (is TMPDIR writable? does the VM "
                       "have GNU dd? see rexec check); the command did not run", h);
    if (strcmp(x->phase, "setup") == 0) /* a runner's slot: its rc is the call's shell's */
        return setup_failure(c);
    return rx_fail(&c->err, REXEC_EHOST,
                   "%s: setting up containment (%s) failed; the command did not run", h,
                   x->containment);
}

/* Reads what the exec reported into the call's result fields and error. */
void rx_call_outcome(rexec_call *c)
{
    const rx_exec_result *x = &c->x;
    c->exit_code = -1;
    if (x->err != REXEC_OK) {
        rx_fail(&c->err, x->err, "%s", x->errmsg);
        if (x->ssh_exit_signal[0])
            snprintf(c->signal, sizeof(c->signal), "%s", x->ssh_exit_signal);
    } else if (strcmp(x->phase, "cmd") != 0 || !x->started) {
        wrapper_failure(c);
    } else {
        c->ran = 1;
        c->timed_out = x->timed_out;
        c->exit_code = c->timed_out ? 124 : x->rc == 255 ? 254 : x->rc;
        const char *sig = c->timed_out ? NULL : rx_signal_from_status(x->rc);
        if (sig)
            snprintf(c->signal, sizeof(c->signal), "%s", sig);
        if (c->cancelled)
            rx_fail(&c->err, REXEC_ECANCELLED,
                    "%s: cancelled by the caller; the remote command was stopped", c->host->name);
    }
    snprintf(c->containment, sizeof(c->containment), "%s",
             x->containment[0] ? x->containment : "");
}

/* ---- redaction of record fields ------------------------------------------------------------- */

/* Refused or eval'd calls too: the workspace's redactor knows every secret it resolved. */
static const rx_redactor *call_redactor(rexec_call *c)
{
    return rx_call_redactor(c);
}

/* Room for a redacted text: a replacement marker can be longer than what it replaces. */
#define REDACTED_TEXT_CAP(n) ((n) * 2 + 4096)

/* s after the call's redactor, kept in b (initialised here, freed by the caller or with the
 * call); NULL for NULL, "[REDACTED:UNAVAILABLE]" when it cannot be redacted. Every text that
 * could carry a secret (messages, the rendered command, rationale) reaches a record or the
 * caller only through here. */
static const char *shown(rexec_call *c, rx_buf *b, const char *s)
{
    const rx_redactor *r = call_redactor(c);
    rx_buf_init(b, s ? REDACTED_TEXT_CAP(strlen(s)) : 0);
    if (s == NULL)
        return NULL;
    if (r == NULL || rx_redact_buf(r, s, strlen(s), b) != 0) {
        rx_buf_free(b);
        return "[REDACTED:UNAVAILABLE]";
    }
    return b->data ? (const char *)b->data : "";
}

/* Adds key: the redacted form of s (or null). */
static void add_redacted(rexec_call *c, cJSON *o, const char *key, const char *s)
{
    rx_buf b;
    const char *t = shown(c, &b, s);
    if (t == NULL)
        cJSON_AddNullToObject(o, key);
    else
        cJSON_AddStringToObject(o, key, t);
    rx_buf_free(&b);
}

static void add_str_or_null(cJSON *o, const char *key, const char *s)
{
    if (s && *s)
        cJSON_AddStringToObject(o, key, s);
    else
        cJSON_AddNullToObject(o, key);
}

const char *rx_verdict_name(rx_verdict v)
{
    return v == RX_ALLOW ? "ALLOW" : v == RX_DENY ? "DENY" : "REQUIRES_APPROVAL";
}

/* The reason code, also for calls refused before the gate could decide: the audit record and
 * the caller's result say the same. */
static const char *call_reason(const rexec_call *c)
{
    if (c->decided)
        return c->dec.reason;
    return c->err.code == REXEC_ECONFIG    ? "INVALID_CONFIG"
           : c->err.code == REXEC_EREQUEST ? "INVALID_REQUEST"
           : c->err.code                   ? rexec_err_name(c->err.code)
                                           : NULL;
}

/* The decision fields, including for calls refused before the gate could decide. */
static void add_decision(rexec_call *c, cJSON *o)
{
    add_str_or_null(o, "decision", c->decided ? rx_verdict_name(c->dec.verdict) : NULL);
    add_str_or_null(o, "reason", call_reason(c));
    add_str_or_null(o, "effective_risk", c->action ? rx_risk_name(c->action->risk) : NULL);
    add_str_or_null(o, "challenge_id", c->dec.challenge_id);
}

/* "executed": the command started on the host, or its script went out and no end came back,
 * so it may have run. The one definition, for the result, the audit record and evidence. */
static int call_executed(const rexec_call *c)
{
    return c->ran || (c->x.sent && !c->x.ended);
}

/* The outcome part of the public result, with no allocation: rx_call_result and the records
 * below fill it the same way, so they cannot disagree. */
static void call_outcome_fields(const rexec_call *c, rexec_result *res)
{
    res->executed = call_executed(c);
    res->exit_code = c->ran ? c->exit_code : -1;
    res->signal = c->signal[0] ? c->signal : NULL;
    res->timed_out = c->timed_out;
    res->truncated = c->out[0].truncated || c->out[1].truncated;
    res->stdout_bytes = c->out[0].total;
    res->stderr_bytes = c->out[1].total;
    res->stdout_sha256 = c->out[0].sha_hex[0] ? c->out[0].sha_hex : NULL;
    res->duration_ms = c->duration_ms;
    res->containment = c->containment[0] ? c->containment : NULL;
    res->evidence = c->evidence;
}

static void add_outcome(rexec_call *c, cJSON *o)
{
    rexec_result r = {0};
    call_outcome_fields(c, &r);
    rx_result_json_outcome(o, &r);
}

/* A put's SHA-256: content_sha256 when the caller gave it; else the gate's hash of the file
 * when an approval or a grant bound it; else (rexec put: hashed as it is sent, call_put.c) the
 * hash of what was sent, known at the outcome only, and only when all of it went. */
static const char *put_sha256(const rexec_call *c, int is, int outcome)
{
    if (is >= 0 && c->values[is].value != NULL && c->values[is].value_len > 0)
        return c->values[is].value;
    if (c->stdin_sha != NULL && c->stdin_hex[0])
        return c->stdin_hex;
    return outcome ? rx_put_sent_hex(c) : NULL;
}

/* A put or get: the direction, the file's path, its size and SHA-256 (a put's size is the
 * controller's, its hash as put_sha256 says; a get's are of what arrived, at the outcome). */
static void add_transfer(rexec_call *c, cJSON *o, int outcome)
{
    const rx_action *a = c->action;
    if (a == NULL || a->transfer == RX_XFER_NONE || c->values == NULL)
        return;
    cJSON *t = cJSON_AddObjectToObject(o, "transfer");
    if (t == NULL)
        return;
    cJSON_AddStringToObject(t, "direction", rx_transfer_name(a->transfer));
    add_redacted(c, t, "path", c->xfer_path.data ? (const char *)c->xfer_path.data : NULL);
    if (a->transfer == RX_XFER_PUT) {
        int is = rx_ws_param_index(a, RX_PUT_SHA_PARAM, strlen(RX_PUT_SHA_PARAM));
        int iz = rx_ws_param_index(a, RX_PUT_SIZE_PARAM, strlen(RX_PUT_SIZE_PARAM));
        cJSON_AddNumberToObject(t, "bytes", is >= 0 && iz >= 0 && c->values[iz].value
                                                ? strtod(c->values[iz].value, NULL) : 0);
        add_str_or_null(t, "sha256", put_sha256(c, is, outcome));
        return;
    }
    if (outcome) {
        cJSON_AddNumberToObject(t, "bytes", (double)c->out[0].total);
        add_str_or_null(t, "sha256", c->out[0].sha_hex[0] ? c->out[0].sha_hex : NULL);
    }
    cJSON_AddBoolToObject(t, "binary", a->binary);
    cJSON_AddBoolToObject(t, "bytes_kept", a->keep_bytes);
}

static cJSON *secret_names(const rexec_call *c)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && c->action && i < c->action->n_secrets; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(c->action->secrets[i]));
    return a;
}

/* Which controller wrote the record: its host name and uid (records from several controllers
 * can end up side by side once shipped). */
static void add_controller(cJSON *o)
{
    static char host[256];
    if (host[0] == 0 && (gethostname(host, sizeof(host) - 1) != 0 || host[0] == 0))
        snprintf(host, sizeof(host), "?");
    cJSON *c = cJSON_AddObjectToObject(o, "controller");
    if (c == NULL)
        return;
    cJSON_AddStringToObject(c, "host", host);
    cJSON_AddNumberToObject(c, "uid", (double)getuid());
}

/* Who asked: serve's peer ({"uid", "user"}), or null for the process itself. */
static void add_client(const rexec_call *c, cJSON *o)
{
    if (c->client_user == NULL) {
        cJSON_AddNullToObject(o, "client");
        return;
    }
    cJSON *k = cJSON_AddObjectToObject(o, "client");
    if (k == NULL)
        return;
    cJSON_AddNumberToObject(k, "uid", (double)c->client_uid);
    cJSON_AddStringToObject(k, "user", c->client_user);
}

/* The workspace's audit log, with its syslog copy when audit.syslog asks for one, and the
 * recorder that writes it off the loop. */
static int call_audit_open(rexec_ctx *ctx, rexec_error *err)
{
    rx_audit *a = NULL;
    int r = rx_audit_open(&a, ctx->ws->dir, ctx->ws->audit_key_file, err);
    if (r == 0 && ctx->ws->audit_syslog != NULL)
        r = rx_audit_set_syslog(a, ctx->ws->audit_syslog, err);
    if (r == 0)
        r = rx_recorder_new(&ctx->rec, ctx->loop, a, err);
    if (r != 0)
        rx_audit_close(a);
    return r;
}

int rx_ctx_audit_ready(rexec_ctx *ctx, rexec_error *err)
{
    return ctx->rec == NULL ? call_audit_open(ctx, err) : 0;
}

int rx_call_audit_ready(rexec_call *c, rexec_error *err)
{
    return c->ctx->rec == NULL ? call_audit_open(c->ctx, err) : 0;
}

/* phase: "intent" (before anything runs), "outcome" (after), or "refused". *text: the record,
 * rendered and scanned for secrets (rx_audit_render), for the recorder. */
static int call_audit_text(rexec_call *c, const char *phase, char **text, rexec_error *err)
{
    char ts[RX_AUDIT_TS_LEN];
    int r;
    rexec_ctx *ctx = c->ctx;
    if (ctx->rec == NULL && (r = call_audit_open(ctx, err)) != 0)
        return r;
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return rx_fail(err, REXEC_EAUDIT, "out of memory building the audit record");
    rx_audit_timestamp(ts);
    cJSON_AddStringToObject(o, "ts", ts);
    cJSON_AddStringToObject(o, "run_id", c->run_id);
    add_redacted(c, o, "batch_id", c->batch_id);
    cJSON_AddStringToObject(o, "phase", phase);
    add_controller(o);
    add_client(c, o);
    add_redacted(c, o, "host", c->host_name);
    add_redacted(c, o, "action", c->action_name);
    add_decision(c, o);
    add_redacted(c, o, "grant_id", c->grant_id);
    add_redacted(c, o, "argv", c->rendered.data ? (const char *)c->rendered.data : NULL);
    cJSON_AddItemToObject(o, "secrets", secret_names(c));
    add_transfer(c, o, strcmp(phase, "intent") != 0);
    if (strcmp(phase, "intent") != 0)
        add_outcome(c, o);
    add_redacted(c, o, "error", c->err.code ? c->err.msg : NULL);
    add_redacted(c, o, "rationale", c->rationale);
    add_redacted(c, o, "hypothesis_id", c->hypothesis_id);
    if (c->traceparent) /* only when given: records without it stay as they were */
        add_redacted(c, o, "traceparent", c->traceparent);
    r = rx_audit_render(o, call_redactor(c), text, err);
    cJSON_Delete(o);
    return r;
}

int rx_call_audit(rexec_call *c, const char *phase, rexec_error *err)
{
    char *text = NULL;
    int r = call_audit_text(c, phase, &text, err);
    return r ? r : rx_recorder_append_now(c->ctx->rec, text, err);
}

int rx_call_audit_submit(rexec_call *c, const char *phase, void (*done)(rx_record_job *),
                         rexec_error *err)
{
    rx_record_job *j = &c->rec_job;
    memset(j, 0, sizeof(*j));
    int r = call_audit_text(c, phase, &j->text, err);
    if (r != 0)
        return r;
    j->done = done;
    j->ud = c;
    rx_recorder_submit(c->ctx->rec, j);
    return 0;
}

/* Nobody waits for a queued record of the context (the context may be gone when it is done):
 * a failure shows in the log as the missing record, and the calls' records beside it fail too. */
static void on_ctx_record_done(rx_record_job *j)
{
    free(j);
}

/* A record of the context's own, not of one call (a fan-out's plan or stop, fanout_record.c):
 * controller and client added (ts by the render), rendered through the workspace's redactor; appended now (the
 * caller waits for it), or queued behind the calls' records. o stays the caller's. */
int rx_ctx_audit_record(rexec_ctx *ctx, cJSON *o, const char *client_user, unsigned client_uid,
                        int now, rexec_error *err)
{
    char *text = NULL;
    int r;
    if (ctx->rec == NULL && (r = call_audit_open(ctx, err)) != 0)
        return r;
    add_controller(o); /* ts: rx_audit_render puts it first */
    if (client_user == NULL) {
        cJSON_AddNullToObject(o, "client");
    } else {
        cJSON *k = cJSON_AddObjectToObject(o, "client");
        cJSON_AddNumberToObject(k, "uid", (double)client_uid);
        cJSON_AddStringToObject(k, "user", client_user);
    }
    if ((r = rx_audit_render(o, rx_ctx_redactor(ctx), &text, err)) != 0)
        return r;
    if (now)
        return rx_recorder_append_now(ctx->rec, text, err);
    rx_record_job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        free(text);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    j->text = text;
    j->done = on_ctx_record_done;
    rx_recorder_submit(ctx->rec, j);
    return 0;
}

/* ---- evidence ------------------------------------------------------------------------------- */

int rx_call_evidence_submit(rexec_call *c, void (*done)(rx_record_job *), rexec_error *err)
{
    rx_record_job *j = &c->rec_job;
    rx_evidence *ev = c->ev;
    rexec_error e;
    int r;
    memset(j, 0, sizeof(*j));
    c->ev = NULL; /* committed or removed, and freed, by the recorder */
    if (ev == NULL)
        return rx_fail(err, REXEC_EAUDIT, "evidence for run %s was not opened", c->run_id);
    if (c->ctx->rec == NULL && (r = call_audit_open(c->ctx, err)) != 0) {
        rx_evidence_abort(ev);
        return r;
    }
    cJSON *meta = cJSON_CreateObject();
    if (meta == NULL) {
        rx_evidence_abort(ev);
        return rx_fail(err, REXEC_EAUDIT, "out of memory building the evidence of run %s",
                       c->run_id);
    }
    cJSON_AddStringToObject(meta, "run_id", c->run_id);
    if (c->batch_id)
        cJSON_AddStringToObject(meta, "batch_id", c->batch_id);
    if (c->traceparent)
        add_redacted(c, meta, "traceparent", c->traceparent);
    cJSON_AddStringToObject(meta, "host", c->host->name);
    cJSON_AddStringToObject(meta, "action", c->action->name);
    add_decision(c, meta);
    add_redacted(c, meta, "argv", (const char *)c->rendered.data);
    add_transfer(c, meta, 1);
    add_outcome(c, meta);
    cJSON_AddBoolToObject(meta, "stdout_truncated", c->out[0].truncated);
    cJSON_AddBoolToObject(meta, "stderr_truncated", c->out[1].truncated);
    cJSON_AddBoolToObject(meta, "cap_killed", c->cap_killed);
    add_redacted(c, meta, "error", c->err.code ? c->err.msg : NULL);
    j->ev = ev;
    j->ev_meta = meta;
    j->ev_sha[0] = c->out[0].sha_hex;
    j->ev_sha[1] = c->out[1].sha_hex;
    j->done = done;
    j->ud = c;
    /* The outcome goes with it, naming the evidence as it will be once committed: appended
     * only if the commit succeeds (otherwise rx_call_evidence_done says so, and the caller
     * writes the outcome again with the error). */
    if ((c->evidence = strdup(rx_evidence_path(ev))) == NULL ||
        call_audit_text(c, "outcome", &j->text, &e) != 0) {
        free(c->evidence);
        c->evidence = NULL;
        j->text = NULL; /* the evidence alone; the outcome follows it, as before */
    }
    c->outcome_with_ev = j->text != NULL;
    rx_recorder_submit(c->ctx->rec, j);
    return 0;
}

int rx_call_evidence_done(rexec_call *c, rx_record_job *j)
{
    int appended = j->ev_rc == 0 && c->outcome_with_ev;
    cJSON_Delete(j->ev_meta);
    j->ev_meta = NULL;
    free(c->evidence);
    c->evidence = NULL;
    if (j->ev_rc != 0) {
        if (c->err.code == 0)
            c->err = j->ev_err;
    } else {
        c->evidence = j->ev_path;
    }
    j->ev_path = NULL;
    if (appended && j->rc != 0)
        c->err = j->err; /* the trail is broken: that outranks the command's own status */
    return appended;
}

/* ---- the public result ---------------------------------------------------------------------- */

/* The call failed before a byte of it reached the host (connect, host key, auth, a refused
 * channel or exec request): it provably did not start, so it may be tried again. */
static int call_nothing_sent(const rexec_call *c)
{
    int e = c->err.code;
    return !c->script_sent && !c->x.wrote_any && !c->ran && c->intent_written &&
           (e == REXEC_EHOST || e == REXEC_EHOSTKEY || e == REXEC_EAUTH || e == REXEC_ETIMEDOUT ||
            e == REXEC_ECONNLOST);
}

void rx_call_result(rexec_call *c, rexec_result *res)
{
    memset(res, 0, sizeof(*res));
    res->run_id = c->run_id;
    res->batch_id = c->batch_id;
    res->traceparent = c->traceparent;
    /* the caller's text: a name typed wrong may be a secret pasted in the wrong field */
    res->host = shown(c, &c->shown_host, c->host_name);
    res->action = shown(c, &c->shown_action, c->action_name);
    res->decision = c->decided ? rx_verdict_name(c->dec.verdict) : NULL;
    /* the caller's result: no decision, no reason (the audit record keeps INVALID_*) */
    res->reason = c->decided ? call_reason(c) : NULL;
    res->effective_risk = c->action ? rx_risk_name(c->action->risk) : NULL;
    call_outcome_fields(c, res);
    res->challenge_id = c->dec.challenge_id[0] ? c->dec.challenge_id : NULL;
    res->rendered = shown(c, &c->shown_rendered, (const char *)c->rendered.data);
    res->err = c->err.code;
    res->error = c->err.code ? shown(c, &c->shown_error, c->err.msg) : NULL;
    res->exit_status = c->err.code ? rexec_err_exit_code(c->err.code) : c->ran ? c->exit_code : 0;
    if (c->timed_out && !c->ran) /* its timeout passed before the command began */
        res->exit_status = 124;
    res->cap_killed = c->cap_killed;
    res->nothing_sent = call_nothing_sent(c);
    res->put_sha256 = rx_put_sent_hex(c);
    if (c->capture && c->script_sent) {
        const call_stream *o = &c->out[0], *e = &c->out[1];
        res->stdout_data = o->result.data ? o->result.data : (const unsigned char *)"";
        res->stdout_len = o->result.len;
        res->stderr_data = e->result.data ? e->result.data : (const unsigned char *)"";
        res->stderr_len = e->result.len;
        res->stdout_truncated_in_result = o->result_truncated || o->truncated;
        res->stderr_truncated_in_result = e->result_truncated || e->truncated;
    }
}

void rx_call_metrics(const rexec_call *c, const rexec_result *res)
{
    int decision = rx_metrics_decision(res->decision);
    if (c->eval_only) {
        rx_metrics_count_eval(decision);
        return;
    }
    rx_metrics_count_call(decision, rx_metrics_exit_class(res->exit_status, res->timed_out,
                                                          res->err == REXEC_ECANCELLED),
                          (uv_hrtime() - c->t0_ns) / 1000);
}

int rexec_traceparent_check(const char *value, const char *what, rexec_error *err)
{
    return rx_traceparent_check(value, what ? what : "traceparent", err);
}
