/* SHA-256 on a thread of its own (src/base/sha_worker.c): the digest of bytes handed over in
 * pieces of every size (smaller than, equal to, across and many times a ring piece, more than
 * the whole ring at once) is the one-shot digest of the same bytes; nothing handed over is the
 * empty digest; a worker freed without its digest ends cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/sha.h>

#include "sha_worker.h"

#define TOTAL (3u * RX_SHA_WORKER_SLOTS * RX_SHA_WORKER_SLOT + 12345u)

static unsigned char *data_of(size_t n)
{
    unsigned char *d = malloc(n);
    uint32_t x = 2463534242u;
    assert_non_null(d);
    for (size_t i = 0; i < n; i++) { /* xorshift: no two pieces alike */
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        d[i] = (unsigned char)x;
    }
    return d;
}

/* The bytes handed over in pieces of `step` bytes (the last one shorter). */
static void digest_in_steps(size_t step)
{
    unsigned char *d = data_of(TOTAL), want[32], got[32];
    SHA256(d, TOTAL, want);
    rx_sha_worker *w = rx_sha_worker_start();
    assert_non_null(w);
    for (size_t off = 0; off < TOTAL; off += step)
        rx_sha_worker_add(w, d + off, TOTAL - off < step ? TOTAL - off : step);
    assert_int_equal(0, rx_sha_worker_finish(w, got));
    assert_memory_equal(want, got, 32);
    free(d);
}

static void test_pieces(void **state)
{
    (void)state;
    static const size_t steps[] = {1000, 4096, RX_SHA_WORKER_SLOT - 1, RX_SHA_WORKER_SLOT,
                                   RX_SHA_WORKER_SLOT + 1, 3 * RX_SHA_WORKER_SLOT + 7,
                                   (RX_SHA_WORKER_SLOTS + 2) * RX_SHA_WORKER_SLOT, TOTAL};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        digest_in_steps(steps[i]);
}

static void test_empty(void **state)
{
    (void)state;
    unsigned char want[32], got[32];
    SHA256((const unsigned char *)"", 0, want);
    rx_sha_worker *w = rx_sha_worker_start();
    assert_non_null(w);
    assert_int_equal(0, rx_sha_worker_finish(w, got));
    assert_memory_equal(want, got, 32);
}

static void test_free_without_digest(void **state)
{
    (void)state;
    unsigned char *d = data_of(RX_SHA_WORKER_SLOT * 2);
    rx_sha_worker *w = rx_sha_worker_start();
    assert_non_null(w);
    rx_sha_worker_add(w, d, RX_SHA_WORKER_SLOT * 2);
    rx_sha_worker_free(w);
    rx_sha_worker_free(NULL);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_free_without_digest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
