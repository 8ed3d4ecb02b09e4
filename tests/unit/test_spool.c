/* serve's stdin spool (src/api/serve_stdin.c): what is added reads back byte for byte through
 * the path the calls open, the file has no name in evidence/, a piece past the limit is refused
 * whole (and the spool stays usable), and a closed spool refuses more. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "serve_stdin.h"

static char ws[64];

static int setup(void **state)
{
    (void)state;
    snprintf(ws, sizeof(ws), "/tmp/rx-spool-XXXXXX");
    return mkdtemp(ws) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", ws);
    return system(cmd);
}

static size_t entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, "..") != 0);
    if (d)
        closedir(d);
    return n;
}

static void test_reads_back(void **state)
{
    (void)state;
    rx_spool sp;
    rexec_error e = {0};
    unsigned char piece[1000], back[3001];
    char edir[96];
    for (size_t i = 0; i < sizeof(piece); i++)
        piece[i] = (unsigned char)(i * 7);
    assert_int_equal(rx_spool_open(&sp, ws, 4096, &e), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rx_spool_add(&sp, piece, sizeof(piece), &e), 0);
    assert_int_equal(rx_spool_add(&sp, "", 0, &e), 0);
    assert_int_equal(sp.len, 3000);
    snprintf(edir, sizeof(edir), "%s/evidence", ws);
    assert_int_equal(entries(edir), 0); /* no name: nothing to leave behind */
    int fd = open(sp.path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, back, sizeof(back)), 3000);
    close(fd);
    for (int i = 0; i < 3; i++)
        assert_memory_equal(back + i * 1000, piece, sizeof(piece));
    struct stat st;
    assert_int_equal(stat(edir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    rx_spool_close(&sp);
    assert_int_equal(sp.fd, -1);
    assert_int_equal(rx_spool_add(&sp, piece, 1, &e), REXEC_EINTERNAL);
}

static void test_limit(void **state)
{
    (void)state;
    rx_spool sp;
    rexec_error e = {0};
    unsigned char piece[100] = {1};
    assert_int_equal(rx_spool_open(&sp, ws, 250, &e), 0);
    assert_int_equal(rx_spool_add(&sp, piece, 100, &e), 0);
    assert_int_equal(rx_spool_add(&sp, piece, 100, &e), 0);
    assert_int_equal(rx_spool_add(&sp, piece, 100, &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "more than limits.max_stdin_bytes (250 bytes)"));
    assert_int_equal(sp.len, 200); /* the refused piece is not half written */
    assert_int_equal(rx_spool_add(&sp, piece, 50, &e), 0);
    assert_int_equal(sp.len, 250);
    struct stat st;
    assert_int_equal(fstat(sp.fd, &st), 0);
    assert_int_equal(st.st_size, 250);
    rx_spool_close(&sp);
}

static void test_unusable_dir(void **state)
{
    (void)state;
    rx_spool sp;
    rexec_error e = {0};
    char bad[96];
    snprintf(bad, sizeof(bad), "%s/file", ws);
    int fd = open(bad, O_CREAT | O_WRONLY, 0600);
    close(fd);
    /* the workspace "directory" is a file: evidence/ cannot be made in it */
    assert_int_equal(rx_spool_open(&sp, bad, 10, &e), REXEC_EAUDIT);
    assert_int_equal(sp.fd, -1);
    rx_spool_close(&sp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unusable_dir, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
