/* `rexec check HOST`: connect, verify the host key, authenticate, and probe the VM for what the
 * remote contract needs (remote/check.sh). Nothing of the catalog runs; no audit record. */
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "call.h"
#include "err.h"
#include "fsutil.h"

typedef struct check {
    rx_ctx_obj obj; /* first: the context's registry (rexec_ctx_close waits for the check) */
    rexec_ctx *ctx;
    rx_pool_job *job; /* while the probe runs */
    int reported;
    const rx_host *host;
    char *host_name;
    void (*on_done)(void *ud, const rexec_check_result *r);
    void *ud;
    rx_buf facts;
    uint64_t t0;
    rexec_error err;
    uv_timer_t defer;
} check;

static void on_check_closed(uv_handle_t *h)
{
    check *k = h->data;
    rexec_ctx *ctx = k->ctx;
    rx_buf_free(&k->facts);
    free(k->host_name);
    rx_ctx_untrack(ctx, &k->obj);
    free(k);
    rx_ctx_released(ctx);
}

/* rexec_ctx_close: a probe in flight is stopped; it reports (cancelled) from the loop. */
static void check_obj_cancel(rx_ctx_obj *o)
{
    check *k = (check *)o;
    if (k->job && !k->reported)
        rx_pool_cancel(k->job);
}

/* The value of "key=" in the facts, copied into out. */
static void fact(const check *k, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    out[0] = 0;
    for (const char *p = (const char *)k->facts.data; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            snprintf(out, n, "%.*s", (int)(len - kl - 1), p + kl + 1);
            return;
        }
        p = eol ? eol + 1 : p + len;
    }
}

/* The evidence volume nearly full (less than REXEC_EVIDENCE_MIN_FREE_PCT, default 10, percent
 * free): every executed call writes evidence, and a full volume makes every call exit 74. */
static const char *evidence_space_warning(const rexec_ctx *ctx, char *out, size_t n)
{
    struct statvfs v;
    const char *env = getenv("REXEC_EVIDENCE_MIN_FREE_PCT");
    double min_pct = env && *env ? atof(env) : 10.0;
    char *dir = rx_fs_join(ctx->ws->dir, "evidence");
    int r = dir ? statvfs(dir, &v) : -1;
    if (r != 0)
        r = statvfs(ctx->ws->dir, &v); /* no evidence yet: the workspace's volume */
    free(dir);
    if (r != 0 || v.f_blocks == 0)
        return NULL;
    double free_pct = 100.0 * (double)v.f_bavail / (double)v.f_blocks;
    if (free_pct >= min_pct)
        return NULL;
    snprintf(out, n, "the evidence volume is nearly full: %.1f%% free (%llu MiB); prune with "
                     "`rexec evidence prune --older-than 30d`",
             free_pct, (unsigned long long)((double)v.f_bavail * (double)v.f_frsize / 1048576.0));
    return out;
}

/* audit.syslog names a socket nobody listens on: the copies are being lost. connect() on a
 * datagram socket finds that out without sending anything. */
static const char *audit_copy_warning(const rexec_ctx *ctx, char *out, size_t n)
{
    const char *path = ctx->ws->audit_syslog;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (path == NULL)
        return NULL;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (ok)
        return NULL;
    snprintf(out, n, "audit.syslog: %.100s: %s: the audit copy is not being received", path,
             strerror(e));
    return out;
}

/* What the controller's side lacks, for every host's report. */
static const char *local_warning(const rexec_ctx *ctx, char *out, size_t n)
{
    const char *w = evidence_space_warning(ctx, out, n);
    return w != NULL ? w : audit_copy_warning(ctx, out, n);
}

static void check_report(check *k)
{
    char bash[64], tmo[8], cont[32], warning[256];
    fact(k, "bash", bash, sizeof(bash));
    fact(k, "timeout", tmo, sizeof(tmo));
    fact(k, "containment", cont, sizeof(cont));
    if (k->err.code == 0 && (bash[0] == 0 || strcmp(tmo, "yes") != 0))
        rx_fail(&k->err, REXEC_EHOST, "%s: the VM lacks %s, which rexec needs", k->host_name,
                bash[0] ? "coreutils timeout" : "bash");
    rexec_check_result r = {.host = k->host_name,
                            .ok = k->err.code == 0,
                            .err = k->err.code,
                            .error = k->err.code ? k->err.msg : NULL,
                            .facts = k->facts.data ? (const char *)k->facts.data : "",
                            .containment = cont[0] ? cont : NULL,
                            .duration_ms = (uv_hrtime() - k->t0) / 1000000,
                            .exit_status = rexec_err_exit_code(k->err.code),
                            .warning = local_warning(k->ctx, warning, sizeof(warning))};
    k->reported = 1;
    k->on_done(k->ud, &r);
    uv_close((uv_handle_t *)&k->defer, on_check_closed);
}

static void on_check_defer(uv_timer_t *t)
{
    check_report(t->data);
}

static void on_check_data(void *ud, int stream, const unsigned char *data, size_t len)
{
    check *k = ud;
    if (stream == REXEC_STDOUT)
        rx_buf_add(&k->facts, data, len);
}

static void on_check_done(void *ud, const rx_exec_result *x)
{
    check *k = ud;
    k->job = NULL;
    if (x->err)
        rx_fail(&k->err, x->err, "%s", x->errmsg);
    check_report(k);
}

/* The check script is the wrapper's functions and a probe: a few KiB. */
#define CHECK_SCRIPT_MAX (1 << 20)
/* The facts the VM prints (key=value lines); more is cut. */
#define CHECK_FACTS_MAX (64 * 1024)
/* The probe runs no user command: if it has not ended in this long, the connection is stuck. */
#define CHECK_BACKSTOP_S 30
#define CHECK_DRAIN_S 1

static int check_send(check *k)
{
    rx_buf script;
    char nonce[RX_NONCE_LEN + 1];
    if (rx_nonce_new(nonce) != 0)
        return rx_fail(&k->err, REXEC_EINTERNAL, "%s: no randomness for the check's nonce",
                       k->host_name);
    rx_buf_init(&script, CHECK_SCRIPT_MAX);
    int r = rx_render_check_script(&script, nonce);
    if (r == 0) {
        rx_exec_opts xo = {.script = script.data, .script_len = script.len, .nonce = nonce,
                           .backstop_s = CHECK_BACKSTOP_S, .drain_s = CHECK_DRAIN_S,
                           .setup_s = k->ctx->ws->limits.connect_timeout_s};
        rx_exec_cb cb = {on_check_data, on_check_done, k};
        r = rx_pool_exec(k->ctx->pool, rx_ctx_pool_host(k->ctx, k->host), &xo, &cb, &k->job);
    }
    rx_buf_free(&script);
    if (r != 0) /* each failure with its own class, not all as out of memory */
        rx_fail(&k->err, r, "%s: cannot start the check: %s", k->host_name, rexec_strerror(r));
    return r;
}

int rexec_check_start(rexec_ctx *ctx, const char *host,
                      void (*on_done)(void *ud, const rexec_check_result *r), void *ud,
                      rexec_error *err)
{
    if (ctx->closing)
        return rx_fail(err, REXEC_ECANCELLED, "rexec is shutting down");
    check *k = calloc(1, sizeof(*k));
    if (k == NULL || (k->host_name = strdup(host)) == NULL) {
        free(k);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    k->ctx = ctx;
    k->on_done = on_done;
    k->ud = ud;
    k->t0 = uv_hrtime();
    rx_buf_init(&k->facts, CHECK_FACTS_MAX);
    if (uv_timer_init(ctx->loop, &k->defer) != 0) { /* cannot fail in libuv 1.44 */
        rx_buf_free(&k->facts);
        free(k->host_name);
        free(k);
        return rx_fail(err, REXEC_ENOMEM, "cannot start the check: no timer");
    }
    k->defer.data = k;
    rx_ctx_track(ctx, &k->obj, check_obj_cancel);
    k->host = rx_ws_host(ctx->ws, host);
    if (k->host == NULL)
        rx_fail(&k->err, REXEC_ECONFIG, "unknown host \"%s\" (`rexec hosts` lists the inventory)",
                host);
    else
        check_send(k);
    if (k->err.code)
        uv_timer_start(&k->defer, on_check_defer, 0, 0);
    return 0;
}

/* "key=value" lines as one object: {"bash": "5.2.15", "timeout": "yes", ...}. */
static cJSON *facts_json(const char *facts)
{
    cJSON *o = cJSON_CreateObject();
    for (const char *p = facts ? facts : ""; o && *p;) {
        const char *eol = strchr(p, '\n'), *eq;
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char *line = strndup(p, len);
        if (line && (eq = strchr(line, '=')) != NULL && eq != line) {
            line[eq - line] = 0;
            if (!cJSON_HasObjectItem(o, line))
                cJSON_AddStringToObject(o, line, eq + 1);
        }
        free(line);
        p += len + (eol != NULL);
    }
    return o;
}

cJSON *rx_check_json(const rexec_check_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    rx_json_add_str(o, "host", r->host);
    cJSON_AddBoolToObject(o, "ok", r->ok);
    rx_json_add_str(o, "containment", r->containment);
    cJSON_AddItemToObject(o, "facts", facts_json(r->facts));
    cJSON_AddNumberToObject(o, "duration_ms", (double)r->duration_ms);
    rx_json_add_str(o, "warning", r->warning);
    rx_json_add_str(o, "error", r->error);
    cJSON_AddNumberToObject(o, "exit_status", r->exit_status);
    return o;
}

char *rexec_check_result_to_json(const rexec_check_result *r)
{
    cJSON *o = rx_check_json(r);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}
