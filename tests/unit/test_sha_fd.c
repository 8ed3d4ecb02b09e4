/* rx_sha256_fd (src/base/buf.c), the one read-and-hash loop of a file (a put's file through
 * serve, a --stdin file an approval binds): for sizes around its read piece (256 KiB) the digest
 * is the one-shot digest of the same bytes and *got the size; a max short of the size hashes the
 * first max bytes only; the fd's offset is left where it was; a bad fd is -1 with errno, and the
 * output is then empty (never a digest). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"

#define PIECE (256u * 1024u)

static unsigned char *data_of(size_t n)
{
    unsigned char *d = malloc(n ? n : 1);
    uint32_t x = 2463534242u;
    assert_non_null(d);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        d[i] = (unsigned char)x;
    }
    return d;
}

static int file_of(const unsigned char *d, size_t n)
{
    char path[] = "/tmp/rx-test-sha-fd.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(write(fd, d, n), (ssize_t)n);
    return fd;
}

static void test_sizes(void **state)
{
    (void)state;
    const size_t sizes[] = {0, 1, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE + 12345};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        unsigned char *d = data_of(n);
        int fd = file_of(d, n);
        char want[65], got_hex[65];
        uint64_t got = 12345;
        assert_int_equal(rx_sha256_hex(d, n, want), 0);
        off_t at = lseek(fd, 0, SEEK_CUR);
        assert_int_equal(rx_sha256_fd(fd, UINT64_MAX, got_hex, &got), 0);
        assert_string_equal(got_hex, want);
        assert_int_equal(got, n);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), at); /* pread: the offset is the caller's */
        if (n > 1) { /* a max short of the file: its first max bytes */
            size_t m = n / 2 + 1;
            assert_int_equal(rx_sha256_hex(d, m, want), 0);
            assert_int_equal(rx_sha256_fd(fd, m, got_hex, &got), 0);
            assert_string_equal(got_hex, want);
            assert_int_equal(got, m);
        }
        /* a max past the end: the whole file, *got tells the caller it is short */
        assert_int_equal(rx_sha256_fd(fd, (uint64_t)n + 10, got_hex, &got), 0);
        assert_int_equal(got, n);
        close(fd);
        free(d);
    }
}

static void test_bad_fd(void **state)
{
    (void)state;
    char hex[65] = "x";
    uint64_t got = 7;
    errno = 0;
    assert_int_equal(rx_sha256_fd(-1, UINT64_MAX, hex, &got), -1);
    assert_int_equal(errno, EBADF);
    assert_string_equal(hex, "");
    assert_int_equal(got, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_bad_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
