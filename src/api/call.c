/* The path of one call (docs/architecture.md): workspace -> gate -> render -> audit intent -> pool/exec ->
 * redactor -> caps -> sinks -> evidence -> audit outcome -> report. The CLI and `serve` reach
 * it only through include/rexec.h. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "call.h"
#include "err.h"
#include "metrics.h"
#include "traceparent.h"
#include "transfer.h"

#define CALL_MAX_COMMAND (256 * 1024)
#define CALL_MAX_SCRIPT (4 * 1024 * 1024)
#define CALL_BACKSTOP_SLACK_S 10.0
#define CALL_DRAIN_S 2.0

/* ---- context -------------------------------------------------------------------------------- */

int rexec_ctx_new(rexec_ctx **out, uv_loop_t *loop, const char *workspace_dir, rexec_error *err)
{
    rexec_ctx *ctx = calloc(1, sizeof(*ctx));
    int r;
    if (ctx == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    ctx->loop = loop;
    if ((r = rx_ws_load(&ctx->ws, workspace_dir, err)) != 0) {
        free(ctx);
        return r;
    }
    rx_pool_opts po = {.known_hosts = ctx->ws->known_hosts,
                       .connect_timeout_s = ctx->ws->limits.connect_timeout_s,
                       .keepalive_s = ctx->ws->limits.keepalive_s,
                       .default_channels = ctx->ws->limits.max_channels,
                       .runner_idle_s = ctx->ws->limits.runner_idle_s,
                       .log = &ctx->log};
    if ((r = rx_ctx_secrets_load(ctx, err)) != 0 || (ctx->pool = rx_pool_new(loop, &po)) == NULL) {
        rx_ctx_secrets_free(ctx);
        rx_ws_free(ctx->ws);
        free(ctx);
        return r ? r : rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    rx_ctx_reload_init(ctx);
    *out = ctx;
    return 0;
}

static void ctx_maybe_free(rexec_ctx *ctx);

void rexec_ctx_set_log(rexec_ctx *ctx, rexec_log_fn fn, void *ud)
{
    ctx->log.fn = fn;
    ctx->log.ud = ud;
}

static void on_pool_closed(void *ud)
{
    rexec_ctx *ctx = ud;
    ctx->pool = NULL;
    ctx_maybe_free(ctx);
}

static void ctx_maybe_free(rexec_ctx *ctx)
{
    /* Not while a call's or a check's handle is still closing: its close callback reads ctx. */
    if (!ctx->closing || ctx->objs_alive > 0)
        return;
    if (ctx->pool) {
        rx_pool_close(ctx->pool, on_pool_closed, ctx);
        return;
    }
    void (*cb)(void *) = ctx->on_closed;
    void *ud = ctx->closed_ud;
    rx_recorder_close(ctx->rec);
    rx_ctx_reload_free(ctx);
    rx_ctx_secrets_free(ctx);
    rx_ctx_fanouts_free(ctx);
    rx_ws_free(ctx->ws);
    free(ctx);
    if (cb)
        cb(ud);
}

void rx_ctx_track(rexec_ctx *ctx, rx_ctx_obj *o, void (*cancel)(rx_ctx_obj *o))
{
    o->cancel = cancel;
    o->next = ctx->objs;
    ctx->objs = o;
    if (++ctx->objs_alive > ctx->objs_peak)
        ctx->objs_peak = ctx->objs_alive;
}

void rx_ctx_untrack(rexec_ctx *ctx, rx_ctx_obj *o)
{
    for (rx_ctx_obj **pp = &ctx->objs; *pp; pp = &(*pp)->next)
        if (*pp == o) {
            *pp = o->next;
            ctx->objs_alive--;
            return;
        }
}

/* Once a burst of calls (a fan-out to many hosts) is over, its memory goes back to the system:
 * freed between what stays (the connections, the runners), it would otherwise stay resident
 * (1,000 hosts: about 25 KiB a host, docs/PERFORMANCE.md, issue 34). Not after every call: a
 * trim walks the heap, and the next call would fault the pages in again. */
#define CTX_TRIM_AFTER 64

void rx_ctx_released(rexec_ctx *ctx)
{
    if (ctx->objs_alive == 0 && ctx->objs_peak >= CTX_TRIM_AFTER && !ctx->closing) {
        ctx->objs_peak = 0;
#ifdef __GLIBC__
        malloc_trim(0);
#endif
    } else if (ctx->objs_alive == 0) {
        ctx->objs_peak = 0;
    }
    ctx_maybe_free(ctx);
}

/* Cancels every call and check; the context goes once the last has released its memory and the
 * pool is closed. A cancel may untrack its object only from the loop, later, so the walk is
 * safe. */
void rexec_ctx_close(rexec_ctx *ctx, void (*on_closed)(void *ud), void *ud)
{
    if (ctx->closing)
        return;
    ctx->closing = 1;
    ctx->on_closed = on_closed;
    ctx->closed_ud = ud;
    for (rx_ctx_obj *o = ctx->objs; o; o = o->next)
        o->cancel(o);
    ctx_maybe_free(ctx);
}

/* ---- the call's state ------------------------------------------------------------------------ */

static const char *const call_state_names[] = {"GATE", "INTENT", "ON_HOST", "RECORD", "REPORTED"};

static int call_transition_ok(rx_call_state from, rx_call_state to)
{
    switch (to) {
    case CALL_INTENT: return from == CALL_GATE;
    case CALL_ON_HOST: return from == CALL_INTENT;
    case CALL_RECORD: return from < CALL_RECORD;
    case CALL_REPORTED: return from == CALL_RECORD;
    default: return 0;
    }
}

static void call_set(rexec_call *c, rx_call_state to)
{
    if (!call_transition_ok(c->state, to)) {
        rx_log(&c->ctx->log, REXEC_LOG_WARN, "%s: call %s: %s -> %s is not a transition",
               c->host_name, c->run_id, call_state_names[c->state], call_state_names[to]);
        abort(); /* a lifecycle bug: the call could report twice, or run unrecorded */
    }
    rx_log(&c->ctx->log, REXEC_LOG_DEBUG, "call %s: %s -> %s", c->run_id,
           call_state_names[c->state], call_state_names[to]);
    c->state = to;
}

/* ---- freeing and reporting ------------------------------------------------------------------ */

/* The script and the runner's code: the code holds the exports, so it is wiped, not just freed. */
static void call_forms_free(rexec_call *c)
{
    if (c->code.data)
        OPENSSL_cleanse(c->code.data, c->code.len);
    rx_buf_free(&c->code);
    rx_buf_free(&c->script);
}

static void call_free(rexec_call *c)
{
    for (size_t i = 0; i < c->n_given; i++) {
        free((char *)c->given[i].name);
        OPENSSL_clear_free((char *)c->given[i].value, c->given[i].value_len);
    }
    free(c->given);
    free(c->values);
    for (size_t i = 0; c->secret_values && i < c->n_secrets + c->n_redact_only; i++)
        rx_buf_free(&c->secret_values[i]);
    free(c->secret_values);
    free(c->secrets);
    rx_redactor_free(c->redactor);
    for (int i = 0; i < 2; i++) {
        rx_redact_stream_free(c->out[i].rs);
        rx_buf_free(&c->out[i].result);
        EVP_MD_CTX_free(c->out[i].sha);
    }
    rx_evidence_abort(c->ev); /* a call that never ran leaves no evidence */
    if (c->stdin_data)
        OPENSSL_clear_free(c->stdin_data, c->stdin_len);
    if (c->stdin_fd >= 0)
        close(c->stdin_fd);
    EVP_MD_CTX_free(c->stdin_sha);
    rx_put_free(c);
    free(c->stdin_path);
    rx_buf_free(&c->rendered);
    rx_buf_free(&c->xfer_path);
    call_forms_free(c);
    rx_buf_free(&c->shown_error);
    rx_buf_free(&c->shown_rendered);
    rx_buf_free(&c->shown_host);
    rx_buf_free(&c->shown_action);
    free(c->host_name), free(c->action_name), free(c->grant_id);
    free(c->rationale), free(c->hypothesis_id), free(c->evidence), free(c->batch_id);
    free(c->client_user);
    rx_ctx_fanout_release(c->ctx, c->fanout);
    free(c->traceparent);
    rx_call_secrets_unpin(c); /* after its streams and evidence, which scanned with it */
    rx_call_ws_unpin(c);
    free(c);
}

static void on_call_closed(uv_handle_t *h)
{
    rexec_call *c = h->data;
    rexec_ctx *ctx = c->ctx;
    rx_ctx_untrack(ctx, &c->obj);
    call_free(c);
    rx_ctx_released(ctx);
}

/* The end of every call: records, then the caller's on_done, then release from the loop.
 * The records are written by the recorder, off the loop: evidence, then the outcome (or the
 * refusal), in one job, acknowledged once durable; only then is the call reported. */
static void call_report(rexec_call *c)
{
    rexec_result res;
    rx_call_result(c, &res);
    call_set(c, CALL_REPORTED);
    rx_call_metrics(c, &res);
    if (c->cb.on_done)
        c->cb.on_done(c->cb.ud, &res);
    uv_close((uv_handle_t *)&c->defer, on_call_closed);
}

static void on_record_done(rx_record_job *j)
{
    rexec_call *c = j->ud;
    if (j->rc != 0)
        c->err = j->err; /* the trail is broken: that outranks the command's own status */
    call_report(c);
}

static void call_record_end(rexec_call *c, const char *phase)
{
    rexec_error e;
    if (rx_call_audit_submit(c, phase, on_record_done, &e) != 0) {
        c->err = e;
        call_report(c);
    }
}

static void on_evidence_done(rx_record_job *j)
{
    rexec_call *c = j->ud;
    if (rx_call_evidence_done(c, j))
        call_report(c); /* the outcome went with the evidence */
    else
        call_record_end(c, "outcome");
}

static void call_finish(rexec_call *c)
{
    rexec_error e;
    if (c->state >= CALL_RECORD)
        return;
    call_set(c, CALL_RECORD);
    c->duration_ms = (uv_hrtime() - c->t0_ns) / 1000000;
    if (c->intent_written && c->script_sent) {
        if (rx_call_evidence_submit(c, on_evidence_done, &e) != 0) {
            if (c->err.code == 0)
                c->err = e;
            call_record_end(c, "outcome");
        }
    } else if (c->intent_written) {
        call_record_end(c, "outcome");
    } else if (!c->eval_only && c->err.code != REXEC_EAUDIT && !c->refused_written) {
        call_record_end(c, "refused"); /* every refusal is a record too */
    } else {
        call_report(c);
    }
}

static void on_defer(uv_timer_t *t)
{
    call_finish(t->data);
}

/* Ends a call that never reached a host; reported from the loop, as rexec_call_start promises. */
static void call_end_early(rexec_call *c)
{
    uv_timer_start(&c->defer, on_defer, 0, 0);
}

/* ---- output streams ------------------------------------------------------------------------- */

static void stream_past_cap(call_stream *st, size_t len)
{
    rexec_call *c = st->call;
    if (len == 0)
        return;
    st->truncated = 1;
    if (c->action->on_cap_kill && c->job && !c->cap_killed) {
        c->cap_killed = 1; /* the wrapper's watchdog stops the command on EOF */
        rx_pool_cancel(c->job);
    }
}

/* A download's bytes are its stdout: evidence keeps their sha256 (and size), and the bytes
 * themselves only when the action says "keep_bytes". */
static int call_stream_hash_only(const call_stream *st)
{
    const rx_action *a = st->call->action;
    return st->id == REXEC_STDOUT && a->transfer == RX_XFER_GET && !a->keep_bytes;
}

/* Redacted bytes arrive here: counted, capped, hashed, written to evidence, shown, and with
 * capture kept for the result. The cap applies to redacted bytes, so it can never cut a secret
 * into an unredacted prefix. */
static void stream_sink(void *ud, const unsigned char *data, size_t len)
{
    call_stream *st = ud;
    rexec_call *c = st->call;
    uint64_t room = st->cap - st->kept;
    size_t keep = len < room ? len : (size_t)room;
    st->total += len;
    st->kept += keep;
    st->full = st->kept == st->cap;
    if (keep < len)
        stream_past_cap(st, len - keep);
    if (keep == 0)
        return;
    if (c->capture && rx_buf_add_capped(&st->result, data, keep) < keep)
        st->result_truncated = 1;
    EVP_DigestUpdate(st->sha, data, keep);
    if (c->ev && !call_stream_hash_only(st))
        rx_evidence_append(c->ev, st->id == REXEC_STDOUT ? 0 : 1, data, keep);
    if (c->cb.on_output)
        c->cb.on_output(c->cb.ud, st->id, data, keep);
}

RX_UNITTEST_STATIC int streams_init(rexec_call *c, uint64_t cap)
{
    uint64_t rcap = c->ctx->ws->limits.max_result_bytes;
    for (int i = 0; i < 2; i++) {
        call_stream *st = &c->out[i];
        st->call = c;
        st->id = i == 0 ? REXEC_STDOUT : REXEC_STDERR;
        st->cap = cap;
        st->full = cap == 0;
        rx_buf_init(&st->result, (size_t)(rcap < cap ? rcap : cap));
        st->sha = EVP_MD_CTX_new();
        st->rs = rx_redact_stream_new(rx_call_redactor(c), stream_sink, st);
        if (st->sha == NULL || st->rs == NULL || !EVP_DigestInit_ex(st->sha, EVP_sha256(), NULL))
            return REXEC_ENOMEM;
    }
    return 0;
}

RX_UNITTEST_STATIC void streams_finish(rexec_call *c)
{
    for (int i = 0; i < 2; i++) {
        call_stream *st = &c->out[i];
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        if (st->rs == NULL)
            continue;
        rx_redact_finish(st->rs);
        EVP_DigestFinal_ex(st->sha, md, &n);
        rx_hex_encode(md, n, st->sha_hex); /* SHA-256: n is 32, sha_hex holds 64 + NUL */
    }
}

/* Past the cap the bytes are only counted: no redaction, no copy (the stream's own held-back
 * bytes still come out of the redactor at its end). */
RX_UNITTEST_STATIC void on_exec_data(void *ud, int stream, const unsigned char *data,
                                     size_t len)
{
    rexec_call *c = ud;
    call_stream *st = &c->out[stream == REXEC_STDOUT ? 0 : 1];
    if (st->full) {
        st->total += len;
        stream_past_cap(st, len);
        return;
    }
    if (stream == REXEC_STDOUT && c->action->binary) { /* an action with no secret (transfer.c) */
        stream_sink(st, data, len);
        return;
    }
    rx_metrics_count_redacted_bytes(len);
    rx_redact_feed(st->rs, data, len);
}

static void on_exec_done(void *ud, const rx_exec_result *x)
{
    rexec_call *c = ud;
    c->job = NULL;
    c->x = *x;
    c->script_sent = x->sent; /* once the script is on the wire it may have run */
    streams_finish(c);
    rx_call_outcome(c);
    call_finish(c);
}

/* ---- the steps before the host -------------------------------------------------------------- */

int rexec_batch_id_new(char out[REXEC_BATCH_ID_SIZE])
{
    return rx_nonce_new(out);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int call_copy_request(rexec_call *c, const rexec_request *req)
{
    c->host_name = dup_or_null(req->host ? req->host : "");
    c->action_name = dup_or_null(req->action ? req->action : "");
    c->grant_id = dup_or_null(req->grant_id);
    c->rationale = dup_or_null(req->rationale);
    c->hypothesis_id = dup_or_null(req->hypothesis_id);
    c->traceparent = dup_or_null(req->traceparent);
    c->batch_id = dup_or_null(req->batch_id);
    c->client_user = dup_or_null(req->client_user);
    c->client_uid = req->client_uid;
    c->given = calloc(req->n_params + 1, sizeof(*c->given));
    if (!c->host_name || !c->action_name || !c->given || (req->grant_id && !c->grant_id) ||
        (req->rationale && !c->rationale) || (req->hypothesis_id && !c->hypothesis_id) ||
        (req->traceparent && !c->traceparent) ||
        (req->batch_id && !c->batch_id) || (req->client_user && !c->client_user))
        return REXEC_ENOMEM;
    for (size_t i = 0; i < req->n_params; i++, c->n_given++) {
        char *v = malloc(req->params[i].value_len + 1);
        if (v == NULL || (c->given[i].name = strdup(req->params[i].name)) == NULL) {
            free(v);
            return REXEC_ENOMEM;
        }
        memcpy(v, req->params[i].value, req->params[i].value_len);
        v[req->params[i].value_len] = 0;
        c->given[i].value = v;
        c->given[i].value_len = req->params[i].value_len;
    }
    if (req->stdin_data) {
        if ((c->stdin_data = malloc(req->stdin_len ? req->stdin_len : 1)) == NULL)
            return REXEC_ENOMEM;
        memcpy(c->stdin_data, req->stdin_data, req->stdin_len);
        c->stdin_len = req->stdin_len;
    }
    if (req->stdin_path && !req->stdin_data && (c->stdin_path = strdup(req->stdin_path)) == NULL)
        return REXEC_ENOMEM;
    c->timeout_s = req->timeout_s;
    c->stdin_timeout_s = req->stdin_timeout_s;
    c->eval_only = req->eval_only;
    c->capture = req->capture;
    return 0;
}

static int call_resolve(rexec_call *c, rexec_error *err)
{
    const rx_ws *ws = c->ctx->ws;
    int r;
    if ((c->host = rx_ws_host(ws, c->host_name)) == NULL)
        return rx_fail(err, REXEC_ECONFIG, "unknown host \"%s\" (`rexec hosts` lists the inventory)",
                       c->host_name);
    /* Now, not when the intent is durable: a reload in between must not make this call, whose
     * host is then no longer in ctx->ws, open a connection of its own. */
    c->pool_host = rx_ctx_pool_host(c->ctx, c->host);
    if ((c->action = rx_ws_action(ws, c->action_name)) == NULL)
        return rx_fail(err, REXEC_ECONFIG,
                       "unknown action \"%s\" (`rexec actions` lists the catalog)", c->action_name);
    r = rx_gate_resolve_params(ws, c->action, c->given, c->n_given, &c->values, &c->dec, err);
    if (r == REXEC_EDENIED)
        c->decided = 1;
    if (r != 0)
        return r;
    rx_buf_init(&c->rendered, CALL_MAX_COMMAND);
    r = rx_render_command(c->action, c->values, &c->rendered, err);
    if (r == 0 && c->action->transfer != RX_XFER_NONE) {
        rx_buf_init(&c->xfer_path, 8192);
        r = rx_transfer_path(c->action, c->values, &c->xfer_path, err);
    }
    return r;
}

/* A put action's file is bounded by its own max_bytes, any other stdin by the workspace's. */
static uint64_t call_max_stdin(const rexec_call *c)
{
    return c->action->transfer == RX_XFER_PUT ? c->action->xfer_max_bytes
                                              : c->ctx->ws->limits.max_stdin_bytes;
}

static int call_stdin_too_big(const rexec_call *c, rexec_error *err)
{
    if (c->action->transfer == RX_XFER_PUT)
        return rx_fail(err, REXEC_EREQUEST, "the file is %zu bytes; actions.%s.put.max_bytes is "
                       "%llu", c->stdin_len, c->action->name,
                       (unsigned long long)c->action->xfer_max_bytes);
    return rx_fail(err, REXEC_EREQUEST, "stdin is %zu bytes; limits.max_stdin_bytes is %llu",
                   c->stdin_len, (unsigned long long)c->ctx->ws->limits.max_stdin_bytes);
}

/* stdin from a file: a regular file, opened once, never loaded whole. It is hashed only when
 * the gate asks (call_stdin_hash), and then what is sent must be what was hashed. */
static int call_stdin_file(rexec_call *c, rexec_error *err)
{
    struct stat st;
    c->stdin_fd = open(c->stdin_path, O_RDONLY | O_CLOEXEC);
    if (c->stdin_fd < 0 || fstat(c->stdin_fd, &st) != 0)
        return rx_fail(err, REXEC_EREQUEST, "--stdin %s: %s", c->stdin_path, strerror(errno));
    if (rx_call_stdin_is_stream(st.st_mode)) { /* a pipe: framed as it is read (call_stdin.c) */
        c->stdin_stream = 1;
        return 0;
    }
    if (!S_ISREG(st.st_mode))
        return rx_fail(err, REXEC_EREQUEST, "--stdin %s: not a regular file", c->stdin_path);
    c->stdin_len = (size_t)st.st_size;
    if (c->stdin_len > call_max_stdin(c))
        return call_stdin_too_big(c, err);
    return 0;
}

/* The gate needs stdin's digest (an approval or a grant binds it): the file is hashed in fixed
 * pieces, and from now on call_stdin_pull checks that what it sends is what was hashed. */
static int call_stdin_hash(void *ud, char hex[65], rexec_error *err)
{
    rexec_call *c = ud;
    uint64_t got = 0;
    if (c->stdin_sha != NULL) { /* hashed already */
        snprintf(hex, 65, "%s", c->stdin_hex);
        return 0;
    }
    int r = rx_call_stdin_spool(c, err); /* a pipe is hashed from its spool */
    if (r != 0)
        return r;
    if (rx_sha256_fd(c->stdin_fd, c->stdin_len, c->stdin_hex, &got) != 0 || got != c->stdin_len)
        return rx_fail(err, REXEC_EREQUEST, "--stdin %s: cannot read it", c->stdin_path);
    snprintf(hex, 65, "%s", c->stdin_hex);
    c->stdin_sha = EVP_MD_CTX_new();
    if (c->stdin_sha == NULL || !EVP_DigestInit_ex(c->stdin_sha, EVP_sha256(), NULL))
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    return 0;
}

/* The exec pulls stdin from the file as the channel takes it. Before the last piece goes out
 * the bytes sent are checked against the gate's hash: a file changed meanwhile is never run
 * (the wrapper sees EOF before all of stdin and starts nothing). */
static long call_stdin_pull(void *ud, unsigned char *buf, size_t n, char *msg, size_t cap)
{
    rexec_call *c = ud;
    unsigned char md[32];
    char hex[65];
    unsigned int mdlen = 0;
    ssize_t got;
    if (c->stdin_sent >= c->stdin_len) { /* a put's file is sent (or empty): its trailer */
        if (rx_put_file_done(c, msg, cap) != 0)
            return -1;
        return (long)rx_put_trailer_next(c, buf, n);
    }
    n = rx_put_file_room(c, n);
    do
        got = read(c->stdin_fd, buf, n);
    while (got < 0 && errno == EINTR);
    if (got <= 0) {
        snprintf(msg, cap, "%s: %s", c->stdin_path,
                 got < 0 ? strerror(errno) : "the file shrank while it was sent");
        return -1;
    }
    c->stdin_sent += (uint64_t)got;
    rx_put_hashed(c, buf, (size_t)got);
    if (c->stdin_sent >= c->stdin_len && rx_put_file_done(c, msg, cap) != 0)
        return -1;
    if (c->stdin_sha == NULL) /* nothing binds the content: it goes as it is read */
        return got;
    EVP_DigestUpdate(c->stdin_sha, buf, (size_t)got);
    if (c->stdin_sent < c->stdin_len)
        return got;
    EVP_DigestFinal_ex(c->stdin_sha, md, &mdlen);
    rx_hex_encode(md, 32, hex);
    if (strcmp(hex, c->stdin_hex) == 0)
        return got;
    if (c->put != NULL)
        snprintf(msg, cap, "%s changed since it was approved (its SHA-256 is not the approved "
                           "one): nothing was put", c->stdin_path);
    else
        snprintf(msg, cap, "%s changed while it was sent: nothing ran", c->stdin_path);
    return -1;
}

/* A put's trailer follows its file on the wire; a framed stream carries it in a frame. */
static size_t call_wire_extra(const rexec_call *c)
{
    return c->stdin_stream ? 0 : rx_put_wire_extra(c);
}

/* The effective timeout: the caller may shorten the action's, never lengthen it. */
static int call_timeout(rexec_call *c, rexec_error *err)
{
    double limit = c->action->timeout_s > 0 ? c->action->timeout_s : c->ctx->ws->limits.timeout_s;
    if (c->timeout_s < 0 || c->timeout_s > limit)
        return rx_fail(err, REXEC_EREQUEST,
                       "timeout %.10g s is above the %.10g s that action \"%s\" allows", c->timeout_s,
                       limit, c->action->name);
    if (c->timeout_s == 0)
        c->timeout_s = limit;
    if (c->stdin_path)
        return call_stdin_file(c, err);
    if (c->stdin_data && c->stdin_len > call_max_stdin(c))
        return call_stdin_too_big(c, err);
    return 0;
}

/* The refusal record of a call that needs approval is written before its challenge file: a
 * challenge the audit log does not hold would be an approval nobody can account for. */
static int audit_challenge(void *ud, const rx_decision *d, rexec_error *err)
{
    rexec_call *c = ud;
    if (d != &c->dec)
        c->dec = *d;
    c->decided = 1;
    rx_fail(&c->err, REXEC_EPENDING, "%s", d->message);
    int r = rx_call_audit(c, "refused", err);
    c->refused_written = r == 0;
    c->decided = 0;
    c->err.code = 0;
    return r;
}

/* A grant is spent when the audit log says a call ran on it, whatever approvals/ says now. */
static int audit_grant_used(void *ud, const char *id, const char *host, int64_t created,
                            int *used, rexec_error *err)
{
    rexec_call *c = ud;
    return rx_audit_grant_used(c->ws_pin->dir, id, host, (time_t)created, used, err);
}

static int call_decide(rexec_call *c, rexec_error *err)
{
    rx_gate_input in = {.ws = c->ws_pin, .host = c->host, .action = c->action,
                        .values = c->values, .rendered = (const char *)c->rendered.data,
                        .stdin_data = c->stdin_data, .stdin_len = c->stdin_len,
                        .stdin_hash = c->stdin_path ? call_stdin_hash : NULL,
                        .grant_id = c->grant_id, .eval_only = c->eval_only,
                        .redactor = rx_call_redactor(c), .on_challenge = audit_challenge,
                        .grant_used = audit_grant_used, .ud = c, .fanout = c->fanout,
                        .requester_uid = c->client_user ? (long)c->client_uid : -1,
                        .requester_user = c->client_user,
                        .request_id = c->batch_id ? c->batch_id : c->run_id};
    int r = rx_gate_decide(&in, &c->dec, err);
    if (r != 0)
        return r;
    c->decided = 1;
    if (c->dec.verdict == RX_DENY)
        return rx_fail(err, REXEC_EDENIED, "%s", c->dec.message);
    if (c->dec.verdict == RX_REQUIRES_APPROVAL)
        return rx_fail(err, REXEC_EPENDING, "%s", c->dec.message);
    return 0;
}

/* The host key's passphrase (key_passphrase) goes to the redactor like any secret, so that
 * nothing this call reports can show it; it is never rendered into the script. Unreadable: the
 * connection reports that itself when it needs the value (auth.c). */
static void call_passphrase_secret(rexec_call *c)
{
    rexec_error ignored;
    size_t i = c->n_secrets;
    const char *name = c->host->key_passphrase;
    if (name == NULL)
        return;
    for (size_t k = 0; k < c->n_secrets; k++)
        if (strcmp(c->secrets[k].name, name) == 0)
            return; /* the action hands it out too: already redacted */
    c->n_redact_only = 1;
    if (rx_ws_secret_value(c->ctx->ws, name, &c->secret_values[i], &ignored) != 0) {
        c->n_redact_only = 0;
        rx_buf_free(&c->secret_values[i]);
        return;
    }
    c->secrets[i] = (rx_secret){name, c->secret_values[i].data, c->secret_values[i].len};
}

/* Secret values, read only for an allowed call and only those the action lists; then the
 * redactor that every output path of this call goes through. */
static int call_secrets(rexec_call *c, rexec_error *err)
{
    const rx_action *a = c->action;
    int r = 0;
    c->secret_values = calloc(a->n_secrets + 2, sizeof(rx_buf));
    c->secrets = calloc(a->n_secrets + 2, sizeof(rx_secret));
    if (c->secret_values == NULL || c->secrets == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < a->n_secrets; i++, c->n_secrets++) {
        r = rx_ws_secret_value(c->ctx->ws, a->secrets[i], &c->secret_values[i], err);
        c->secrets[i] = (rx_secret){a->secrets[i], c->secret_values[i].data,
                                    c->secret_values[i].len};
    }
    if (r == 0)
        call_passphrase_secret(c);
    return r;
}

static int call_redactor(rexec_call *c, rexec_error *err)
{
    int r = rx_call_build_redactor(c, err);
    if (r != 0)
        return r;
    uint64_t cap = c->action->max_output_bytes ? c->action->max_output_bytes
                                               : c->ctx->ws->limits.max_output_bytes;
    if (streams_init(c, cap))
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    return 0;
}

/* The pool takes the call out of its queue (rx_pool_exec_with_start): evidence is written as the
 * output arrives, so no writable evidence, no run. Opened here, not at the start, so that a call
 * waiting for a channel holds no files and no buffers (3 fds and 512 KiB a queued call before).
 * A call the pool tries again (nothing was sent) keeps what it opened. */
static int call_open_evidence(void *ud, rexec_error *err)
{
    rexec_call *c = ud;
    if (c->ev != NULL)
        return 0;
    return rx_evidence_open(&c->ev, c->ctx->ws->dir, c->run_id, rx_call_redactor(c), err);
}

/* The intent is durable: the call may go to its host (unless it was cancelled meanwhile). */
static void on_intent_done(rx_record_job *j)
{
    rexec_call *c = j->ud;
    const rx_limits *l = &c->ctx->ws->limits;
    int r;
    if (j->rc == 0)
        c->intent_written = 1;
    if (j->rc != 0) { /* no intent record, no run */
        c->err = j->err;
    } else if (c->cancelled) {
        rx_fail(&c->err, REXEC_ECANCELLED, "%s: cancelled before it started", c->host->name);
    } else {
        rx_exec_opts xo = {.script = c->script.data, .script_len = c->script.len,
                           .stdin_data = c->stdin_data,
                           .stdin_len = c->stdin_len + call_wire_extra(c), .nonce = c->nonce,
                           .backstop_s = c->timeout_s + l->kill_after_s + CALL_BACKSTOP_SLACK_S,
                           .drain_s = CALL_DRAIN_S, .setup_s = l->connect_timeout_s,
                           .runner_code = c->code.data, .runner_code_len = c->code.len,
                           .runner_fork = c->code_forks,
                           .min_rank = (int)c->action->containment, .timeout_s = c->timeout_s,
                           .stdin_pull = c->stdin_stream ? rx_call_stdin_stream_pull
                                         : c->stdin_path ? call_stdin_pull : NULL,
                           .stdin_ud = c, .stdin_piped = c->stdin_piped,
                           .stdin_framed = c->stdin_stream};
        rx_exec_cb cb = {on_exec_data, on_exec_done, c};
        if ((r = rx_pool_exec_with_start(c->ctx->pool, c->pool_host, &xo, &cb, call_open_evidence,
                                         &c->job)) != 0)
            rx_fail(&c->err, r, "out of memory");
        else
            call_set(c, CALL_ON_HOST);
        if (r == 0 && c->paused) /* paused before it had a job */
            rx_pool_pause(c->job, 1);
    }
    call_forms_free(c); /* the pool keeps its own copies */
    if (c->err.code != 0)
        call_end_early(c);
}

static void call_wire_free(rx_buf *wire, rx_buf *bindings)
{
    rx_buf_free(wire); /* wiped: bindings held the values */
    rx_buf_free(bindings);
}

/* Renders both forms of the call (the pool runs it on a runner, remote/runner.sh, where it can,
 * and on a channel of its own, remote/wrapper.sh, where not) and hands the intent record to the
 * recorder; the call goes on in on_intent_done. */
static int call_send(rexec_call *c, rexec_error *err)
{
    const rx_limits *l = &c->ctx->ws->limits;
    int r;
    if (rx_nonce_new(c->nonce) != 0)
        return rx_fail(err, REXEC_EINTERNAL, "no randomness for the call's nonce");
    /* A piped stdin reaches the command as it is sent. A file whose digest an approval or a
     * grant binds is checked only once all of it is read (call_stdin_pull), so it is staged:
     * the command then never sees a byte of a file that changed. */
    c->stdin_piped = c->action->stdin_piped && c->stdin_sha == NULL;
    if ((r = rx_put_begin(c, err)) != 0)
        return r;
    /* What is sent holds no value as text: placeholders are expansions of variables that
     * bindings assigns (render_params.c). c->rendered, with the values quoted in place, is what
     * the records, the approver and the caller see. */
    rx_buf wire, bindings;
    rx_buf_init(&wire, CALL_MAX_COMMAND);
    rx_buf_init(&bindings, CALL_MAX_COMMAND);
    if ((r = rx_render_wire(c->action, c->values, &wire, &bindings, err)) != 0) {
        call_wire_free(&wire, &bindings);
        return r;
    }
    rx_render_in in = {.command = wire.data ? (const char *)wire.data : "",
                       .bindings = (const char *)bindings.data,
                       .secrets = c->secrets,
                       .n_secrets = c->n_secrets, .cwd = c->action->cwd,
                       .timeout_s = c->timeout_s, .kill_after_s = l->kill_after_s,
                       .stdin_len = c->stdin_data || c->stdin_path
                                        ? (long long)(c->stdin_len + call_wire_extra(c)) : -1,
                       .stdin_framed = c->stdin_stream,
                       .min_containment = c->action->containment,
                       .max_containment = c->host->max_containment, .nonce = c->nonce,
                       .run_id = c->run_id, .stdin_piped = c->stdin_piped};
    rx_buf_init(&c->script, CALL_MAX_SCRIPT);
    rx_buf_init(&c->code, CALL_MAX_SCRIPT);
    r = rx_render_script(&in, &c->script, err);
    if (r == 0)
        r = rx_render_runner_code(&in, &c->code, err);
    c->code_forks = r == 0 && rx_render_runner_forks(&in);
    call_wire_free(&wire, &bindings);
    if (r == 0 && (r = rx_call_audit_submit(c, "intent", on_intent_done, err)) == 0) {
        call_set(c, CALL_INTENT);
        return 0;
    }
    call_forms_free(c);
    return r;
}

/* The gate decided (r: 0 allowed, else the refusal in c->err): the secrets, the redactor, the
 * rendering and the intent, or the end. */
static void call_after_gate(rexec_call *c, int r)
{
    if (c->cb.on_gate != NULL)
        c->cb.on_gate(c->cb.ud, c->decided ? c->dec.reason : NULL,
                      c->decided && c->dec.challenge_id[0] ? c->dec.challenge_id : NULL);
    if (r == 0 && c->cancelled)
        r = rx_fail(&c->err, REXEC_ECANCELLED, "%s: cancelled before it started", c->host->name);
    if (r == 0 && !c->eval_only && (r = call_secrets(c, &c->err)) == 0 &&
        (r = call_redactor(c, &c->err)) == 0)
        r = call_send(c, &c->err);
    if (r != 0 || c->eval_only) {
        c->err.code = r;
        call_end_early(c);
    }
}

/* The gate reads and writes files when the call brings a grant (approvals/, and the audit log
 * scanned for the grant's use), needs approval (a challenge file and a refusal record, fsynced)
 * or binds a --stdin file (hashed whole): then it runs on libuv's thread pool, not on the loop
 * that every other call and client of serve shares. Everything it touches is the call's own or
 * pinned by it (its workspace, its secret set) or locked (the audit log: the recorder's mutex). */
static int call_gate_may_block(const rexec_call *c)
{
    return c->grant_id != NULL || c->stdin_path != NULL || c->action->risk > c->host->allow;
}

static void on_gate_work(uv_work_t *w)
{
    rexec_call *c = w->data;
    /* A piped stdin that an approval or a grant will bind is spooled before the gate sees it,
     * so that the challenge gets its length too (call_stdin_hash would spool it anyway). */
    c->gate_rc = 0;
    if (c->stdin_stream && (c->grant_id != NULL || c->action->risk > c->host->allow))
        c->gate_rc = rx_call_stdin_spool(c, &c->err);
    if (c->gate_rc == 0)
        c->gate_rc = call_decide(c, &c->err);
}

static void on_gate_done(uv_work_t *w, int status)
{
    rexec_call *c = w->data;
    if (status != 0) /* the loop is closing: the work never ran */
        c->gate_rc = rx_fail(&c->err, REXEC_ECANCELLED, "%s: cancelled before it started",
                             c->host->name);
    call_after_gate(c, c->gate_rc);
}

static void call_begin(rexec_call *c);

static void on_start_delay(uv_timer_t *t)
{
    rexec_call *c = t->data;
    c->delaying = 0;
    call_begin(c);
}

static void call_obj_cancel(rx_ctx_obj *o)
{
    rexec_call_cancel((rexec_call *)o); /* obj is the call's first member */
}

int rexec_call_start(rexec_ctx *ctx, const rexec_request *req, const rexec_callbacks *cb,
                     rexec_call **out, rexec_error *err)
{
    if (req->traceparent && rx_traceparent_check(req->traceparent, "traceparent", err) != 0)
        return REXEC_EREQUEST; /* an unusable request: nothing starts, nothing is recorded */
    rexec_call *c = calloc(1, sizeof(*c));
    if (c == NULL || ctx->closing)
        return free(c), rx_fail(err, ctx->closing ? REXEC_ECANCELLED : REXEC_ENOMEM,
                                ctx->closing ? "rexec is shutting down" : "out of memory");
    c->ctx = ctx;
    c->cb = *cb;
    c->stdin_fd = -1;
    c->t0_ns = uv_hrtime();
    rx_run_id_new(c->run_id);
    /* libuv's timer init cannot fail (1.44); checked all the same */
    if (call_copy_request(c, req) != 0 || uv_timer_init(ctx->loop, &c->defer) != 0) {
        call_free(c);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    c->defer.data = c;
    c->gate_work.data = c;
    rx_ctx_track(ctx, &c->obj, call_obj_cancel);
    c->fanout = req->eval_only ? NULL : rx_ctx_fanout_take(ctx, c->batch_id);
    rx_call_secrets_pin(c);
    rx_call_ws_pin(c);
    if (out)
        *out = c;
    if (req->start_delay_ms > 0) { /* a retry: the host gets time to come back */
        c->delaying = 1;
        uv_timer_start(&c->defer, on_start_delay, req->start_delay_ms, 0);
        return 0;
    }
    call_begin(c);
    return 0;
}

/* The call from its host's resolution on: the gate, then the host. */
static void call_begin(rexec_call *c)
{
    rexec_ctx *ctx = c->ctx;
    int r = call_resolve(c, &c->err);
    if (r == 0 && c->cancelled) /* cancelled while it waited to start */
        r = rx_fail(&c->err, REXEC_ECANCELLED, "%s: cancelled before it started", c->host->name);
    if (r == 0)
        r = call_timeout(c, &c->err);
    if (r == 0 && call_gate_may_block(c)) {
        if ((r = rx_call_audit_ready(c, &c->err)) == 0 &&
            (r = uv_queue_work(ctx->loop, &c->gate_work, on_gate_work, on_gate_done)) != 0)
            r = rx_fail(&c->err, REXEC_ENOMEM, "cannot queue the gate's work: %s",
                        uv_strerror(r));
        if (r == 0)
            return; /* goes on in on_gate_done */
    } else if (r == 0) {
        r = call_decide(c, &c->err);
    }
    call_after_gate(c, r);
}

void rexec_call_cancel(rexec_call *c)
{
    if (c->state >= CALL_RECORD || c->cancelled)
        return;
    rexec_call_resume(c); /* the cancelled call's output must drain for its end line to come */
    c->cancelled = 1;
    atomic_store(&c->stdin_stop, 1);
    if (c->delaying) /* waiting to start: it ends now, as cancelled before it started */
        uv_timer_start(&c->defer, on_start_delay, 0, 0);
    if (c->job)
        rx_pool_cancel(c->job);
}

void rexec_call_pause(rexec_call *c)
{
    if (c->state >= CALL_RECORD || c->cancelled || c->paused)
        return;
    c->paused = 1;
    if (c->job)
        rx_pool_pause(c->job, 1);
}

void rexec_call_resume(rexec_call *c)
{
    if (c->state >= CALL_RECORD || !c->paused)
        return;
    c->paused = 0;
    if (c->job)
        rx_pool_pause(c->job, 0);
}
