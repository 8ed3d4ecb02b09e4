/* traceparent's form (src/config/traceparent.c): the W3C example and its variants are taken,
 * every broken part is refused with a message naming that part. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "traceparent.h"

#define GOOD "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static void refused(const char *v, const char *says)
{
    rexec_error e = {0};
    assert_int_equal(rx_traceparent_check(v, "traceparent", &e), REXEC_EREQUEST);
    if (strstr(e.msg, says) == NULL)
        fail_msg("\"%s\": \"%s\" does not say \"%s\"", v ? v : "(null)", e.msg, says);
    assert_non_null(strstr(e.msg, "traceparent: "));
}

static void test_valid(void **state)
{
    (void)state;
    rexec_error e = {0};
    assert_int_equal(rx_traceparent_check(GOOD, "t", &e), 0);
    assert_int_equal(rx_traceparent_check("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "t", &e), 0);
    /* a later version may go on after the flags, behind a '-' */
    assert_int_equal(rx_traceparent_check("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz", "t", &e), 0);
}

static void test_invalid(void **state)
{
    (void)state;
    refused(NULL, "not a W3C traceparent");
    refused("", "not a W3C traceparent");
    refused("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", "not a W3C traceparent");
    refused("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "not a W3C traceparent");
    refused("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version");
    refused("0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version");
    refused("00-00000000000000000000000000000000-00f067aa0ba902b7-01", "trace id");
    refused("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "trace id");
    refused("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "parent id");
    refused("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01", "parent id");
    refused("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x", "flags");
    refused(GOOD "-extra", "after the flags");  /* version 00 is exactly 55 */
    refused(GOOD " ", "after the flags");
    refused("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", "after the flags");
    refused("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-a\nb", "printable");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_valid), cmocka_unit_test(test_invalid)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
