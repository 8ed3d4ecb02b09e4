/* The renderer: action + validated parameters + secrets + stdin + limits -> `bash -s` script.
 * See docs/remote-contract.md for the exact shape. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <openssl/rand.h>

#include "err.h"
#include "oneshot.h"
#include "render.h"
#include "template.h"

/* Every shell word the controller produces goes through here. Inside single quotes bash takes
 * every byte literally except ', which is closed, escaped and reopened. */
static int quote_body(rx_buf *out, const void *value, size_t len)
{
    const unsigned char *p = value;
    int r = 0;
    for (size_t i = 0; r == 0 && i < len; i++)
        r = p[i] == '\'' ? rx_buf_add(out, "'\\''", 4) : rx_buf_addc(out, p[i]);
    return r;
}

int rx_shell_quote(rx_buf *out, const void *value, size_t len)
{
    int r = rx_buf_addc(out, '\'');
    if (r == 0)
        r = quote_body(out, value, len);
    return r ? r : rx_buf_addc(out, '\'');
}

struct render_ctx {
    const rx_action *action;
    const rexec_param *values;
    rx_buf *out;
    rexec_error *err;
};

static int render_text(void *ctx, const char *text, size_t n)
{
    struct render_ctx *c = ctx;
    return rx_buf_add(c->out, text, n);
}

static int render_param(void *ctx, const char *name, size_t n)
{
    struct render_ctx *c = ctx;
    int i = rx_ws_param_index(c->action, name, n);
    if (i < 0)
        return rx_fail(c->err, REXEC_ECONFIG, "action \"%s\": {%.*s} is not a declared parameter",
                       c->action->name, (int)n, name);
    if (c->action->params[i].type == RX_P_SHELL) /* free-form shell: the one exception */
        return rx_buf_add(c->out, c->values[i].value, c->values[i].value_len);
    return rx_shell_quote(c->out, c->values[i].value, c->values[i].value_len);
}

int rx_render_command(const rx_action *action, const rexec_param *values, rx_buf *out,
                      rexec_error *err)
{
    struct render_ctx c = {action, values, out, err};
    int r = rx_template_walk(action->command, render_text, render_param, &c);
    if (r == REXEC_EREQUEST)
        return rx_fail(err, r, "action \"%s\": the rendered command is longer than %zu bytes",
                       action->name, out->max);
    return r;
}

static int add_var(rx_buf *out, const char *name, const char *value)
{
    int r = rx_buf_adds(out, name);
    if (r == 0)
        r = rx_buf_addc(out, '=');
    if (r == 0)
        r = rx_shell_quote(out, value, strlen(value));
    return r ? r : rx_buf_addc(out, '\n');
}

/* __rx_cmd: the parameter bindings, then the command (what the wrapper's `bash -c` runs). */
static int add_cmd(rx_buf *out, const rx_render_in *in)
{
    int r = rx_buf_adds(out, "__rx_cmd='");
    if (r == 0 && in->bindings)
        r = quote_body(out, in->bindings, strlen(in->bindings));
    if (r == 0)
        r = quote_body(out, in->command, strlen(in->command));
    return r ? r : rx_buf_adds(out, "'\n");
}

/* The kernel refuses an exec whose single argument or environment entry passes MAX_ARG_STRLEN,
 * or whose total passes ARG_MAX: say so here, naming the culprit, before anything is sent. */
static int check_sizes(const rx_render_in *in, rexec_error *err)
{
    size_t cmd = strlen(in->command) + (in->bindings ? strlen(in->bindings) : 0);
    size_t total = cmd + 512;
    if (cmd + 1024 > RX_MAX_ARG_STRLEN)
        return rx_fail(err, REXEC_EREQUEST,
                       "the rendered command and its parameters are %zu bytes; the VM accepts at "
                       "most %u in one argument",
                       cmd, RX_MAX_ARG_STRLEN - 1024);
    for (size_t i = 0; i < in->n_secrets; i++) {
        size_t n = strlen(in->secrets[i].name) + 1 + in->secrets[i].len;
        if (n > RX_MAX_ARG_STRLEN)
            return rx_fail(err, REXEC_ECONFIG,
                           "secret %s is %zu bytes; the VM accepts at most %u bytes in one "
                           "environment entry",
                           in->secrets[i].name, in->secrets[i].len,
                           RX_MAX_ARG_STRLEN - (unsigned)strlen(in->secrets[i].name) - 1);
        total += n;
    }
    if (total > RX_MAX_ENV_TOTAL)
        return rx_fail(err, REXEC_ECONFIG,
                       "the command and secrets of this call need %zu bytes of argv and "
                       "environment; rexec allows at most %u",
                       total, RX_MAX_ENV_TOTAL);
    return 0;
}

static int render_header(const rx_render_in *in, rx_buf *out)
{
    return rx_buf_addf(out,
                       "# rexec %s run %s\n"
                       "__rx_nonce=%s __rx_timeout=%.3f __rx_timeout_us=%lld __rx_kill_after=%.3f "
                       "__rx_stdin_len=%lld __rx_min_rank=%d __rx_max_rank=%d%s%s\n",
                       REXEC_VERSION, in->run_id ? in->run_id : "-", in->nonce, in->timeout_s,
                       (long long)llround(in->timeout_s * 1e6), in->kill_after_s,
                       in->stdin_framed ? 0 : in->stdin_len, (int)in->min_containment,
                       (int)in->max_containment,
                       in->stdin_piped && in->stdin_len >= 0 ? " __rx_stdin_piped=1" : "",
                       in->stdin_framed ? " __rx_stdin_framed=1" : "");
}

static int check_secrets(const rx_render_in *in, rexec_error *err)
{
    for (size_t i = 0; i < in->n_secrets; i++) {
        const char *why;
        if (!rx_secret_name_ok(in->secrets[i].name, &why))
            return rx_fail(err, REXEC_ECONFIG, "secret %s: %s", in->secrets[i].name, why);
        if (memchr(in->secrets[i].value, 0, in->secrets[i].len))
            return rx_fail(err, REXEC_ECONFIG, "secret %s holds a NUL byte", in->secrets[i].name);
    }
    return 0;
}

static int render_exports(const rx_render_in *in, rx_buf *out)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < in->n_secrets; i++) {
        r = rx_buf_addf(out, "export %s=", in->secrets[i].name);
        if (r == 0)
            r = rx_shell_quote(out, in->secrets[i].value, in->secrets[i].len);
        if (r == 0)
            r = rx_buf_addc(out, '\n');
    }
    return r;
}

/* remote/copier.sh (one perl process with splice(2) instead of one dd per frame) is sent only
 * with a stdin big enough to pay for its perl start (a probe, a few ms): framed (from a pipe,
 * length unknown) or at least RX_RENDER_COPIER_MIN bytes. */
static int render_wants_copier(const rx_render_in *in)
{
    return in->stdin_framed || in->stdin_len >= RX_RENDER_COPIER_MIN;
}

int rx_render_script(const rx_render_in *in, rx_buf *out, rexec_error *err)
{
    int r;
    if (strlen(in->nonce) != RX_NONCE_LEN || !(in->timeout_s > 0) || in->kill_after_s < 0)
        return rx_fail(err, REXEC_EINTERNAL, "render: bad nonce or limits");
    if ((r = check_sizes(in, err)) != 0 || (r = check_secrets(in, err)) != 0)
        return r;
    r = render_header(in, out);
    if (r == 0)
        r = add_var(out, "__rx_cwd", in->cwd ? in->cwd : "");
    if (r == 0)
        r = add_cmd(out, in);
    if (r == 0)
        r = render_exports(in, out);
    if (r == 0)
        r = rx_buf_add(out, rx_remote_wrapper, rx_remote_wrapper_len);
    if (r == 0 && render_wants_copier(in))
        r = rx_buf_add(out, rx_remote_copier, rx_remote_copier_len);
    if (r == 0)
        r = rx_buf_adds(out, "__rx_main; exit\n");
    if (r != 0)
        return rx_fail(err, r, "rendering the script: %s", rexec_strerror(r));
    return 0;
}

/* What a runner's contained shell runs for one call (remote/runner.sh): the exports, the stdin
 * and working directory, a start notice for the slot (on the FIFO the runner names in
 * __rx_st, opened read-write so that the open never waits for a slot that is gone), then the
 * command. Nothing of it is the nonce. */
int rx_render_runner_code(const rx_render_in *in, rx_buf *out, rexec_error *err)
{
    int r;
    if ((r = check_sizes(in, err)) != 0 || (r = check_secrets(in, err)) != 0)
        return r;
    r = rx_buf_adds(out, "unset __rx_c\n");
    if (r == 0)
        r = render_exports(in, out);
    if (r == 0)
        r = rx_buf_adds(out, "if [ -n \"$__rx_in\" ]; then exec 0<\"$__rx_in\" || "
                             "{ builtin echo stdin 1<>\"$__rx_st\"; exit 1; }; fi\n");
    if (r == 0 && in->cwd && *in->cwd) {
        r = rx_buf_adds(out, "cd -- ");
        if (r == 0)
            r = rx_shell_quote(out, in->cwd, strlen(in->cwd));
        if (r == 0)
            r = rx_buf_adds(out, " 2>/dev/null || { builtin echo cd 1<>\"$__rx_st\"; exit 1; }\n");
    }
    /* The status goes before the command, which runs only once it was written: a slot that
     * finds none (phase setup) can say the command did not run (an open that failed, EMFILE). */
    if (r == 0)
        r = rx_buf_adds(out, "builtin echo ok 1<>\"$__rx_st\" || exit 1; unset __rx_st __rx_in\n");
    if (r == 0 && in->bindings)
        r = rx_buf_adds(out, in->bindings);
    /* What `bash -c` does for its last simple command: no fork (oneshot.h). */
    if (r == 0 && rx_shell_oneshot(in->command))
        r = rx_buf_adds(out, "exec ");
    if (r == 0)
        r = rx_buf_adds(out, in->command);
    if (r == 0)
        r = rx_buf_addc(out, '\n');
    if (r != 0)
        return rx_fail(err, r, "rendering the call: %s", rexec_strerror(r));
    return 0;
}

static bool secret_named(void *ud, const char *name, size_t n)
{
    const rx_render_in *in = ud;
    for (size_t i = 0; i < in->n_secrets; i++)
        if (strlen(in->secrets[i].name) == n && memcmp(in->secrets[i].name, name, n) == 0)
            return true;
    return false;
}

bool rx_render_runner_forks(const rx_render_in *in)
{
    return rx_shell_slot_forkable(in->command, secret_named, (void *)in);
}

int rx_render_runner_start(rx_buf *out, const char *rnonce, int max_rank)
{
    int r = rx_buf_addf(out, "__rx_rnonce=%s __rx_max_rank=%d\n", rnonce, max_rank);
    if (r == 0)
        r = rx_buf_add(out, rx_remote_wrapper, rx_remote_wrapper_len);
    if (r == 0)
        r = rx_buf_add(out, rx_remote_runner, rx_remote_runner_len);
    return r ? r : rx_buf_adds(out, "__rx_runner; exit\n");
}

int rx_render_check_script(rx_buf *out, const char *nonce)
{
    int r = rx_buf_addf(out, "__rx_nonce=%s\n", nonce);
    if (r == 0)
        r = rx_buf_add(out, rx_remote_wrapper, rx_remote_wrapper_len);
    if (r == 0)
        r = rx_buf_add(out, rx_remote_check, rx_remote_check_len);
    return r ? r : rx_buf_adds(out, "__rx_check; exit\n");
}

int rx_nonce_new(char out[RX_NONCE_LEN + 1])
{
    unsigned char raw[RX_NONCE_LEN / 2];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return -1;
    rx_hex_encode(raw, sizeof(raw), out);
    return 0;
}
