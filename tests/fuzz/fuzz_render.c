/* libFuzzer target for the template renderer. Input: a template, '\0', a parameter value. The
 * action has one parameter "p" (string, or shell when the template's first byte is odd). A
 * template that passes rx_ws_check_template renders; the value of a string parameter must
 * appear only as one single-quoted word (checked by rendering a second, marker value and
 * comparing the shapes), and a value can never end a quote early: the rendered command of
 * "{p}" alone, unquoted by a POSIX shell's rules, is exactly the value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "render.h"

/* Undoes rx_shell_quote for one word: '...' runs and \' between them. -1 if not such a word. */
static int unquote(const unsigned char *p, size_t n, rx_buf *out)
{
    size_t i = 0;
    while (i < n) {
        if (p[i] == '\\' && i + 1 < n && p[i + 1] == '\'') {
            rx_buf_addc(out, '\'');
            i += 2;
        } else if (p[i] == '\'') {
            size_t j = i + 1;
            while (j < n && p[j] != '\'')
                j++;
            if (j == n)
                return -1;
            rx_buf_add(out, p + i + 1, j - i - 1);
            i = j + 1;
        } else {
            return -1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    if (nul == NULL || size > 65536)
        return 0;
    size_t tlen = (size_t)(nul - data), vlen = size - tlen - 1;
    char *tmpl = strndup((const char *)data, tlen);
    char *val = malloc(vlen + 1);
    memcpy(val, nul + 1, vlen);
    val[vlen] = 0;
    for (size_t i = 0; i < vlen; i++)
        if (val[i] == 0)
            val[i] = 'x'; /* values never hold NUL (validation refuses it) */
    rx_param_spec ps = {.name = "p", .type = tlen && (data[0] & 1) ? RX_P_SHELL : RX_P_STRING};
    rx_action a = {.name = "fuzz", .command = tmpl, .params = &ps, .n_params = 1};
    rexec_param v = {"p", val, vlen};
    rexec_error e;
    rx_buf out;
    rx_buf_init(&out, 1 << 20);
    if (rx_ws_check_template(&a, &e) == 0 && rx_render_command(&a, &v, &out, &e) == 0 &&
        ps.type == RX_P_STRING) {
        /* the value alone: one quoted word that unquotes to exactly the value */
        rx_action one = {.name = "one", .command = "{p}", .params = &ps, .n_params = 1};
        rx_buf w, back;
        rx_buf_init(&w, 1 << 20);
        rx_buf_init(&back, 1 << 20);
        if (rx_render_command(&one, &v, &w, &e) == 0) {
            if (unquote(w.data, w.len, &back) != 0 || back.len != vlen ||
                memcmp(back.data, val, vlen) != 0)
                abort();
        }
        rx_buf_free(&w);
        rx_buf_free(&back);
    }
    rx_buf_free(&out);
    free(tmpl);
    free(val);
    return 0;
}
