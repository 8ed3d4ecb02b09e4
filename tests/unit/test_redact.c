/* The streaming redactor: every encoded form, every chunk boundary, merged ranges, the secret
 * shapes, binary input, refusals, contains_secret, and a randomised property test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "buf.h"
#include "redact.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static void to_buf(void *ctx, const unsigned char *data, size_t len)
{
    assert_int_equal(rx_buf_add(ctx, data, len), 0);
}

/* A redactor over NULL-terminated (name, value) pairs; values are C strings. */
static rx_redactor *mk(const char *name, ...)
{
    rx_secret s[16];
    size_t n = 0;
    va_list ap;
    va_start(ap, name);
    for (const char *nm = name; nm && n < 16; nm = va_arg(ap, const char *)) {
        const char *v = va_arg(ap, const char *);
        s[n++] = (rx_secret){nm, (const unsigned char *)v, strlen(v)};
    }
    va_end(ap);
    rx_redactor *r = NULL;
    rexec_error e;
    assert_int_equal(rx_redactor_new(&r, s, n, &e), 0);
    return r;
}

/* Feeds in to a fresh stream in chunks of sizes[0], sizes[1], ... (cycling); out gets the result. */
static void feed_sizes(const rx_redactor *r, const void *in, size_t len, const size_t *sizes,
                       size_t nsizes, rx_buf *out)
{
    rx_buf_init(out, 1 << 26);
    rx_redact_stream *s = rx_redact_stream_new(r, to_buf, out);
    assert_non_null(s);
    const unsigned char *p = in;
    for (size_t i = 0, k = 0; i < len; k++) {
        size_t n = sizes[k % nsizes] ? sizes[k % nsizes] : 1;
        n = n < len - i ? n : len - i;
        rx_redact_feed(s, p + i, n);
        i += n;
    }
    rx_redact_finish(s);
    rx_redact_stream_free(s);
}

/* Redacts in at once, split in two at every offset, and one byte at a time: all must give
 * `want` exactly. */
static void check_all_splits(const rx_redactor *r, const char *in, size_t len, const char *want)
{
    rx_buf out;
    size_t one = 1;
    assert_int_equal(rx_redact_buf(r, in, len, (rx_buf_init(&out, 1 << 20), &out)), 0);
    assert_string_equal((char *)out.data, want);
    rx_buf_free(&out);
    feed_sizes(r, in, len, &one, 1, &out);
    assert_string_equal((char *)out.data, want);
    rx_buf_free(&out);
    for (size_t k = 0; k <= len; k++) {
        size_t sizes[2] = {k, len - k + 1};
        if (k == 0)
            continue;
        feed_sizes(r, in, len, sizes, 2, &out);
        assert_string_equal((char *)out.data, want);
        rx_buf_free(&out);
    }
}

static void check(const rx_redactor *r, const char *in, const char *want)
{
    check_all_splits(r, in, strlen(in), want);
}

/* The redacted form of in (one shot) in a static buffer (NUL-terminated). */
static const char *red(const rx_redactor *r, const void *in, size_t len)
{
    static char res[1 << 16];
    rx_buf out;
    rx_buf_init(&out, sizeof(res) - 1);
    assert_int_equal(rx_redact_buf(r, in, len, &out), 0);
    memcpy(res, out.data ? (char *)out.data : "", out.len + 1);
    rx_buf_free(&out);
    return res;
}

static const char *reds(const rx_redactor *r, const char *in)
{
    return red(r, in, strlen(in));
}

static char *b64(const unsigned char *p, size_t n, int url, int pad)
{
    char *o = malloc(4 * (n / 3 + 2) + 1);
    int len = EVP_EncodeBlock((unsigned char *)o, p, (int)n);
    for (int i = 0; url && i < len; i++)
        o[i] = o[i] == '+' ? '-' : o[i] == '/' ? '_' : o[i];
    while (!pad && len > 0 && o[len - 1] == '=')
        o[--len] = 0;
    return o;
}

static char *hexs(const unsigned char *p, size_t n, int upper)
{
    char *o = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++)
        sprintf(o + 2 * i, upper ? "%02X" : "%02x", p[i]);
    return o;
}

/* Percent-encodes everything but RFC 3986 unreserved bytes. */
static char *pct(const unsigned char *p, size_t n, int upper)
{
    char *o = malloc(3 * n + 1), *q = o;
    for (size_t i = 0; i < n; i++) {
        if ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
            (p[i] >= '0' && p[i] <= '9') || (p[i] && strchr("-._~", p[i])))
            *q++ = (char)p[i];
        else
            q += sprintf(q, upper ? "%%%02X" : "%%%02x", p[i]);
    }
    *q = 0;
    return o;
}

/* RFC 4648 base32, upper case, padded or not. */
static char *b32(const unsigned char *p, size_t n, int pad)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    char *o = malloc(8 * (n / 5 + 2) + 1), *q = o;
    size_t bits = n * 8;
    for (size_t b = 0; b < bits; b += 5) {
        unsigned x = 0;
        for (size_t i = b; i < b + 5; i++)
            x = x << 1 | (i < bits ? (p[i / 8] >> (7 - i % 8)) & 1u : 0u);
        *q++ = al[x];
    }
    while (pad && (q - o) % 8)
        *q++ = '=';
    *q = 0;
    return o;
}

/* e with a line break after every col characters, as base64 -w, xxd -p and PEM wrap. */
static char *wrap(const char *e, size_t col, int crlf)
{
    size_t n = strlen(e);
    char *o = malloc(n + 3 * (n / col + 2) + 1), *q = o;
    for (size_t i = 0; i < n; i++) {
        *q++ = e[i];
        if ((i + 1) % col == 0 && i + 1 < n)
            q += crlf ? (memcpy(q, "\r\n", 2), 2) : (*q = '\n', 1);
    }
    *q = 0;
    return o;
}

/* The bytes of s that are neither a line break nor part of a marker. */
static size_t unredacted(const char *s, char *o)
{
    size_t k = 0;
    while (*s) {
        if (strncmp(s, "[REDACTED:", 10) == 0 && strchr(s, ']')) {
            s = strchr(s, ']') + 1;
            continue;
        }
        if (*s != '\n' && *s != '\r')
            o[k++] = *s;
        s++;
    }
    o[k] = 0;
    return k;
}

/* Redacts in whole, one byte at a time and split in two at every offset; all must agree.
 * Returns the (static) result. */
static const char *redact_agree(const rx_redactor *r, const char *in)
{
    static char want[1 << 16];
    size_t len = strlen(in), one = 1;
    rx_buf out;
    snprintf(want, sizeof(want), "%s", reds(r, in));
    feed_sizes(r, in, len, &one, 1, &out);
    assert_string_equal((char *)out.data, want);
    rx_buf_free(&out);
    for (size_t k = 1; k < len; k++) {
        size_t sizes[2] = {k, len - k + 1};
        feed_sizes(r, in, len, sizes, 2, &out);
        if (strcmp((char *)out.data, want) != 0)
            fail_msg("split at %zu of %zu differs", k, len);
        rx_buf_free(&out);
    }
    return want;
}

/* ---- handed-out secrets, raw -------------------------------------------------------------- */

static void test_raw_every_split(void **state)
{
    (void)state;
    rx_redactor *r = mk("API_TOKEN", "s3cr3t-T0ken-value", NULL);
    check(r, "token=s3cr3t-T0ken-value end", "token=[REDACTED:API_TOKEN] end");
    check(r, "s3cr3t-T0ken-value", "[REDACTED:API_TOKEN]");
    check(r, "s3cr3t-T0ken-values3cr3t-T0ken-value!", "[REDACTED:API_TOKEN]!");
    check(r, "s3cr3t-T0ken-valu", "s3cr3t-T0ken-valu"); /* a prefix alone is not the secret */
    check(r, "xs3cr3t-T0ken-valux s3cr3t-T0ken-value", "xs3cr3t-T0ken-valux [REDACTED:API_TOKEN]");
    rx_redactor_free(r);
}

static void test_overlap_and_adjacent_merge(void **state)
{
    (void)state;
    rx_redactor *r = mk("A", "abcdEFGH", "B", "EFGHijkl", NULL);
    check(r, "abcdEFGHijkl", "[REDACTED:A]");
    check(r, "<abcdEFGHijkl>", "<[REDACTED:A]>");
    check(r, "xEFGHijklabcdEFGHy", "x[REDACTED:B]y"); /* adjacent: one marker, first's name */
    check(r, "abcdEFGH EFGHijkl", "[REDACTED:A] [REDACTED:B]");
    rx_redactor_free(r);
    r = mk("B", "EFGHijkl", "A", "abcdEFGH", NULL); /* the order handed out does not matter */
    check(r, "abcdEFGHijkl", "[REDACTED:A]");
    rx_redactor_free(r);
    r = mk("LONG", "0123456789abcdef", "MID", "456789ab", NULL); /* one inside another */
    check(r, "-0123456789abcdef-", "-[REDACTED:LONG]-");
    check(r, "-456789ab-", "-[REDACTED:MID]-");
    rx_redactor_free(r);
}

static void test_multiline_secret(void **state)
{
    (void)state;
    rx_redactor *r = mk("KEY", "first-line-AAAA\nsecond-line-BBB\nxy", NULL);
    check(r, "k: first-line-AAAA\nsecond-line-BBB\nxy;", "k: [REDACTED:KEY];");
    check(r, "> second-line-BBB <", "> [REDACTED:KEY] <");
    check(r, "1 first-line-AAAA\r\n2 second-line-BBB\r\n", "1 [REDACTED:KEY]\r\n2 [REDACTED:KEY]\r\n");
    check(r, "first-line-AAAA\r\nsecond-line-BBB\r\nxy.", "[REDACTED:KEY].");
    assert_string_equal(reds(r, "xy xy"), "xy xy"); /* a line under 8 bytes is not a pattern */
    rx_redactor_free(r);
}

/* ---- encoded forms ------------------------------------------------------------------------ */

/* The secret at each offset mod 3 of a larger base64 blob, followed by 0-2 more bytes, padded
 * and unpadded, standard and url-safe: no character that depends only on the secret survives. */
static void test_base64_alignments(void **state)
{
    (void)state;
    /* ">?>" makes '+' and '/' appear in the standard alphabet, so url-safe differs. */
    static const char secret[] = ">?>?secret>>??value";
    rx_redactor *r = mk("S", secret, NULL);
    size_t n = strlen(secret);
    for (size_t pre = 0; pre < 6; pre++)
        for (size_t post = 0; post < 4; post++)
            for (int mode = 0; mode < 4; mode++) {
                unsigned char blob[64];
                memset(blob, 'z', sizeof(blob));
                memcpy(blob + pre, secret, n);
                char *e = b64(blob, pre + n + post, mode & 1, mode & 2);
                const char *out = reds(r, e);
                assert_non_null(strstr(out, "[REDACTED:S]"));
                /* the characters covering only secret bits are gone */
                size_t k = pre % 3, first = (pre / 3) * 4 + (8 * k + 5) / 6;
                size_t last = (8 * (pre + n)) / 6;
                char inner[64];
                memcpy(inner, e + first, last - first);
                inner[last - first] = 0;
                assert_null(strstr(out, inner));
                /* and the output holds no more base64 than what lies outside the secret */
                assert_true(strlen(out) - strlen("[REDACTED:S]") <= strlen(e) - (last - first));
                free(e);
            }
    rx_redactor_free(r);
}

static void test_base64_tail_and_split(void **state)
{
    (void)state;
    rx_redactor *r = mk("S", "tail-secret-42", NULL);
    char *e = b64((const unsigned char *)"tail-secret-42", 14, 0, 1);
    char in[128], want[128];
    snprintf(in, sizeof(in), "b64: %s\n", e);
    check(r, in, "b64: [REDACTED:S]\n"); /* ends the blob: padding and last char go too */
    free(e);
    e = b64((const unsigned char *)"tail-secret-42", 14, 1, 0);
    snprintf(in, sizeof(in), "u=%s&x", e);
    snprintf(want, sizeof(want), "u=[REDACTED:S]&x");
    check(r, in, want);
    free(e);
    rx_redactor_free(r);
}

static void test_url_encoding(void **state)
{
    (void)state;
    static const char secret[] = "p@ss w/rd+x&y=z~!";
    rx_redactor *r = mk("PW", secret, NULL);
    for (int up = 0; up < 2; up++) {
        char *e = pct((const unsigned char *)secret, strlen(secret), up), in[256];
        snprintf(in, sizeof(in), "GET /login?pw=%s&next=1", e);
        check(r, in, "GET /login?pw=[REDACTED:PW]&next=1");
        free(e);
    }
    check(r, "pw=p%40ss+w%2Frd%2Bx%26y%3Dz~%21 ", "pw=[REDACTED:PW] "); /* form: space as + */
    check(r, "pw=p%40ss%20w/rd%2Bx%26y%3Dz~%21 ", "pw=[REDACTED:PW] ");   /* quote(): keeps / */
    check(r, "pw=p%40ss%20w%2Frd%2Bx%26y%3Dz~!", "pw=[REDACTED:PW]");     /* encodeURIComponent */
    rx_redactor_free(r);
}

static void test_json_escaping(void **state)
{
    (void)state;
    static const char secret[] = "q\"b\\s/c\x01n\nt\t\xc3\xa9<&>";
    rx_redactor *r = mk("J", secret, NULL);
    /* cJSON / JavaScript: short escapes, \u00xx for other control bytes, '/' and UTF-8 as is */
    check(r, "{\"v\":\"q\\\"b\\\\s/c\\u0001n\\nt\\t\xc3\xa9<&>\"}", "{\"v\":\"[REDACTED:J]\"}");
    /* PHP: "\/" and \u00e9 */
    check(r, "\"q\\\"b\\\\s\\/c\\u0001n\\nt\\t\\u00e9<&>\"", "\"[REDACTED:J]\"");
    /* Python json.dumps (ensure_ascii) */
    check(r, "\"q\\\"b\\\\s/c\\u0001n\\nt\\t\\u00e9<&>\"", "\"[REDACTED:J]\"");
    /* Go encoding/json: HTML-safe escapes */
    check(r, "\"q\\\"b\\\\s/c\\u0001n\\nt\\t\xc3\xa9\\u003c\\u0026\\u003e\"", "\"[REDACTED:J]\"");
    /* upper-case hex in \u escapes (Jackson) */
    rx_redactor_free(r);
    r = mk("J2", "ctl\x1f-secret-x", NULL);
    check(r, "[\"ctl\\u001F-secret-x\"]", "[\"[REDACTED:J2]\"]");
    check(r, "[\"ctl\\u001f-secret-x\"]", "[\"[REDACTED:J2]\"]");
    rx_redactor_free(r);
}

static void test_hex(void **state)
{
    (void)state;
    static const unsigned char secret[] = "hex-me-\xff\x01secret";
    rx_redactor *r = mk("H", (const char *)secret, NULL);
    for (int up = 0; up < 2; up++) {
        char *e = hexs(secret, sizeof(secret) - 1, up), in[256];
        snprintf(in, sizeof(in), "dump: %s.", e);
        check(r, in, "dump: [REDACTED:H].");
        free(e);
    }
    rx_redactor_free(r);
}

static void test_shell_quoted(void **state)
{
    (void)state;
    rx_redactor *r = mk("SQ", "it's a $ecret!", NULL);
    check(r, "export X='it'\\''s a $ecret!'\n", "export X='[REDACTED:SQ]'\n");
    check(r, "X='it'\"'\"'s a $ecret!'", "X='[REDACTED:SQ]'");
    check(r, "printf it\\'s\\ a\\ \\$ecret\\!\n", "printf [REDACTED:SQ]\n"); /* printf %q */
    check(r, "X=\"it's a \\$ecret!\"", "X=\"[REDACTED:SQ]\"");
    rx_redactor_free(r);
    r = mk("AC", "tab\there-secret", NULL);
    check(r, "X=$'tab\\there-secret'", "X=$'[REDACTED:AC]'"); /* bash %q with a control byte */
    rx_redactor_free(r);
}


/* $'...' exactly as bash 5.2 prints it (printf %q, declare -p) in the C and UTF-8 locales. */
static void test_bash_ansi_c(void **state)
{
    (void)state;
    rx_redactor *r = mk("B", "ab\x1b" "cd\xc3\xa9" "ef\x7f\x01gh\\i'j\"k\xff", NULL);
    /* LC_ALL=C: every byte >= 0x80 in octal, ESC as \E */
    check(r, "declare -- x=$'ab\\Ecd\\303\\251ef\\177\\001gh\\\\i\\'j\"k\\377'\n",
          "declare -- x=$'[REDACTED:B]'\n");
    /* LC_ALL=C.UTF-8: the well-formed character stays, the stray 0xff does not */
    check(r, "$'ab\\Ecd\xc3\xa9" "ef\\177\\001gh\\\\i\\'j\"k\\377'", "$'[REDACTED:B]'");
    /* ksh/zsh write ESC as \e */
    check(r, "$'ab\\ecd\\303\\251ef\\177\\001gh\\\\i\\'j\"k\\377'", "$'[REDACTED:B]'");
    rx_redactor_free(r);
}

/* base32 at every offset mod 5 of a larger blob, padded and not. */
static void test_base32_alignments(void **state)
{
    (void)state;
    static const char secret[] = "b32-secret\xfe\x01value";
    size_t n = strlen(secret);
    rx_redactor *r = mk("S", secret, NULL);
    for (size_t pre = 0; pre < 10; pre++)
        for (size_t post = 0; post < 6; post++)
            for (int pad = 0; pad < 2; pad++) {
                unsigned char blob[64];
                memset(blob, 'z', sizeof(blob));
                memcpy(blob + pre, secret, n);
                char *e = b32(blob, pre + n + post, pad), rest[256];
                size_t first = (pre / 5) * 8 + (8 * (pre % 5) + 4) / 5, last = 8 * (pre + n) / 5;
                const char *out = redact_agree(r, e);
                assert_non_null(strstr(out, "[REDACTED:S]"));
                assert_true(unredacted(out, rest) <= strlen(e) - (last - first));
                free(e);
            }
    rx_redactor_free(r);
}

/* hex, base64 and base32 wrapped at every column from 1 to 80, LF and CRLF, the secret at
 * several offsets, split at every offset: no character that depends only on the secret
 * survives, and nothing else is lost. */
static void test_wrapped_every_column(void **state)
{
    (void)state;
    static const char secret[] = "wrapped-secret-\x01\xff-longer-than-thirty-bytes-0123456789";
    size_t n = strlen(secret);
    rx_redactor *r = mk("W", secret, NULL);
    for (int enc = 0; enc < 3; enc++)
        for (size_t pre = 0; pre < 3; pre++)
            for (size_t col = 1; col <= 80; col += col < 8 ? 1 : 7)
                for (int crlf = 0; crlf < 2; crlf++) {
                    unsigned char blob[128];
                    memset(blob, 'q', sizeof(blob));
                    memcpy(blob + pre, secret, n);
                    size_t len = pre + n + 2, first, last;
                    char *e = enc == 0   ? hexs(blob, len, 0)
                              : enc == 1 ? b64(blob, len, 0, 1)
                                         : b32(blob, len, 1);
                    if (enc == 0)
                        first = 2 * pre, last = 2 * (pre + n);
                    else if (enc == 1)
                        first = (pre / 3) * 4 + (8 * (pre % 3) + 5) / 6, last = 8 * (pre + n) / 6;
                    else
                        first = (pre / 5) * 8 + (8 * (pre % 5) + 4) / 5, last = 8 * (pre + n) / 5;
                    char *w = wrap(e, col, crlf), in[1024], rest[1024];
                    snprintf(in, sizeof(in), "out:\n%s\nend\n", w);
                    const char *out = redact_agree(r, in);
                    assert_non_null(strstr(out, "[REDACTED:W]"));
                    assert_true(unredacted(out, rest) <= strlen(e) + 7 - (last - first));
                    free(w);
                    free(e);
                }
    rx_redactor_free(r);
}

/* Breaks are skipped only inside an encoded run: a raw multi-line secret still matches as it
 * stands, and a blank line (two breaks) ends a run. */
static void test_wrap_only_within_runs(void **state)
{
    (void)state;
    rx_redactor *r = mk("W", "0123456789abcdef0123", NULL);
    char *h = hexs((const unsigned char *)"0123456789abcdef0123", 20, 0);
    char in[256];
    snprintf(in, sizeof(in), "%.20s\n\n%s", h, h + 20);
    assert_null(strstr(reds(r, in), "[REDACTED:W]")); /* a blank line is not a wrap */
    snprintf(in, sizeof(in), "%.20s\n%s!", h, h + 20);
    check(r, in, "[REDACTED:W]!");
    free(h);
    rx_redactor_free(r);
}

/* ---- shapes ------------------------------------------------------------------------------- */

static const char pem[] = "-----BEGIN OPENSSH PRIVATE KEY-----\n"
                          "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
                          "QyNTUxOQAAACDx8N1mGh0X1o3aVZkq6mE8Ai1e0xqkQ0YtQvGQWk8XnwAAAJgzQjOYM0Iz\n"
                          "-----END OPENSSH PRIVATE KEY-----\n";

static void test_pem_block(void **state)
{
    (void)state;
    rx_redactor *r = mk(NULL);
    char in[1024];
    snprintf(in, sizeof(in), "before\n%safter\n", pem);
    check(r, in, "before\n[REDACTED:PRIVATE_KEY]\nafter\n");
    check(r, "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
          "[REDACTED:PRIVATE_KEY]");
    /* no END: redacted to the end of the stream */
    check(r, "x -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI\nnever ends", "x [REDACTED:PRIVATE_KEY]");
    /* a certificate or public key is not a secret */
    check(r, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
          "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    check(r, "------------------------------- dashes", "------------------------------- dashes");
    /* the scan skips through dash runs: a BEGIN line glued to more dashes is still found */
    check(r, "xx--------BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----------\n",
          "xx---[REDACTED:PRIVATE_KEY]-----\n");
    rx_redactor_free(r);
}

static void test_headers(void **state)
{
    (void)state;
    rx_redactor *r = mk(NULL);
    check(r, "> Authorization: Bearer abc.def\r\n> Host: x\r\n",
          "> Authorization: [REDACTED:AUTHORIZATION]\r\n> Host: x\r\n");
    check(r, "authorization:Basic dXNlcjpwdw==\n", "authorization:[REDACTED:AUTHORIZATION]\n");
    check(r, "AUTHORIZATION:   token x", "AUTHORIZATION:   [REDACTED:AUTHORIZATION]");
    check(r, "Proxy-Authorization: Basic Zm9v\n", "Proxy-Authorization: [REDACTED:AUTHORIZATION]\n");
    check(r, "< Set-Cookie: sid=abc; HttpOnly\n< x\n", "< Set-Cookie: [REDACTED:COOKIE]\n< x\n");
    check(r, "Cookie: a=b\n", "Cookie: [REDACTED:COOKIE]\n");
    check(r, "{\"Authorization\": \"Bearer x\\\"y\", \"Host\": \"h\"}",
          "{\"Authorization\": \"[REDACTED:AUTHORIZATION]\", \"Host\": \"h\"}");
    check(r, "authorization failed for user\n", "authorization failed for user\n");
    check(r, "Authorization:\nnext", "Authorization:\nnext"); /* empty value */
    check(r, "cookies are tasty", "cookies are tasty");
    rx_redactor_free(r);
}

static void test_jwt_aws_tokens(void **state)
{
    (void)state;
    rx_redactor *r = mk(NULL);
    check(r,
          "t=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
          "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c&n=1",
          "t=[REDACTED:JWT]&n=1");
    check(r, "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0. end", "[REDACTED:JWT] end");
    check(r, "eyJustKidding and eyJ0.x", "eyJustKidding and eyJ0.x");
    check(r, "id=AKIAIOSFODNN7EXAMPLE\n", "id=[REDACTED:AWS_KEY_ID]\n");
    check(r, "ASIAY34FZKBOKMUTVV7A,", "[REDACTED:AWS_KEY_ID],");
    check(r, "AKIAIOSFODNN7EXAMPL\n", "AKIAIOSFODNN7EXAMPL\n"); /* 15 after the prefix */
    check(r, "AKIAIOSFODNN7EXAMPLEX\n", "AKIAIOSFODNN7EXAMPLEX\n");
    check(r, "gh ghp_abcdefghijklmnopqrstuvwxyz0123456789 x", "gh [REDACTED:TOKEN] x");
    check(r, "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz\n", "[REDACTED:TOKEN]\n");
    check(r, "slack xoxb-1234567890-abcdefghij;", "slack [REDACTED:TOKEN];");
    check(r, "sk_live_51Habcdefghijklmnop.", "[REDACTED:TOKEN].");
    check(r, "OPENAI=sk-proj-abc123def456ghi789jkl0\n", "OPENAI=[REDACTED:TOKEN]\n");
    check(r, "glpat-abcdefghij0123456789\n", "[REDACTED:TOKEN]\n");
    check(r, "run task-abcdefghij0123456789abc now", "run task-abcdefghij0123456789abc now");
    check(r, "sk-learn-is-a-python-library-ok", "sk-learn-is-a-python-library-ok");
    rx_redactor_free(r);
}

static void test_secret_inside_shape_merges(void **state)
{
    (void)state;
    rx_redactor *r = mk("API_TOKEN", "tok-1234567890", NULL);
    check(r, "Authorization: Bearer tok-1234567890\nok", "Authorization: [REDACTED:AUTHORIZATION]\nok");
    check(r, "tok-1234567890Authorization: x\n", "[REDACTED:API_TOKEN]Authorization: [REDACTED:AUTHORIZATION]\n");
    rx_redactor_free(r);
}

/* ---- bytes -------------------------------------------------------------------------------- */

static void test_binary_around_secret(void **state)
{
    (void)state;
    static const unsigned char secret[] = "\xe2\x82\xac-euro-\xf0\x9f\x94\x91-key"; /* € and 🔑 */
    rx_redactor *r = mk("U", (const char *)secret, NULL);
    unsigned char in[64], want[64];
    size_t n = 0, m = 0, sl = sizeof(secret) - 1;
    memcpy(in + n, "\x00\xff\xc3", 3), n += 3; /* NUL, a stray byte, a cut-off sequence */
    memcpy(in + n, secret, sl), n += sl;
    memcpy(in + n, "\x00\x80\x00", 3), n += 3;
    memcpy(want + m, "\x00\xff\xc3[REDACTED:U]\x00\x80\x00", 18), m += 18;
    for (size_t k = 1; k < n; k++) { /* every split, including mid-codepoint ones */
        size_t sizes[2] = {k, n};
        rx_buf out;
        feed_sizes(r, in, n, sizes, 2, &out);
        assert_int_equal(out.len, m);
        assert_memory_equal(out.data, want, m);
        rx_buf_free(&out);
    }
    rx_redactor_free(r);
}

/* Runs of one byte are scanned a block at a time (one probe for 8 positions): a secret right
 * after a run of NULs, at every alignment, and a secret that is itself one letter repeated,
 * inside a longer run of that letter in the other case (the filter folds case), are caught. */
static void test_secret_in_runs(void **state)
{
    (void)state;
    static const char secret[] = "QQQQQQQQQQQQ";
    rx_redactor *r = mk("R", "s3cr3t-after-zeros", "Q", secret, NULL);
    unsigned char in[128], want[128];
    for (size_t off = 0; off < 24; off++) {
        size_t n = 0, m = 0;
        memset(in, 0, off + 16), n = off + 16;
        memcpy(in + n, "s3cr3t-after-zeros", 18), n += 18;
        memset(in + n, 0, 20), n += 20;
        memset(want, 0, off + 16), m = off + 16;
        memcpy(want + m, "[REDACTED:R]", 12), m += 12;
        memset(want + m, 0, 20), m += 20;
        size_t sizes[1] = {n};
        rx_buf out;
        feed_sizes(r, in, n, sizes, 1, &out);
        assert_int_equal(out.len, m);
        assert_memory_equal(out.data, want, m);
        rx_buf_free(&out);
    }
    /* 12 Q inside 40 z (the run folds to one gram): the Q's are replaced, the z's kept (not q:
     * the value in lower case is one of its forms) */
    char text[64];
    memset(text, 'z', 40), text[40] = 0;
    memcpy(text + 16, secret, 12);
    char expect[80];
    snprintf(expect, sizeof(expect), "%.16s[REDACTED:Q]%s", text, text + 28);
    assert_string_equal(redact_agree(r, text), expect);
    rx_redactor_free(r);
}

/* A value printed back in another case (a host name lowercased by the scope check, an id upper-
 * cased) is redacted in both spellings; other bytes are untouched. */
static void test_case_forms(void **state)
{
    (void)state;
    rx_redactor *r = mk("H", "Sup3rSecret-Host", NULL);
    assert_string_equal(redact_agree(r, "target http://Sup3rSecret-Host.example.com/: "
                                        "sup3rsecret-host.example.com is not in scope"),
                        "target http://[REDACTED:H].example.com/: [REDACTED:H].example.com is "
                        "not in scope");
    assert_string_equal(redact_agree(r, "ID SUP3RSECRET-HOST sup3rsecret-hos"),
                        "ID [REDACTED:H] sup3rsecret-hos");
    rx_redactor_free(r);
}

/* ---- refusals, contains_secret, streaming behaviour --------------------------------------- */

static void test_refuses_short_and_nul(void **state)
{
    (void)state;
    rx_secret s[2] = {{"OK_ONE", (const unsigned char *)"long-enough-1", 13},
                      {"SHORTY", (const unsigned char *)"abc1234", 7}};
    rx_redactor *r = (rx_redactor *)1;
    rexec_error e = {0};
    assert_int_equal(rx_redactor_new(&r, s, 2, &e), REXEC_ECONFIG);
    assert_null(r);
    assert_int_equal(e.code, REXEC_ECONFIG);
    assert_non_null(strstr(e.msg, "SHORTY"));
    assert_null(strstr(e.msg, "abc1234"));
    s[1] = (rx_secret){"NULLY", (const unsigned char *)"abc\0defghij", 11};
    assert_int_equal(rx_redactor_new(&r, s, 2, &e), REXEC_ECONFIG);
    assert_non_null(strstr(e.msg, "NULLY"));
    assert_null(strstr(e.msg, "abc"));
    s[1].len = 8; /* exactly the minimum, no NUL: fine */
    s[1].value = (const unsigned char *)"abcdefgh";
    assert_int_equal(rx_redactor_new(&r, s, 2, &e), 0);
    rx_redactor_free(r);
}

static void test_contains_secret(void **state)
{
    (void)state;
    static const char secret[] = "c0nta1ns/me+please";
    rx_redactor *r = mk("C", secret, NULL);
    char *e64 = b64((const unsigned char *)"xy" "c0nta1ns/me+please", 20, 1, 0);
    char *hx = hexs((const unsigned char *)secret, strlen(secret), 1);
    char *pc = pct((const unsigned char *)secret, strlen(secret), 0);
    assert_int_equal(rx_redact_contains_secret(r, "a c0nta1ns/me+please b", 22), 1);
    assert_int_equal(rx_redact_contains_secret(r, e64, strlen(e64)), 1);
    assert_int_equal(rx_redact_contains_secret(r, hx, strlen(hx)), 1);
    assert_int_equal(rx_redact_contains_secret(r, pc, strlen(pc)), 1);
    assert_int_equal(rx_redact_contains_secret(r, "c0nta1ns/me+pleas", 17), 0);
    assert_int_equal(rx_redact_contains_secret(r, "", 0), 0);
    const char *out = reds(r, "x c0nta1ns/me+please y");
    assert_int_equal(rx_redact_contains_secret(r, out, strlen(out)), 0);
    /* shapes are not handed-out values */
    assert_int_equal(rx_redact_contains_secret(r, "AKIAIOSFODNN7EXAMPLE", 20), 0);
    free(e64);
    free(hx);
    free(pc);
    rx_redactor_free(r);
}

static void test_holds_back_only_possible_prefixes(void **state)
{
    (void)state;
    rx_redactor *r = mk("S", "zebra-secret-123", NULL);
    rx_buf out;
    rx_buf_init(&out, 1 << 16);
    rx_redact_stream *s = rx_redact_stream_new(r, to_buf, &out);
    rx_redact_feed(s, "hello world. ", 13);
    assert_int_equal(out.len, 13); /* nothing here can begin a match: all of it is out */
    rx_redact_feed(s, "x zebra-sec", 11);
    assert_int_equal(out.len, 15); /* "zebra-sec" is held back */
    assert_null(memmem(out.data, out.len, "zeb", 3));
    rx_redact_feed(s, "ret-123 done", 12);
    rx_redact_finish(s);
    assert_string_equal((char *)out.data, "hello world. x [REDACTED:S] done");
    rx_redact_feed(s, "after finish", 12); /* ignored */
    assert_string_equal((char *)out.data, "hello world. x [REDACTED:S] done");
    rx_redact_stream_free(s);
    rx_buf_free(&out);
    assert_true(rx_redactor_max_hold(r) >= 16);
    rx_redactor_free(r);
}

static void test_buf_cap_and_no_secrets(void **state)
{
    (void)state;
    rx_redactor *r = mk(NULL);
    rx_buf out;
    rx_buf_init(&out, 4);
    assert_int_equal(rx_redact_buf(r, "too long", 8, &out), REXEC_EREQUEST);
    rx_buf_free(&out);
    assert_string_equal(reds(r, "plain text stays plain"), "plain text stays plain");
    rx_redactor_free(r);
    rx_redactor_free(NULL);
    rx_redact_stream_free(NULL);
}

/* ---- property test ------------------------------------------------------------------------ */

static uint64_t seed = 0x2545F4914F6CDD1Dull;

static uint64_t rnd(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}

/* Background bytes that can form no shape trigger (no letters, no '-') but hold NUL and high
 * bytes. */
static unsigned char bg_byte(void)
{
    for (;;) {
        unsigned char c = (unsigned char)rnd();
        if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && c != '-')
            return c;
    }
}

static void random_secret(unsigned char *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        do
            v[i] = (unsigned char)rnd();
        while (v[i] == 0);
}

static void assert_absent(const rx_buf *out, const void *p, size_t n)
{
    if (out->len && memmem(out->data, out->len, p, n) != NULL)
        fail_msg("a secret form survived redaction");
}

/* Writes form f of v into o: 0 raw, 1 base64 at offset k (inner part checked), 2 hex, 3 pct,
 * 4 base32, 5 hex wrapped at a random column (LF or CRLF). */
static size_t put_form(unsigned char *o, const unsigned char *v, size_t n, int f, char *check,
                       size_t *check_len)
{
    char *e = NULL;
    size_t len;
    if (f == 0) {
        memcpy(o, v, n);
        memcpy(check, v, n);
        *check_len = n;
        return n;
    }
    if (f == 1) {
        unsigned char blob[128];
        size_t k = rnd() % 3, post = rnd() % 3;
        for (size_t i = 0; i < k + n + post; i++)
            blob[i] = (unsigned char)rnd();
        memcpy(blob + k, v, n);
        e = b64(blob, k + n + post, (int)(rnd() & 1), (int)(rnd() & 1));
        size_t first = (8 * k + 5) / 6, last = 8 * (k + n) / 6;
        memcpy(check, e + first, last - first);
        *check_len = last - first;
    } else if (f == 4 || f == 5) { /* base32, or hex wrapped at a random column */
        char *raw = f == 4 ? b32(v, n, (int)(rnd() & 1)) : hexs(v, n, (int)(rnd() & 1));
        size_t inner = f == 4 ? 8 * n / 5 : 2 * n;
        memcpy(check, raw, inner); /* checked in the output with its line breaks taken out */
        *check_len = inner;
        e = f == 4 ? raw : wrap(raw, 1 + rnd() % 80, (int)(rnd() & 1));
        if (f == 5)
            free(raw);
    } else {
        e = f == 2 ? hexs(v, n, (int)(rnd() & 1)) : pct(v, n, (int)(rnd() & 1));
        *check_len = strlen(e);
        memcpy(check, e, *check_len);
    }
    len = strlen(e);
    memcpy(o, e, len);
    free(e);
    return len;
}

static void test_property_random(void **state)
{
    (void)state;
    enum { ROUNDS = 300, NS = 4 };
    static unsigned char in[1 << 14], vals[NS][48], checks[64][256];
    size_t check_len[64];
    for (int round = 0; round < ROUNDS; round++) {
        rx_secret s[NS];
        size_t ns = 1 + rnd() % NS, n = 0, nchecks = 0;
        for (size_t i = 0; i < ns; i++) {
            size_t len = RX_SECRET_MIN_LEN + rnd() % 40;
            random_secret(vals[i], len);
            s[i] = (rx_secret){"P", vals[i], len};
        }
        rx_redactor *r;
        rexec_error e;
        assert_int_equal(rx_redactor_new(&r, s, ns, &e), 0);
        /* no secret yet: bytes pass through unchanged, whatever the chunking */
        size_t bg = 1 + rnd() % 2000, sizes[4];
        for (size_t i = 0; i < bg; i++)
            in[i] = bg_byte();
        for (int i = 0; i < 4; i++)
            sizes[i] = 1 + rnd() % (rnd() & 1 ? 7 : 3000);
        rx_buf out;
        if (rx_redact_contains_secret(r, in, bg) == 0) {
            feed_sizes(r, in, bg, sizes, 4, &out);
            assert_int_equal(out.len, bg);
            assert_memory_equal(out.data, in, bg);
            rx_buf_free(&out);
        }
        /* then secrets, in various forms, between runs of background */
        while (n < sizeof(in) - 1024 && nchecks < 64) {
            for (size_t i = rnd() % 64; i > 0; i--)
                in[n++] = bg_byte();
            size_t which = rnd() % ns;
            n += put_form(in + n, vals[which], s[which].len, (int)(rnd() % 6), (char *)checks[nchecks],
                          &check_len[nchecks]);
            nchecks++;
        }
        feed_sizes(r, in, n, sizes, 4, &out);
        rx_buf joined; /* the output with its line breaks taken out: wrapped forms are checked */
        rx_buf_init(&joined, out.len + 1);
        for (size_t i = 0; i < out.len; i++)
            if (out.data[i] != '\n' && out.data[i] != '\r')
                assert_int_equal(rx_buf_addc(&joined, out.data[i]), 0);
        for (size_t i = 0; i < nchecks; i++)
            assert_absent(&joined, checks[i], check_len[i]);
        rx_buf_free(&joined);
        for (size_t i = 0; i < ns; i++)
            assert_absent(&out, vals[i], s[i].len);
        assert_int_equal(rx_redact_contains_secret(r, out.data, out.len), 0);
        rx_buf_free(&out);
        rx_redactor_free(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_every_split),
        cmocka_unit_test(test_overlap_and_adjacent_merge),
        cmocka_unit_test(test_multiline_secret),
        cmocka_unit_test(test_base64_alignments),
        cmocka_unit_test(test_base64_tail_and_split),
        cmocka_unit_test(test_url_encoding),
        cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_shell_quoted),
        cmocka_unit_test(test_bash_ansi_c),
        cmocka_unit_test(test_base32_alignments),
        cmocka_unit_test(test_wrapped_every_column),
        cmocka_unit_test(test_wrap_only_within_runs),
        cmocka_unit_test(test_pem_block),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_jwt_aws_tokens),
        cmocka_unit_test(test_secret_inside_shape_merges),
        cmocka_unit_test(test_binary_around_secret),
        cmocka_unit_test(test_secret_in_runs),
        cmocka_unit_test(test_case_forms),
        cmocka_unit_test(test_refuses_short_and_nul),
        cmocka_unit_test(test_contains_secret),
        cmocka_unit_test(test_holds_back_only_possible_prefixes),
        cmocka_unit_test(test_buf_cap_and_no_secrets),
        cmocka_unit_test(test_property_random),
    };
    return cmocka_run_group_tests_name("redact", tests, NULL, NULL);
}
