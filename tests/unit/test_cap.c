/* Redact first, cap second: whatever the cap and wherever the reads split the stream, what is
 * kept is a prefix of the fully redacted output, so a cap can never cut a secret into an
 * unredacted prefix. Uses the redactor and the capped store the call's sinks use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "redact.h"

#define SECRET "s3cr3t-Va1ue/with+chars=="

typedef struct capped {
    rx_buf kept;
    size_t total;
} capped;

static void sink(void *ctx, const unsigned char *data, size_t len)
{
    capped *c = ctx;
    rx_buf_add_capped(&c->kept, data, len);
    c->total += len;
}

/* Redacts input fed in two reads split at `split`, keeping at most cap bytes. */
static void run(const rx_redactor *r, const char *input, size_t split, size_t cap, capped *out)
{
    size_t n = strlen(input);
    rx_buf_init(&out->kept, cap);
    out->total = 0;
    rx_redact_stream *s = rx_redact_stream_new(r, sink, out);
    assert_non_null(s);
    rx_redact_feed(s, input, split);
    rx_redact_feed(s, input + split, n - split);
    rx_redact_finish(s);
    rx_redact_stream_free(s);
}

static void test_cap_every_offset(void **state)
{
    (void)state;
    rx_secret sec = {"TOKEN", (const unsigned char *)SECRET, strlen(SECRET)};
    rx_redactor *r = NULL;
    rexec_error err;
    assert_int_equal(rx_redactor_new(&r, &sec, 1, &err), 0);
    const char *input = "before " SECRET " middle " SECRET SECRET " after";
    size_t n = strlen(input);

    capped full;
    run(r, input, n, 1 << 20, &full);
    assert_null(memmem(full.kept.data, full.kept.len, "s3cr3t", 6));

    for (size_t cap = 0; cap <= full.kept.len + 2; cap++) {
        for (size_t split = 0; split <= n; split++) {
            capped c;
            run(r, input, split, cap, &c);
            size_t want = cap < full.kept.len ? cap : full.kept.len;
            assert_int_equal(c.kept.len, want);
            assert_int_equal(c.total, full.kept.len); /* counted before the cap */
            if (want)
                assert_memory_equal(c.kept.data, full.kept.data, want);
            /* no 4-byte piece of the secret survives, at any cap */
            for (size_t k = 0; k + 4 <= strlen(SECRET); k++)
                assert_null(memmem(c.kept.data ? c.kept.data : (unsigned char *)"", c.kept.len,
                                   SECRET + k, 4));
            rx_buf_free(&c.kept);
        }
    }
    rx_buf_free(&full.kept);
    rx_redactor_free(r);
}

static void test_add_capped(void **state)
{
    (void)state;
    rx_buf b;
    rx_buf_init(&b, 5);
    assert_int_equal(rx_buf_add_capped(&b, "abc", 3), 3);
    assert_int_equal(rx_buf_add_capped(&b, "defg", 4), 2);
    assert_int_equal(rx_buf_add_capped(&b, "h", 1), 0);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, "abcde", 5);
    rx_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_capped),
        cmocka_unit_test(test_cap_every_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
