/* Parameters that reach the shell as data only (render.h: rx_render_wire).
 *
 * The command sent to the VM never holds a parameter's value as text: each placeholder becomes
 * an expansion of the variable __rx_p_NAME, and the values are bound to those variables by
 * assignments the controller quotes (rx_shell_quote) at the start of the call's shell. bash
 * parses the command without the values in it, so no value can change how the command parses,
 * whatever its bytes and whatever the template around it; where bash would evaluate an
 * expansion as code, the loader refused the template (template_ctx.c). The one exception is a
 * `shell` parameter, inserted raw as before (risk L3). */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "render.h"
#include "template.h"

struct wire_ctx {
    const rx_action *action;
    const rexec_param *values;
    const unsigned char *forms;
    size_t n_forms, k;
    rx_buf *out;
    rexec_error *err;
    int err_set;
};

static int wire_text(void *ctx, const char *text, size_t n)
{
    struct wire_ctx *c = ctx;
    return rx_buf_add(c->out, text, n);
}

static int wire_param(void *ctx, const char *name, size_t n)
{
    struct wire_ctx *c = ctx;
    int i = rx_ws_param_index(c->action, name, n);
    if (i < 0 || c->k >= c->n_forms)
        return c->err_set = 1, rx_fail(c->err, REXEC_ECONFIG, "action \"%s\": {%.*s} is not a declared parameter",
                       c->action->name, (int)n, name);
    switch (c->forms[c->k++]) {
    case RX_TF_RAW:
        return rx_buf_add(c->out, c->values[i].value, c->values[i].value_len);
    case RX_TF_BARE:
        return rx_buf_addf(c->out, "${" RX_TMPL_VAR_PREFIX "%.*s}", (int)n, name);
    default:
        return rx_buf_addf(c->out, "\"${" RX_TMPL_VAR_PREFIX "%.*s}\"", (int)n, name);
    }
}

/* One assignment per parameter the template uses (a `shell` one is inserted raw instead). */
static int wire_bindings(const rx_action *a, const rexec_param *values, rx_buf *out)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < a->n_params; i++) {
        if (a->params[i].type == RX_P_SHELL || values[i].value == NULL)
            continue;
        r = rx_buf_addf(out, RX_TMPL_VAR_PREFIX "%s=", a->params[i].name);
        if (r == 0)
            r = rx_shell_quote(out, values[i].value, values[i].value_len);
        if (r == 0)
            r = rx_buf_addc(out, '\n');
    }
    return r;
}

/* A put or get action calls a function of remote/put.sh or get.sh: their code goes first. */
static int wire_transfer_code(const rx_action *a, rx_buf *out)
{
    int r = 0;
    if (a->transfer == RX_XFER_NONE)
        return 0;
    r = rx_buf_add(out, rx_remote_xfer, rx_remote_xfer_len);
    if (r == 0 && a->transfer == RX_XFER_PUT)
        r = rx_buf_add(out, rx_remote_put, rx_remote_put_len);
    if (r == 0 && a->transfer == RX_XFER_GET)
        r = rx_buf_add(out, rx_remote_get, rx_remote_get_len);
    return r;
}

int rx_render_wire(const rx_action *action, const rexec_param *values, rx_buf *command,
                   rx_buf *bindings, rexec_error *err)
{
    unsigned char *forms = NULL;
    size_t n = 0;
    rx_tmpl_diag d;
    int r = rx_template_forms(action->command, rx_ws_param_kind, (void *)action, &forms, &n, &d);
    if (r < 0)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (r > 0) /* the loader refuses such a template: a catalog built by hand, or a bug */
        return rx_fail(err, REXEC_ECONFIG, "action \"%s\": line %zu, column %zu: a {placeholder} %s",
                       action->name, d.line, d.col, d.why);
    struct wire_ctx c = {action, values, forms, n, 0, command, err, 0};
    r = wire_transfer_code(action, command);
    if (r == 0)
        r = rx_template_walk(action->command, wire_text, wire_param, &c);
    free(forms);
    if (r != 0 && !c.err_set)
        return rx_fail(err, r, "action \"%s\": the rendered command is longer than %zu bytes",
                       action->name, command->max);
    if (r == 0 && (r = wire_bindings(action, values, bindings)) != 0)
        r = rx_fail(err, r, "action \"%s\": the parameters are longer than %zu bytes",
                    action->name, bindings->max);
    return r;
}
