/* libFuzzer target for the streaming redactor.
 *
 * Input layout: [nsecrets][4 chunk-size seeds][plant offset]{[len][value]}... [data]
 * Up to three secrets are taken from the front of the input; the data (with secret 0 planted at
 * a fuzz-chosen offset, so matching paths run often) is fed in fuzz-chosen chunk sizes.
 * Aborts if a handed-out value survives in the output, or if the chunked output differs from the
 * one-shot output (the result must not depend on where reads happen to split). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "redact.h"

#define MAX_SECRETS 3

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static int take(input *in, size_t k, const uint8_t **out)
{
    if (in->n < k)
        return -1;
    *out = in->p;
    in->p += k;
    in->n -= k;
    return 0;
}

static void to_buf(void *ctx, const unsigned char *data, size_t len)
{
    if (rx_buf_add(ctx, data, len) != 0)
        abort();
}

/* A value the oracle can check: no NUL, and no '[' or ']' or part of a marker, so it cannot
 * be spelled by a "[REDACTED:S]" marker together with the bytes around it. Part of a marker in
 * any case: some forms are matched without regard to case (base32), so rx_redact_contains_secret
 * finds a value "redacted" in the marker "[REDACTED:S]" that replaced it. */
static int usable(unsigned char *v, size_t n)
{
    unsigned char up[48];
    for (size_t i = 0; i < n; i++) {
        if (v[i] == 0 || v[i] == '[' || v[i] == ']')
            v[i] = 'x';
        up[i] = v[i] >= 'a' && v[i] <= 'z' ? (unsigned char)(v[i] - 'a' + 'A') : v[i];
    }
    return memmem("REDACTED:S", 10, up, n) == NULL;
}

static void redact_chunked(const rx_redactor *r, const uint8_t *d, size_t n, const uint8_t *seeds,
                           rx_buf *out)
{
    rx_redact_stream *s = rx_redact_stream_new(r, to_buf, out);
    if (s == NULL)
        abort();
    for (size_t i = 0, k = 0; i < n; k++) {
        size_t c = (size_t)seeds[k % 4] % 64 + 1;
        c = seeds[k % 4] & 0x80 ? c * 97 : c; /* some long chunks too */
        c = c < n - i ? c : n - i;
        rx_redact_feed(s, d + i, c);
        i += c;
    }
    rx_redact_finish(s);
    rx_redact_stream_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size};
    const uint8_t *hdr, *len, *val;
    unsigned char vals[MAX_SECRETS][48];
    rx_secret s[MAX_SECRETS];
    if (take(&in, 6, &hdr) != 0)
        return 0;
    size_t ns = 1 + hdr[0] % MAX_SECRETS;
    for (size_t i = 0; i < ns; i++) {
        if (take(&in, 1, &len) != 0 || take(&in, RX_SECRET_MIN_LEN + len[0] % 33, &val) != 0)
            return 0;
        size_t n = RX_SECRET_MIN_LEN + len[0] % 33;
        memcpy(vals[i], val, n);
        if (!usable(vals[i], n))
            return 0;
        s[i] = (rx_secret){"S", vals[i], n};
    }
    rx_redactor *r;
    rexec_error e;
    if (rx_redactor_new(&r, s, ns, &e) != 0)
        abort(); /* every value here is valid */

    /* the data, with secret 0 planted at a fuzz-chosen offset */
    size_t n = in.n + s[0].len, at = in.n ? hdr[5] % (in.n + 1) : 0;
    uint8_t *d = malloc(n + 1);
    memcpy(d, in.p, at);
    memcpy(d + at, s[0].value, s[0].len);
    memcpy(d + at + s[0].len, in.p + at, in.n - at);

    rx_buf one, chunked;
    rx_buf_init(&one, SIZE_MAX);
    rx_buf_init(&chunked, SIZE_MAX);
    if (rx_redact_buf(r, d, n, &one) != 0)
        abort();
    redact_chunked(r, d, n, hdr + 1, &chunked);
    if (one.len != chunked.len || memcmp(one.data, chunked.data, one.len) != 0)
        abort(); /* the result depends on where the chunks split */
    for (size_t i = 0; i < ns; i++)
        if (memmem(one.data, one.len, s[i].value, s[i].len) != NULL)
            abort(); /* a handed-out value survived */
    if (rx_redact_contains_secret(r, one.data, one.len))
        abort(); /* an encoded form survived */
    rx_buf_free(&one);
    rx_buf_free(&chunked);
    free(d);
    rx_redactor_free(r);
    return 0;
}
