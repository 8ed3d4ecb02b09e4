/* `rexec check HOST`: connect, verify the host key, authenticate, and probe the VM for what the
 * remote contract needs (remote/check.sh). Nothing of the catalog runs; no audit record. */
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "err.h"

typedef struct check {
    rexec_ctx *ctx;
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
    rx_buf_free(&k->facts);
    free(k->host_name);
    free(k);
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

static void check_report(check *k)
{
    char bash[64], tmo[8], cont[32];
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
                            .exit_status = rexec_err_exit_code(k->err.code)};
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
    if (x->err)
        rx_fail(&k->err, x->err, "%s", x->errmsg);
    check_report(k);
}

static int check_send(check *k)
{
    rx_buf script;
    char nonce[RX_NONCE_LEN + 1];
    if (rx_nonce_new(nonce) != 0)
        return rx_fail(&k->err, REXEC_EINTERNAL, "%s: no randomness for the check's nonce",
                       k->host_name);
    rx_buf_init(&script, 1 << 20);
    int r = rx_render_check_script(&script, nonce);
    if (r == 0) {
        rx_exec_opts xo = {.script = script.data, .script_len = script.len, .nonce = nonce,
                           .backstop_s = 30, .drain_s = 1,
                           .setup_s = k->ctx->ws->limits.connect_timeout_s};
        rx_exec_cb cb = {on_check_data, on_check_done, k};
        r = rx_pool_exec(k->ctx->pool, k->host, &xo, &cb, NULL);
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
    check *k = calloc(1, sizeof(*k));
    if (k == NULL || (k->host_name = strdup(host)) == NULL) {
        free(k);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    k->ctx = ctx;
    k->on_done = on_done;
    k->ud = ud;
    k->t0 = uv_hrtime();
    rx_buf_init(&k->facts, 64 * 1024);
    uv_timer_init(ctx->loop, &k->defer);
    k->defer.data = k;
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
