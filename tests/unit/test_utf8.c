/* The one UTF-8 decoder (src/base/utf8.c): code points of well-formed sequences, and 0 for
 * every ill-formed class RFC 3629 names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "utf8.h"

static void decodes_well_formed(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t len;
        unsigned cp;
    } ok[] = {
        {"A", 1, 0x41},           {"\x7f", 1, 0x7f},         {"\xc2\x80", 2, 0x80},
        {"\xc3\xa9", 2, 0xe9},    {"\xe0\xa0\x80", 3, 0x800}, {"\xe2\x80\xae", 3, 0x202e},
        {"\xef\xbb\xbf", 3, 0xfeff}, {"\xf0\x90\x80\x80", 4, 0x10000},
        {"\xf4\x8f\xbf\xbf", 4, 0x10ffff},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
        unsigned cp = 0;
        assert_int_equal(rx_utf8_decode((const unsigned char *)ok[i].s, strlen(ok[i].s), &cp),
                         ok[i].len);
        assert_int_equal(cp, ok[i].cp);
    }
}

static void refuses_ill_formed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "\x80",             /* stray continuation */
        "\xc0\xaf",         /* overlong (C0/C1) */
        "\xe0\x80\xaf",     /* overlong 3-byte */
        "\xf0\x80\x80\xaf", /* overlong 4-byte */
        "\xed\xa0\x80",     /* surrogate U+D800 */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "\xf5\x80\x80\x80", /* F5..FF */
        "\xe2\x80",         /* truncated */
        "\xe2\x28\xa1",     /* bad continuation */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        assert_int_equal(rx_utf8_decode((const unsigned char *)bad[i], strlen(bad[i]), NULL), 0);
    size_t at = 99;
    assert_int_equal(rx_utf8_check("ok\xc3\xa9\xed\xa0\x80", 8, &at), -1);
    assert_int_equal(at, 4);
    assert_int_equal(rx_utf8_check("ok\xc3\xa9", 4, NULL), 0);
}

/* rx_utf8_check skips ASCII 8 bytes at a time: an ill-formed byte, or a sequence cut by the end,
 * is found at every offset of a long ASCII text, and a well-formed one is let through there. */
static void check_at_every_offset(void **state)
{
    (void)state;
    unsigned char buf[40];
    for (size_t at = 0; at + 2 <= sizeof(buf); at++) {
        size_t bad = 99;
        memset(buf, 'a', sizeof(buf));
        buf[at] = 0xc3, buf[at + 1] = 0xa9; /* é */
        assert_int_equal(rx_utf8_check(buf, sizeof(buf), NULL), 0);
        buf[at + 1] = 'a'; /* a lead byte without its continuation */
        assert_int_equal(rx_utf8_check(buf, sizeof(buf), &bad), -1);
        assert_int_equal(bad, at);
        buf[at] = 0xff;
        assert_int_equal(rx_utf8_check(buf, sizeof(buf), &bad), -1);
        assert_int_equal(bad, at);
        memset(buf, 'a', sizeof(buf));
        buf[at] = 0xe2; /* cut by the end of the text */
        assert_int_equal(rx_utf8_check(buf, at + 1, &bad), -1);
        assert_int_equal(bad, at);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decodes_well_formed),
        cmocka_unit_test(refuses_ill_formed),
        cmocka_unit_test(check_at_every_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
