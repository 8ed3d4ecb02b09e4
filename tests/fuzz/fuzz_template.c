/* libFuzzer target for where a value goes (issue 31): the loader's reading of a template
 * (rx_ws_check_template, template_ctx.c) and the wire form the renderer sends (rx_render_wire).
 *
 * Input: one byte whose low two bits choose the type of parameter "p" (string, path, int, enum),
 * the template, '\0', the value of p. A second parameter "q" (string) has a fixed value. When the
 * loader accepts the template, rendering it must succeed and:
 *   - the bindings are exactly `__rx_p_p=<rx_shell_quote(value)>\n__rx_p_q=<...>\n`;
 *   - the command is the same whatever the values (rendered again with other values): no value
 *     ever changes what bash parses;
 *   - the command holds one expansion of __rx_p_p per {p} placeholder (and of __rx_p_q per {q})
 *     besides what the template's own text has;
 *   - the value's bytes never appear in the command when they could not come from elsewhere
 *     (the value has a byte that neither the template nor the expansions hold; an 8-byte
 *     minimum keeps the check meaningful).
 * No bash is run: the checks are in-process and the target stays fast. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "render.h"
#include "template.h"
#include "workspace.h"

#define Q_VALUE "q-'$(touch /nonexistent/q)'\"`;\n"

static const rx_ptype types[4] = {RX_P_STRING, RX_P_PATH, RX_P_INT, RX_P_ENUM};

struct count {
    size_t p, q;
};

static int count_text(void *ctx, const char *text, size_t n)
{
    (void)ctx, (void)text, (void)n;
    return 0;
}

static int count_param(void *ctx, const char *name, size_t n)
{
    struct count *c = ctx;
    if (n == 1 && name[0] == 'p')
        c->p++;
    else if (n == 1 && name[0] == 'q')
        c->q++;
    return 0;
}

static size_t occurrences(const unsigned char *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle), c = 0;
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0)
            c++;
    return c;
}

/* The bindings rx_render_wire must write for these values. */
static void expected_bindings(rx_buf *out, const char *pv, size_t plen)
{
    rx_buf_adds(out, "__rx_p_p=");
    rx_shell_quote(out, pv, plen);
    rx_buf_adds(out, "\n__rx_p_q=");
    rx_shell_quote(out, Q_VALUE, strlen(Q_VALUE));
    rx_buf_addc(out, '\n');
}

/* 1 when the value holds a byte that neither the template nor an expansion text can supply. */
static int value_is_foreign(const char *tmpl, size_t tlen, const char *v, size_t vlen)
{
    static const char exp_bytes[] = "\"${}_rxpq";
    unsigned char seen[256] = {0};
    for (size_t i = 0; i < tlen; i++)
        seen[(unsigned char)tmpl[i]] = 1;
    for (const char *e = exp_bytes; *e; e++)
        seen[(unsigned char)*e] = 1;
    for (size_t i = 0; i < vlen; i++)
        if (!seen[(unsigned char)v[i]])
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    rx_ptype type = types[data[0] & 3];
    data++, size--;
    const uint8_t *nul = memchr(data, 0, size);
    if (nul == NULL)
        return 0;
    size_t tlen = (size_t)(nul - data), vlen = size - tlen - 1;
    char *tmpl = strndup((const char *)data, tlen);
    char *val = malloc(vlen + 1);
    memcpy(val, nul + 1, vlen);
    val[vlen] = 0;
    for (size_t i = 0; i < vlen; i++)
        if (val[i] == 0)
            val[i] = 'x'; /* values never hold NUL (validation refuses it) */
    char *enum_values[1] = {val};
    rx_param_spec ps[2] = {
        {.name = "p", .type = type, .enum_values = type == RX_P_ENUM ? enum_values : NULL,
         .n_enum = type == RX_P_ENUM},
        {.name = "q", .type = RX_P_STRING}};
    rx_action a = {.name = "fuzz", .command = tmpl, .params = ps, .n_params = 2};
    rexec_param v[2] = {{"p", val, vlen}, {"q", Q_VALUE, strlen(Q_VALUE)}};
    rexec_error e;
    if (rx_ws_check_template(&a, &e) == 0) {
        rx_buf cmd, bind, want, cmd2, bind2;
        rx_buf_init(&cmd, 4 << 20);
        rx_buf_init(&bind, 4 << 20);
        rx_buf_init(&want, 4 << 20);
        rx_buf_init(&cmd2, 4 << 20);
        rx_buf_init(&bind2, 4 << 20);
        /* the loader accepted it: the renderer must agree */
        if (rx_render_wire(&a, v, &cmd, &bind, &e) != 0)
            abort();
        expected_bindings(&want, val, vlen);
        if (bind.len != want.len || memcmp(bind.data, want.data, want.len) != 0)
            abort();
        /* other values, same command */
        rexec_param other[2] = {{"p", "1", 1}, {"q", "", 0}};
        if (rx_render_wire(&a, other, &cmd2, &bind2, &e) != 0 || cmd2.len != cmd.len ||
            (cmd.len && memcmp(cmd2.data, cmd.data, cmd.len) != 0))
            abort();
        /* one expansion per placeholder, besides the template's own text */
        struct count c = {0, 0};
        rx_template_walk(tmpl, count_text, count_param, &c);
        const unsigned char *cd = (const unsigned char *)cmd.data;
        if (occurrences(cd, cmd.len, "${__rx_p_p}") !=
                c.p + occurrences((const unsigned char *)tmpl, tlen, "${__rx_p_p}") ||
            occurrences(cd, cmd.len, "${__rx_p_q}") !=
                c.q + occurrences((const unsigned char *)tmpl, tlen, "${__rx_p_q}"))
            abort();
        /* the value is only in the bindings */
        if (cmd.len && vlen >= 8 && value_is_foreign(tmpl, tlen, val, vlen) &&
            memmem(cmd.data, cmd.len, val, vlen) != NULL)
            abort();
        /* q's value has no brace and cannot straddle an expansion: if the template's text
         * does not hold it, neither may the command */
        if (cmd.len && memmem(tmpl, tlen, Q_VALUE, strlen(Q_VALUE)) == NULL &&
            memmem(cmd.data, cmd.len, Q_VALUE, strlen(Q_VALUE)) != NULL)
            abort();
        rx_buf_free(&cmd);
        rx_buf_free(&bind);
        rx_buf_free(&want);
        rx_buf_free(&cmd2);
        rx_buf_free(&bind2);
    }
    free(tmpl);
    free(val);
    return 0;
}
