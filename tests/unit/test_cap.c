/* Redact first, cap second: whatever the cap and wherever the reads split the stream, what is
 * kept is a prefix of the fully redacted output, so a cap can never cut a secret into an
 * unredacted prefix. test_call_sink_every_offset drives call.c's own output path (on_exec_data
 * -> redactor -> stream_sink, visible to tests through RX_UNITTEST_STATIC); the others test the
 * redactor and the capped append it uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>

#include "buf.h"
#include "call.h"
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

typedef struct shown {
    unsigned char data[256];
    size_t len;
} shown;

static void on_output(void *ud, int stream, const void *data, size_t len)
{
    shown *o = ud;
    assert_int_equal(stream, REXEC_STDOUT);
    assert_true(o->len + len <= sizeof(o->data));
    memcpy(o->data + o->len, data, len);
    o->len += len;
}

/* The real sink: for every cap and every split of the channel reads, what the caller is shown,
 * what the result keeps and what the sha256 covers are the same prefix of the fully redacted
 * stream; every byte is counted; truncated says whether the cap cut anything. */
static void test_call_sink_every_offset(void **state)
{
    (void)state;
    rx_secret sec = {"TOKEN", (const unsigned char *)SECRET, strlen(SECRET)};
    rexec_error err;
    rx_ws ws = {.limits = {.max_result_bytes = 1 << 20}};
    rexec_ctx ctx = {.ws = &ws};
    rx_action action = {.name = "t"};
    rexec_call c = {.ctx = &ctx, .action = &action, .capture = 1};
    assert_int_equal(rx_redactor_new(&c.redactor, &sec, 1, &err), 0);
    const char *input = "before " SECRET " middle " SECRET SECRET " after";
    size_t n = strlen(input);

    capped full;
    run(c.redactor, input, n, 1 << 20, &full);
    for (size_t cap = 0; cap <= full.kept.len + 2; cap += 3) {
        for (size_t split = 0; split <= n; split++) {
            shown out = {0};
            c.cb = (rexec_callbacks){.on_output = on_output, .ud = &out};
            assert_int_equal(streams_init(&c, cap), 0);
            on_exec_data(&c, REXEC_STDOUT, (const unsigned char *)input, split);
            on_exec_data(&c, REXEC_STDOUT, (const unsigned char *)input + split, n - split);
            streams_finish(&c);
            call_stream *st = &c.out[0];
            size_t want = cap < full.kept.len ? cap : full.kept.len;
            char sha[65];
            assert_int_equal(out.len, want);
            assert_int_equal(st->result.len, want);
            if (want) {
                assert_memory_equal(out.data, full.kept.data, want);
                assert_memory_equal(st->result.data, full.kept.data, want);
            }
            rx_sha256_hex(full.kept.data, want, sha);
            assert_string_equal(st->sha_hex, sha);
            assert_int_equal(st->truncated, cap < full.kept.len);
            /* past the cap bytes are counted raw, not redacted: at least what was kept */
            assert_true(st->total >= want);
            for (int i = 0; i < 2; i++) {
                rx_redact_stream_free(c.out[i].rs);
                rx_buf_free(&c.out[i].result);
                EVP_MD_CTX_free(c.out[i].sha);
                memset(&c.out[i], 0, sizeof(c.out[i]));
            }
        }
    }
    rx_buf_free(&full.kept);
    rx_redactor_free(c.redactor);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_capped),
        cmocka_unit_test(test_cap_every_offset),
        cmocka_unit_test(test_call_sink_every_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
