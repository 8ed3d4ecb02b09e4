/* Scope matching: a table of normal targets and bypass attempts, each with the exit code it must
 * produce (0 in scope, 65 malformed, 77 out of scope), plus the config-entry rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scope.h"

/* The scope most rows use: "c:" adds a CIDR, "d:" a domain entry. */
#define DEFAULT_SCOPE                                                                          \
    "c:127.0.0.0/8 c:10.20.0.0/16 c:::1/128 c:fd00:abcd::/32 c:192.0.2.7 "                     \
    "d:lab.internal d:*.lab.internal d:api.example.test:8443 d:[fd00:1::5]:8080 "              \
    "d:198.51.100.9:9000 d:*.Wild.Test"

enum kind { URL, HOST, CIDR };

struct row {
    enum kind kind;
    const char *target;
    int port; /* HOST only */
    int expect;
    const char *scope; /* NULL: DEFAULT_SCOPE */
};

static const struct row rows[] = {
    /* ---- normal URLs ---- */
    {URL, "http://lab.internal/", 0, 0, NULL},
    {URL, "https://lab.internal:8443/x?y=1#frag", 0, 0, NULL},
    {URL, "https://lab.internal", 0, 0, NULL},
    {URL, "https://lab.internal?x=1", 0, 0, NULL},
    {URL, "http://lab.internal/a%2Fb%40c", 0, 0, NULL},
    {URL, "http://lab.internal:65535/", 0, 0, NULL},
    {URL, "http://LAB.Internal/", 0, 0, NULL},
    {URL, "HTTP://lab.internal/", 0, 0, NULL},
    {URL, "http://evil.com/lab.internal", 0, 77, NULL},
    /* wildcards: label boundaries only, not the suffix itself */
    {URL, "http://a.lab.internal/", 0, 0, NULL},
    {URL, "http://a.b.lab.internal/", 0, 0, NULL},
    {URL, "http://A.LAB.INTERNAL/", 0, 0, NULL},
    {URL, "http://evillab.internal/", 0, 77, NULL},
    {URL, "http://lab.internal.evil.com/", 0, 77, NULL},
    {URL, "http://internal/", 0, 77, NULL},
    {URL, "http://x.wild.test/", 0, 0, NULL},
    {URL, "http://wild.test/", 0, 77, NULL},
    {URL, "http://xwild.test/", 0, 77, NULL},
    {URL, "http://a.lab.internal/", 0, 77, "d:lab.internal"},
    {URL, "http://lab.internal/", 0, 77, "d:*.lab.internal"},
    /* IPv4 CIDRs */
    {URL, "http://127.0.0.1:8080/", 0, 0, NULL},
    {URL, "http://127.255.255.255/", 0, 0, NULL},
    {URL, "http://128.0.0.1/", 0, 77, NULL},
    {URL, "http://126.255.255.255/", 0, 77, NULL},
    {URL, "http://192.0.2.7/", 0, 0, NULL},
    {URL, "http://192.0.2.8/", 0, 77, NULL},
    /* IPv6 CIDRs */
    {URL, "http://[::1]:8080/", 0, 0, NULL},
    {URL, "http://[fd00:abcd:1::5]/", 0, 0, NULL},
    {URL, "http://[FD00:ABCD::1]/", 0, 0, NULL},
    {URL, "http://[fd00:abce::1]/", 0, 77, NULL},
    {URL, "http://[2001:db8::1]/", 0, 0, "c:::/0"},
    {URL, "http://[2001:db8::1]/", 0, 77, "c:0.0.0.0/0"},
    /* host:port entries */
    {URL, "https://api.example.test:8443/", 0, 0, NULL},
    {URL, "http://api.example.test:8443/", 0, 0, NULL},
    {URL, "https://api.example.test/", 0, 77, NULL},
    {URL, "https://api.example.test:8444/", 0, 77, NULL},
    {URL, "http://[fd00:1::5]:8080/", 0, 0, NULL},
    {URL, "http://[fd00:1::5]:8081/", 0, 77, NULL},
    {URL, "http://[fd00:1::5]/", 0, 77, NULL},
    {URL, "http://198.51.100.9:9000/", 0, 0, NULL},
    {URL, "http://198.51.100.9:9001/", 0, 77, NULL},
    {URL, "http://198.51.100.9/", 0, 77, NULL},
    {URL, "http://a.lab.internal:8443/", 0, 0, "d:*.lab.internal:8443"},
    {URL, "http://a.lab.internal/", 0, 77, "d:*.lab.internal:8443"},
    {URL, "http://10.0.0.1/", 0, 0, "d:10.0.0.1"},
    {URL, "http://[fd00::9]:22/", 0, 0, "d:fd00::9"},
    /* ---- userinfo and '@' anywhere ---- */
    {URL, "http://lab.internal@evil.com/", 0, 65, NULL},
    {URL, "http://evil.com#@lab.internal", 0, 65, NULL},
    {URL, "http://evil.com?@lab.internal", 0, 65, NULL},
    {URL, "http://evil.com/@lab.internal", 0, 65, NULL},
    {URL, "http://a@b@c", 0, 65, NULL},
    {URL, "http://lab.internal:80@evil.com/", 0, 65, NULL},
    {URL, "http://@lab.internal/", 0, 65, NULL},
    /* backslashes, whitespace, controls */
    {URL, "http://evil.com\\@lab.internal/", 0, 65, NULL},
    {URL, "http://lab.internal\\.evil.com/", 0, 65, NULL},
    {URL, "http:\\\\lab.internal/", 0, 65, NULL},
    {URL, "http://lab.internal /", 0, 65, NULL},
    {URL, " http://lab.internal/", 0, 65, NULL},
    {URL, "http://lab.internal/\n", 0, 65, NULL},
    {URL, "http://lab.internal\t/", 0, 65, NULL},
    {URL, "http://lab.internal/\x7f", 0, 65, NULL},
    {URL, "http://lab.internal\r\n.evil.com/", 0, 65, NULL},
    /* percent-encoding in the host, malformed in the path */
    {URL, "http://lab%2einternal/", 0, 65, NULL},
    {URL, "http://%6cab.internal/", 0, 65, NULL},
    {URL, "http://lab.internal%00.evil.com/", 0, 65, NULL},
    {URL, "http://lab.internal/%zz", 0, 65, NULL},
    {URL, "http://lab.internal/%4", 0, 65, NULL},
    {URL, "http://lab.internal/%", 0, 65, NULL},
    /* IDN / unicode: ASCII LDH only, punycode compared as written */
    {URL, "http://l\xd0\xb0" "b.internal/", 0, 65, NULL},
    {URL, "http://lab.internal\xe3\x80\x82" "evil.com/", 0, 65, NULL},
    {URL, "http://xn--lb-8kc.internal/", 0, 77, NULL},
    {URL, "http://xn--lb-8kc.internal/", 0, 0, "d:xn--lb-8kc.internal"},
    {URL, "http://XN--LB-8KC.internal/", 0, 0, "d:xn--lb-8kc.internal"},
    /* trailing dots are refused */
    {URL, "http://lab.internal./", 0, 65, NULL},
    {URL, "http://a.lab.internal./", 0, 65, NULL},
    {URL, "http://lab.internal.:80/", 0, 65, NULL},
    {HOST, "lab.internal.", 0, 65, NULL},
    {URL, "http://127.0.0.1./", 0, 65, NULL},
    /* non-canonical IPv4 forms */
    {URL, "http://2130706433/", 0, 65, NULL},
    {URL, "http://0x7f.0.0.1/", 0, 65, NULL},
    {URL, "http://0x7f000001/", 0, 65, NULL},
    {URL, "http://0177.0.0.1/", 0, 65, NULL},
    {URL, "http://127.0.0.01/", 0, 65, NULL},
    {URL, "http://127.1/", 0, 65, NULL},
    {URL, "http://127.0.1/", 0, 65, NULL},
    {URL, "http://1.2.3.4.5/", 0, 65, NULL},
    {URL, "http://256.0.0.1/", 0, 65, NULL},
    {URL, "http://lab.0x10/", 0, 65, NULL},
    {URL, "http://127.0.0.1.nip.io/", 0, 77, NULL},
    {HOST, "2130706433", 0, 65, NULL},
    {HOST, "0177.0.0.1", 0, 65, NULL},
    {HOST, "127.1", 0, 65, NULL},
    /* IPv4-mapped IPv6 is the IPv4 address; IPv4-compatible is refused */
    {URL, "http://[::ffff:127.0.0.1]/", 0, 0, NULL},
    {URL, "http://[::ffff:7f00:1]/", 0, 0, NULL},
    {URL, "http://[::FFFF:7F00:1]/", 0, 0, NULL},
    {URL, "http://[::ffff:8.8.8.8]/", 0, 77, NULL},
    {URL, "http://[::ffff:127.0.0.1]/", 0, 77, "c:::/0"},
    {HOST, "::ffff:8.8.8.8", 0, 77, "c:::/0"},
    {HOST, "::ffff:10.20.1.1", 0, 0, NULL},
    {URL, "http://[::127.0.0.1]/", 0, 65, NULL},
    {URL, "http://[::7f00:1]/", 0, 65, NULL},
    {HOST, "::2", 0, 65, NULL},
    {URL, "http://[::ffff:0177.0.0.1]/", 0, 65, NULL},
    /* zone ids, brackets */
    {URL, "http://[fe80::1%25eth0]/", 0, 65, NULL},
    {URL, "http://[fe80::1%eth0]/", 0, 65, NULL},
    {HOST, "fe80::1%eth0", 0, 65, "c:fe80::/10"},
    {URL, "http://[127.0.0.1]/", 0, 65, NULL},
    {URL, "http://[lab.internal]/", 0, 65, NULL},
    {URL, "http://::1/", 0, 65, NULL},
    {URL, "http://[::1/", 0, 65, NULL},
    {URL, "http://[::1]x/", 0, 65, NULL},
    {URL, "http://[v1.x]/", 0, 65, NULL},
    {HOST, "[::1]", 0, 65, NULL},
    /* empty and unspecified hosts */
    {URL, "http:///", 0, 65, NULL},
    {URL, "http://", 0, 65, NULL},
    {URL, "http://:80/", 0, 65, NULL},
    {URL, "http://?x", 0, 65, NULL},
    {URL, "", 0, 65, NULL},
    {HOST, "", 0, 65, NULL},
    {URL, "http://0.0.0.0/", 0, 65, "c:0.0.0.0/0"},
    {URL, "http://[::]/", 0, 65, "c:::/0"},
    /* ports */
    {URL, "http://lab.internal:0/", 0, 65, NULL},
    {URL, "http://lab.internal:65536/", 0, 65, NULL},
    {URL, "http://lab.internal:080/", 0, 65, NULL},
    {URL, "http://lab.internal:/", 0, 65, NULL},
    {URL, "http://lab.internal:-1/", 0, 65, NULL},
    {URL, "http://lab.internal:+80/", 0, 65, NULL},
    {URL, "http://lab.internal:8o/", 0, 65, NULL},
    {URL, "http://lab.internal:99999999999/", 0, 65, NULL},
    {URL, "http://lab.internal:8080:80/", 0, 65, NULL},
    {HOST, "lab.internal", 70000, 65, NULL},
    {HOST, "lab.internal", -1, 65, NULL},
    {HOST, "lab.internal:80", 0, 65, NULL},
    /* schemes */
    {URL, "ftp://lab.internal/", 0, 65, NULL},
    {URL, "file:///etc/passwd", 0, 65, NULL},
    {URL, "gopher://lab.internal/", 0, 65, NULL},
    {URL, "ssh://lab.internal/", 0, 65, NULL},
    {URL, "javascript:alert(1)", 0, 65, NULL},
    {URL, "lab.internal/", 0, 65, NULL},
    {URL, "lab.internal:80/", 0, 65, NULL},
    {URL, "//lab.internal/", 0, 65, NULL},
    {URL, "http:/lab.internal/", 0, 65, NULL},
    {URL, "http:lab.internal", 0, 65, NULL},
    {URL, "httpx://lab.internal/", 0, 65, NULL},
    /* host name syntax */
    {URL, "http://lab_internal/", 0, 65, "d:lab.internal"},
    {URL, "http://-lab.internal/", 0, 65, NULL},
    {URL, "http://a-.lab.internal/", 0, 65, NULL},
    {URL, "http://a..lab.internal/", 0, 65, NULL},
    {URL, "http://.lab.internal/", 0, 65, NULL},
    {URL, "http://*.lab.internal/", 0, 65, NULL},
    {HOST, "*.lab.internal", 0, 65, NULL},
    {URL, "http://{a,lab}.internal/", 0, 65, NULL},
    /* path, query and fragment characters a tool could glob or reinterpret */
    {URL, "http://lab.internal/{a,b}", 0, 65, NULL},
    {URL, "http://lab.internal/[1-9]", 0, 65, NULL},
    {URL, "http://lab.internal/a#b#c", 0, 65, NULL},
    {URL, "http://lab.internal/<x>", 0, 65, NULL},
    {URL, "http://lab.internal/\"x", 0, 65, NULL},
    /* bare hosts */
    {HOST, "lab.internal", 0, 0, NULL},
    {HOST, "LAB.INTERNAL", 0, 0, NULL},
    {HOST, "x.lab.internal", 22, 0, NULL},
    {HOST, "api.example.test", 0, 77, NULL},
    {HOST, "api.example.test", 8443, 0, NULL},
    {HOST, "10.20.3.4", 0, 0, NULL},
    {HOST, "10.21.0.1", 0, 77, NULL},
    {HOST, "::1", 0, 0, NULL},
    {HOST, "::1", 0, 77, "c:127.0.0.0/8"},
    {HOST, "8.8.8.8", 0, 0, "c:0.0.0.0/0"},
    {HOST, "10.0.0.1", 0, 0, "c:10.0.0.1/32"},
    {HOST, "10.0.0.2", 0, 77, "c:10.0.0.1/32"},
    {HOST, "fd00::1", 0, 0, "c:fd00::1/128"},
    {HOST, "fd00::2", 0, 77, "c:fd00::1/128"},
    /* CIDR targets: wholly inside one scope CIDR */
    {CIDR, "10.20.0.0/16", 0, 0, NULL},
    {CIDR, "10.20.5.0/24", 0, 0, NULL},
    {CIDR, "10.20.5.7/32", 0, 0, NULL},
    {CIDR, "10.20.5.7", 0, 0, NULL},
    {CIDR, "10.0.0.0/8", 0, 77, NULL},
    {CIDR, "10.21.0.0/16", 0, 77, NULL},
    {CIDR, "192.0.2.7/32", 0, 0, NULL},
    {CIDR, "192.0.2.6/31", 0, 77, NULL},
    {CIDR, "::1/128", 0, 0, NULL},
    {CIDR, "fd00:abcd:12::/48", 0, 0, NULL},
    {CIDR, "fd00::/16", 0, 77, NULL},
    {CIDR, "0.0.0.0/0", 0, 77, NULL},
    {CIDR, "0.0.0.0/0", 0, 0, "c:0.0.0.0/0"},
    {CIDR, "2001:db8::/32", 0, 0, "c:::/0"},
    {CIDR, "198.51.100.9/32", 0, 0, "d:198.51.100.9"},
    {CIDR, "198.51.100.9/32", 0, 77, "d:198.51.100.9:80"},
    {CIDR, "10.20.0.1/16", 0, 65, NULL},
    {CIDR, "10.20.0.0/33", 0, 65, NULL},
    {CIDR, "10.20.0.0/016", 0, 65, NULL},
    {CIDR, "10.20.0.0/", 0, 65, NULL},
    {CIDR, "10.20.0.0/-1", 0, 65, NULL},
    {CIDR, "10.20/16", 0, 65, NULL},
    {CIDR, "012.20.0.0/16", 0, 65, NULL},
    {CIDR, "::1/129", 0, 65, NULL},
    {CIDR, "fe80::%eth0/64", 0, 65, "c:fe80::/10"},
    {CIDR, "::ffff:10.20.0.0/112", 0, 65, NULL},
    {CIDR, "::/0", 0, 65, "c:::/0"},
    {CIDR, "::/64", 0, 65, "c:::/0"},
    {CIDR, "2001:db8::/32", 0, 0, "c:::/0"},
    {CIDR, " 10.20.0.0/16", 0, 65, NULL},
    {CIDR, "", 0, 65, NULL},
};

static rx_scope *scope_build(const char *spec)
{
    char buf[512], *save = NULL;
    rexec_error e = {0};
    rx_scope *s = rx_scope_new();
    assert_non_null(s);
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *t = strtok_r(buf, " ", &save); t != NULL; t = strtok_r(NULL, " ", &save)) {
        int r = t[0] == 'c' ? rx_scope_add_cidr(s, t + 2, &e) : rx_scope_add_domain(s, t + 2, &e);
        if (r != 0)
            fail_msg("scope entry %s refused: %s", t, e.msg);
    }
    return s;
}

static int run_row(const rx_scope *s, const struct row *w, rexec_error *e)
{
    switch (w->kind) {
    case URL: return rx_scope_check_url(s, w->target, e);
    case HOST: return rx_scope_check_host(s, w->target, w->port, e);
    default: return rx_scope_check_cidr(s, w->target, e);
    }
}

static void test_table(void **state)
{
    (void)state;
    size_t bad = 0;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *w = &rows[i];
        rx_scope *s = scope_build(w->scope ? w->scope : DEFAULT_SCOPE);
        rexec_error e = {0};
        int got = rexec_err_exit_code(run_row(s, w, &e));
        if (got != w->expect) {
            print_error("row %zu: %s (port %d): expected %d, got %d: %s\n", i, w->target,
                        w->port, w->expect, got, e.msg);
            bad++;
        } else if (got != 0 && (e.msg[0] == 0 || strncmp(e.msg, "target ", 7) != 0)) {
            print_error("row %zu: %s: message does not name the target: %s\n", i, w->target,
                        e.msg);
            bad++;
        }
        rx_scope_free(s);
    }
    assert_int_equal(bad, 0);
}

/* The message names the value and the reason, and says which of 65/77 it is. */
static void test_messages(void **state)
{
    (void)state;
    rx_scope *s = scope_build(DEFAULT_SCOPE);
    rexec_error e = {0};
    assert_int_equal(rx_scope_check_url(s, "http://x@y/", &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, "target \"http://x@y/\": userinfo is not allowed in a URL");
    assert_int_equal(rx_scope_check_url(s, "https://evil.com/", &e), REXEC_EDENIED);
    assert_string_equal(e.msg, "target \"https://evil.com/\": evil.com port 443 is not in scope");
    assert_int_equal(rx_scope_check_url(s, "http://lab.internal./", &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "trailing dot"));
    assert_int_equal(rx_scope_check_url(s, "http://0x7f.0.0.1/", &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "non-canonical IPv4"));
    assert_int_equal(rx_scope_check_url(s, "ftp://lab.internal/", &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "scheme \"ftp\" is not allowed"));
    assert_int_equal(rx_scope_check_url(s, "http://[fe80::1%25eth0]/", &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "zone"));
    /* mapped addresses are reported as the IPv4 address they are */
    assert_int_equal(rx_scope_check_host(s, "::ffff:8.8.8.8", 0, &e), REXEC_EDENIED);
    assert_non_null(strstr(e.msg, ": 8.8.8.8 is not in scope"));
    /* a value with control characters is described, not echoed */
    assert_int_equal(rx_scope_check_url(s, "http://a\x01" "b/", &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, "target (11 bytes): control character at byte 8");
    rx_scope_free(s);
}

static void test_long_inputs(void **state)
{
    (void)state;
    rx_scope *s = scope_build(DEFAULT_SCOPE);
    rexec_error e = {0};
    char url[RX_TARGET_MAX_LEN + 64], host[400];
    /* the longest URL passes, one byte more does not */
    int n = snprintf(url, sizeof(url), "http://lab.internal/");
    memset(url + n, 'a', RX_TARGET_MAX_LEN - (size_t)n);
    url[RX_TARGET_MAX_LEN] = 0;
    assert_int_equal(rx_scope_check_url(s, url, &e), 0);
    strcat(url, "a");
    assert_int_equal(rx_scope_check_url(s, url, &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "longer than 2048"));
    assert_non_null(strstr(e.msg, "(2049 bytes)")); /* too long to quote */
    /* a 63-byte label passes, 64 does not */
    memset(host, 'a', 63);
    strcpy(host + 63, ".lab.internal");
    assert_int_equal(rx_scope_check_host(s, host, 0, &e), 0);
    memset(host, 'a', 64);
    strcpy(host + 64, ".lab.internal");
    assert_int_equal(rx_scope_check_host(s, host, 0, &e), REXEC_EREQUEST);
    /* a 253-byte name passes (syntax), 254 does not */
    for (int i = 0; i < 253; i++)
        host[i] = (i % 2) ? '.' : 'a';
    host[253] = 0;
    assert_int_equal(rx_scope_parse_host(host, &e), 0);
    memmove(host + 1, host, 254);
    host[0] = 'b';
    assert_int_equal(rx_scope_parse_host(host, &e), REXEC_EREQUEST);
    rx_scope_free(s);
}

static void test_no_scope_denies(void **state)
{
    (void)state;
    rexec_error e = {0};
    rx_scope *empty = rx_scope_new();
    assert_int_equal(rx_scope_check_url(NULL, "http://lab.internal/", &e), REXEC_EDENIED);
    assert_int_equal(rx_scope_check_host(empty, "127.0.0.1", 0, &e), REXEC_EDENIED);
    assert_int_equal(rx_scope_check_cidr(empty, "127.0.0.1/32", &e), REXEC_EDENIED);
    /* malformed beats out-of-scope: the caller learns the value is wrong */
    assert_int_equal(rx_scope_check_url(NULL, "http://a@b/", &e), REXEC_EREQUEST);
    rx_scope_free(empty);
}

static void test_syntax_only(void **state)
{
    (void)state;
    rexec_error e = {0};
    assert_int_equal(rx_scope_parse_url("https://anything.example/x", &e), 0);
    assert_int_equal(rx_scope_parse_url("http://a@b/", &e), REXEC_EREQUEST);
    assert_int_equal(rx_scope_parse_host("8.8.8.8", &e), 0);
    assert_int_equal(rx_scope_parse_host("127.1", &e), REXEC_EREQUEST);
    assert_int_equal(rx_scope_parse_cidr("10.0.0.0/8", &e), 0);
    assert_int_equal(rx_scope_parse_cidr("10.0.0.1/8", &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "did you mean 10.0.0.0/8?"));
}

static void test_config_entries(void **state)
{
    (void)state;
    static const char *const bad_domains[] = {
        "lab.internal.", "*", "*.", "a.*.b", "**.lab", "lab_internal", "::ffff:1.2.3.4",
        "[::ffff:1.2.3.4]:80", "[1.2.3.4]:80", "lab.internal:0", "lab.internal:99999", "",
        "lab.internal:", "l\xc3\xa9.internal", "lab internal", "127.1", "0.0.0.0", "[::1",
        "[::1]80", "fe80::1%eth0", "lab.internal:80:81x", NULL};
    static const char *const bad_cidrs[] = {
        "10.0.0.1/8", "10.0.0.0/33", "::ffff:10.0.0.0/104", "::ffff:0:0/96", "fe80::%eth0/10",
        "10.0.0.0/", "10.0.0/24", "0x0a.0.0.0/8", "", "10.0.0.0/8 ", "lab.internal", NULL};
    static const char *const good_domains[] = {"lab.internal", "*.lab.internal", "LAB.internal:8443",
                                               "[::1]:8080", "[::1]", "::1", "10.0.0.1:22",
                                               "xn--lb-8kc.internal", "localhost", NULL};
    static const char *const good_cidrs[] = {"::/0", "0.0.0.0/0", "10.0.0.1", "::1",
                                             "fd00::/8", "::/64", NULL};
    rexec_error e = {0};
    rx_scope *s = rx_scope_new();
    for (size_t i = 0; bad_domains[i]; i++) {
        if (rx_scope_add_domain(s, bad_domains[i], &e) != REXEC_ECONFIG)
            fail_msg("domain entry \"%s\" was accepted", bad_domains[i]);
        assert_int_equal(strncmp(e.msg, "scope entry ", 12), 0);
    }
    for (size_t i = 0; bad_cidrs[i]; i++)
        if (rx_scope_add_cidr(s, bad_cidrs[i], &e) != REXEC_ECONFIG)
            fail_msg("cidr entry \"%s\" was accepted", bad_cidrs[i]);
    for (size_t i = 0; good_domains[i]; i++)
        if (rx_scope_add_domain(s, good_domains[i], &e) != 0)
            fail_msg("domain entry \"%s\" refused: %s", good_domains[i], e.msg);
    for (size_t i = 0; good_cidrs[i]; i++)
        if (rx_scope_add_cidr(s, good_cidrs[i], &e) != 0)
            fail_msg("cidr entry \"%s\" refused: %s", good_cidrs[i], e.msg);
    assert_int_equal(rx_scope_add_cidr(s, "10.0.0.1/8", &e), REXEC_ECONFIG);
    assert_string_equal(e.msg, "scope entry \"10.0.0.1/8\": host bits are set (did you mean "
                               "10.0.0.0/8?)");
    rx_scope_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),          cmocka_unit_test(test_messages),
        cmocka_unit_test(test_long_inputs),    cmocka_unit_test(test_no_scope_denies),
        cmocka_unit_test(test_syntax_only),    cmocka_unit_test(test_config_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
