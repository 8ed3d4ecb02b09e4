/* Parameter validation: each type's accepts and refusals, the text rules every type shares, and
 * what the messages may say. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "params.h"

static rx_param_spec spec_of(const char *name, rx_ptype type)
{
    rx_param_spec s;
    memset(&s, 0, sizeof(s));
    s.name = (char *)name;
    s.type = type;
    s.required = 1;
    return s;
}

static int check(const rx_param_spec *s, const char *v, rexec_error *e)
{
    return rx_param_validate(s, v, strlen(v), NULL, e);
}

/* Every row: a value, and whether it passes. */
struct vrow {
    const char *v;
    int ok;
};

static void run_rows(const rx_param_spec *s, const struct vrow *rows, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        rexec_error e = {0};
        int r = check(s, rows[i].v, &e);
        int want = rows[i].ok ? 0 : REXEC_EREQUEST;
        if (r != want) {
            print_error("%s \"%s\": expected %d, got %d (%s)\n", s->name, rows[i].v, want, r,
                        e.msg);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

#define RUN(spec, rows) run_rows(&(spec), rows, sizeof(rows) / sizeof(rows[0]))

static void test_string_pattern(void **state)
{
    (void)state;
    rx_param_spec s = spec_of("unit", RX_P_STRING);
    s.pattern = "^[A-Za-z0-9@._-]{1,64}$";
    assert_int_equal(regcomp(&s.re, s.pattern, REG_EXTENDED | REG_NOSUB), 0);
    s.has_re = 1;
    static const struct vrow rows[] = {
        {"nginx", 1}, {"getty@tty1.service", 1}, {"", 0}, {"a b", 0}, {"x;reboot", 0},
        {"nginx\n", 0}, {"$(id)", 0},
    };
    RUN(s, rows);
    rexec_error e = {0};
    assert_int_equal(check(&s, "x;y", &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, "parameter \"unit\": does not match pattern ^[A-Za-z0-9@._-]{1,64}$");
    regfree(&s.re);
    /* without a pattern, any text up to the length limit */
    rx_param_spec free_text = spec_of("note", RX_P_STRING);
    assert_int_equal(check(&free_text, "anything at all; $(even this)", &e), 0);
}

static void test_int(void **state)
{
    (void)state;
    rx_param_spec s = spec_of("count", RX_P_INT);
    static const struct vrow rows[] = {
        {"0", 1}, {"7", 1}, {"-7", 1}, {"9223372036854775807", 1}, {"-9223372036854775808", 1},
        {"9223372036854775808", 0}, {"-9223372036854775809", 0}, {"99999999999999999999", 0},
        {"007", 0}, {"00", 0}, {"-0", 0}, {"-01", 0}, {"+7", 0}, {"", 0}, {"-", 0}, {" 7", 0},
        {"7 ", 0}, {"0x10", 0}, {"1e3", 0}, {"1.0", 0}, {"１", 0}, {"7\n", 0},
    };
    RUN(s, rows);
    s.min = -5;
    s.max = 10;
    s.has_min = s.has_max = 1;
    static const struct vrow ranged[] = {
        {"-5", 1}, {"10", 1}, {"0", 1}, {"-6", 0}, {"11", 0}, {"9223372036854775807", 0},
    };
    RUN(s, ranged);
    rexec_error e = {0};
    assert_int_equal(check(&s, "11", &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, "parameter \"count\": 11 is out of range (-5..10)");
    assert_int_equal(check(&s, "007", &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "\"007\" is not canonical"));
    assert_int_equal(check(&s, "99999999999999999999", &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "does not fit a 64-bit integer"));
}

static void test_enum(void **state)
{
    (void)state;
    char *vals[] = {"start", "stop", "restart"};
    rx_param_spec s = spec_of("verb", RX_P_ENUM);
    s.enum_values = vals;
    s.n_enum = 3;
    static const struct vrow rows[] = {
        {"start", 1}, {"restart", 1}, {"Start", 0}, {"star", 0}, {"starts", 0}, {"", 0},
        {"start ", 0},
    };
    RUN(s, rows);
    rexec_error e = {0};
    /* exact bytes: a value with a NUL after a member's bytes is not the member */
    assert_int_equal(rx_param_validate(&s, "stop\0x", 6, NULL, &e), REXEC_EREQUEST);
    assert_int_equal(check(&s, "halt", &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, "parameter \"verb\": \"halt\" is not one of: start, stop, restart");
}

static void test_path(void **state)
{
    (void)state;
    rx_param_spec s = spec_of("file", RX_P_PATH);
    static const struct vrow rows[] = {
        {"/var/log/syslog", 1}, {"syslog", 1}, {"./-rf", 1}, {"a/./b", 1}, {"/", 1},
        {"..foo", 1}, {"foo..", 1}, {"a/..b/c", 1}, {"dir with space/x", 1}, {"caf\xc3\xa9", 1},
        {"", 0}, {"..", 0}, {"../etc/passwd", 0}, {"/var/log/../../etc/shadow", 0},
        {"a/..", 0}, {"a//../b", 0}, {"-rf", 0}, {"--help", 0}, {"a\nb", 0}, {"a\rb", 0},
        {"a\tb", 0}, {"a\x1b[31m", 0}, {"a\x7f", 0},
    };
    RUN(s, rows);
    rexec_error e = {0};
    assert_int_equal(check(&s, "-rf", &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "may not start with '-'"));
}

static void test_shell(void **state)
{
    (void)state;
    rx_param_spec s = spec_of("cmd", RX_P_SHELL);
    static const struct vrow rows[] = {
        {"ls -la /tmp; echo $HOME | wc -c", 1}, {"printf 'a\\nb'\nexit 3", 1},
        {"echo \xe2\x9c\x93", 1}, {"echo \xff", 0}, {"echo \xc0\xaf", 0},
    };
    RUN(s, rows);
}

/* The text rules hold for every type, checked before anything type-specific. */
static void test_nul_utf8_len_all_types(void **state)
{
    (void)state;
    static const struct {
        const char *v;
        size_t len;
        const char *what;
    } bad[] = {
        {"ab\0cd", 5, "NUL byte at offset 2"},
        {"\xc0\xaf", 2, "invalid UTF-8 at offset 0"},          /* overlong '/' */
        {"a\xe0\x80\xaf", 4, "invalid UTF-8 at offset 1"},     /* overlong 3-byte */
        {"\xf0\x80\x80\xaf", 4, "invalid UTF-8 at offset 0"},  /* overlong 4-byte */
        {"\xed\xa0\x80", 3, "invalid UTF-8 at offset 0"},      /* U+D800 surrogate */
        {"\xed\xbf\xbf", 3, "invalid UTF-8 at offset 0"},      /* U+DFFF surrogate */
        {"ab\xe2\x82", 4, "invalid UTF-8 at offset 2"},        /* truncated */
        {"\xf4\x90\x80\x80", 4, "invalid UTF-8 at offset 0"},  /* > U+10FFFF */
        {"\x80", 1, "invalid UTF-8 at offset 0"},              /* stray continuation */
        {"\xfe", 1, "invalid UTF-8 at offset 0"},
    };
    for (int t = RX_P_STRING; t <= RX_P_SHELL; t++) {
        rx_param_spec s = spec_of("p", (rx_ptype)t);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            rexec_error e = {0};
            assert_int_equal(rx_param_validate(&s, bad[i].v, bad[i].len, NULL, &e),
                             REXEC_EREQUEST);
            assert_non_null(strstr(e.msg, bad[i].what));
            /* the value itself is never echoed */
            assert_null(strstr(e.msg, "ab"));
        }
    }
    /* valid multibyte text passes the UTF-8 rule: U+10FFFF, U+E000, U+0800 */
    rx_param_spec sh = spec_of("p", RX_P_SHELL);
    rexec_error e = {0};
    assert_int_equal(rx_param_validate(&sh, "\xf4\x8f\xbf\xbf\xee\x80\x80\xe0\xa0\x80", 10, NULL,
                                       &e), 0);
}

static void test_max_len(void **state)
{
    (void)state;
    static char buf[RX_PARAM_DEFAULT_MAX_LEN + 2];
    rexec_error e = {0};
    rx_param_spec s = spec_of("cmd", RX_P_SHELL);
    memset(buf, 'x', sizeof(buf));
    assert_int_equal(rx_param_validate(&s, buf, RX_PARAM_DEFAULT_MAX_LEN, NULL, &e), 0);
    assert_int_equal(rx_param_validate(&s, buf, RX_PARAM_DEFAULT_MAX_LEN + 1, NULL, &e),
                     REXEC_EREQUEST);
    assert_string_equal(e.msg, "parameter \"cmd\": longer than 4096 bytes (4097)");
    s.max_len = 8;
    assert_int_equal(rx_param_validate(&s, buf, 8, NULL, &e), 0);
    assert_int_equal(rx_param_validate(&s, buf, 9, NULL, &e), REXEC_EREQUEST);
    /* a long int is described by size, not quoted */
    rx_param_spec n = spec_of("n", RX_P_INT);
    memset(buf, '9', 100);
    assert_int_equal(rx_param_validate(&n, buf, 100, NULL, &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "(100 bytes)"));
}

static void test_targets_syntax(void **state)
{
    (void)state;
    rx_param_spec u = spec_of("url", RX_P_URL), h = spec_of("host", RX_P_HOST),
                  c = spec_of("net", RX_P_CIDR);
    static const struct vrow urls[] = {
        {"https://example.com/x", 1}, {"http://x@y/", 0}, {"ftp://example.com/", 0},
        {"example.com", 0},
    };
    static const struct vrow hosts[] = {
        {"example.com", 1}, {"10.0.0.1", 1}, {"::1", 1}, {"127.1", 0}, {"-x.com", 0},
        {"a_b.com", 0}, {"example.com.", 0}, {"[::1]", 0},
    };
    static const struct vrow cidrs[] = {
        {"10.0.0.0/8", 1}, {"fd00::/8", 1}, {"10.0.0.1/8", 0}, {"10.0.0.0/40", 0},
    };
    RUN(u, urls);
    RUN(h, hosts);
    RUN(c, cidrs);
    rexec_error e = {0};
    assert_int_equal(check(&u, "http://x@y/", &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, "parameter \"url\": target \"http://x@y/\": userinfo is not "
                               "allowed in a URL");
}

static void test_in_scope(void **state)
{
    (void)state;
    rexec_error e = {0};
    rx_scope *sc = rx_scope_new();
    assert_int_equal(rx_scope_add_cidr(sc, "127.0.0.0/8", &e), 0);
    assert_int_equal(rx_scope_add_domain(sc, "lab.internal", &e), 0);
    rx_param_spec u = spec_of("target", RX_P_URL), h = spec_of("host", RX_P_HOST),
                  c = spec_of("net", RX_P_CIDR);
    u.in_scope = h.in_scope = c.in_scope = 1;
    const char *ok_url = "http://lab.internal/", *out_url = "http://evil.com/";
    assert_int_equal(rx_param_validate(&u, ok_url, strlen(ok_url), sc, &e), 0);
    assert_int_equal(rx_param_validate(&u, out_url, strlen(out_url), sc, &e), REXEC_EDENIED);
    assert_string_equal(e.msg, "parameter \"target\": target \"http://evil.com/\": evil.com port "
                               "80 is not in scope");
    assert_int_equal(rx_param_validate(&h, "127.0.0.9", 9, sc, &e), 0);
    assert_int_equal(rx_param_validate(&h, "10.0.0.1", 8, sc, &e), REXEC_EDENIED);
    assert_non_null(strstr(e.msg, "parameter \"host\""));
    assert_int_equal(rx_param_validate(&c, "127.1.0.0/16", 12, sc, &e), 0);
    assert_int_equal(rx_param_validate(&c, "0.0.0.0/0", 9, sc, &e), REXEC_EDENIED);
    /* no scope at all denies an in_scope parameter */
    assert_int_equal(rx_param_validate(&u, ok_url, strlen(ok_url), NULL, &e), REXEC_EDENIED);
    /* malformed is 65 even when in_scope */
    assert_int_equal(rx_param_validate(&u, "http://a@lab.internal/", 22, sc, &e),
                     REXEC_EREQUEST);
    /* without in_scope, an outside target passes the syntax check */
    u.in_scope = 0;
    assert_int_equal(rx_param_validate(&u, out_url, strlen(out_url), sc, &e), 0);
    rx_scope_free(sc);
}

/* The value need not be NUL-terminated: only len bytes are read. */
static void test_unterminated_value(void **state)
{
    (void)state;
    char v[3] = {'4', '2', '7'};
    rexec_error e = {0};
    rx_param_spec s = spec_of("n", RX_P_INT);
    s.max = 42;
    s.has_max = 1;
    assert_int_equal(rx_param_validate(&s, v, 2, NULL, &e), 0);
    assert_int_equal(rx_param_validate(&s, v, 3, NULL, &e), REXEC_EREQUEST);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_string_pattern),
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_enum),
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_shell),
        cmocka_unit_test(test_nul_utf8_len_all_types),
        cmocka_unit_test(test_max_len),
        cmocka_unit_test(test_targets_syntax),
        cmocka_unit_test(test_in_scope),
        cmocka_unit_test(test_unterminated_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
