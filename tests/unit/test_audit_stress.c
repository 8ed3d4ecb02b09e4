/* Concurrency: 32 processes appending at the same moment lose nothing and never interleave a
 * line, with and without rotation under contention (tests/tools/audit_stress.c does the work). */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#define AUDIT_STRESS_NO_MAIN
#include "../tools/audit_stress.c"

static int setup(void **state)
{
    static char ws[64];
    strcpy(ws, "/tmp/rx-audit-stress-XXXXXX");
    if (mkdtemp(ws) == NULL)
        return -1;
    *state = ws;
    return 0;
}

static int teardown(void **state)
{
    return rx_test_rm_tree(*state);
}

static void test_32_processes(void **state)
{
    assert_int_equal(audit_stress(*state, 32, 100, 0), 0);
}

/* Small files: the rename happens while 16 others wait on the lock, and the chain still
 * crosses every file. */
static void test_rotation_under_contention(void **state)
{
    char dir[128], **names = NULL;
    size_t n = 0;
    rexec_error e = {0};
    assert_int_equal(audit_stress(*state, 16, 40, 16 * 1024), 0);
    snprintf(dir, sizeof(dir), "%s/audit", (char *)*state);
    assert_int_equal(rx_audit_rotated(dir, &names, &n, &e), 0);
    assert_true(n >= 10); /* ~300 KiB of records in 16 KiB files */
    rx_audit_names_free(names, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_32_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_under_contention, setup, teardown),
    };
    return cmocka_run_group_tests_name("audit_stress", tests, NULL, NULL);
}
