/* The encoded forms of a secret: what a program on the tool VM is likely to print when it echoes
 * a secret through base64, a URL, JSON, hex or a shell quoting routine. Each form is matched as a
 * plain byte string by the redactor, so an encoding we generate here costs memory, not speed. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "redact_int.h"
#include "utf8.h"
#include "rexec.h"

/* A form is never longer than 6x its source (JSON \u00XX); scratch buffers are capped at that. */
#define FORM_MAX(n) ((n) * 12 + 64)

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static const char hex_lo[] = "0123456789abcdef";
static const char hex_up[] = "0123456789ABCDEF";

typedef struct form_ctx {
    rx_form_fn add;
    void *ctx;
    rx_buf t;  /* scratch: holds secret material, wiped on reset/free */
    int wrap;  /* the forms being made are encoded runs a tool may wrap */
} form_ctx;

static int add_form(form_ctx *f, const unsigned char *p, size_t n)
{
    return f->add(f->ctx, p, n, f->wrap);
}

static int emit(form_ctx *f)
{
    return f->t.len ? add_form(f, f->t.data, f->t.len) : 0;
}

/* Byte i of k zero bytes followed by v: the secret sitting at offset k of a larger blob. */
static unsigned char shifted(const unsigned char *v, size_t k, size_t i)
{
    return i < k ? 0 : v[i - k];
}

static int b64_encode(rx_buf *t, const unsigned char *v, size_t n, size_t k, const char *al)
{
    size_t total = n + k;
    int r = 0;
    for (size_t i = 0; i < total && r == 0; i += 3) {
        uint32_t x = (uint32_t)shifted(v, k, i) << 16;
        if (i + 1 < total)
            x |= (uint32_t)shifted(v, k, i + 1) << 8;
        if (i + 2 < total)
            x |= shifted(v, k, i + 2);
        char q[4] = {al[x >> 18], al[(x >> 12) & 63], al[(x >> 6) & 63], al[x & 63]};
        if (i + 1 >= total)
            q[2] = '=';
        if (i + 2 >= total)
            q[3] = '=';
        r = rx_buf_add(t, q, 4);
    }
    return r;
}

/* The stable characters [start, inner) of the encoded blob in f->t, then the same run to the
 * blob's end with and without its '=' padding (the secret also ends the blob). */
static int stable_forms(form_ctx *f, size_t start, size_t inner)
{
    const unsigned char *e = f->t.data;
    size_t len = f->t.len, bare = len;
    int r;
    while (bare > start && e[bare - 1] == '=')
        bare--;
    if ((r = add_form(f, e + start, inner - start)) != 0)
        return r;
    if ((r = add_form(f, e + start, len - start)) != 0)
        return r;
    return add_form(f, e + start, bare - start);
}

/* The secret at offset k (mod 3) of a base64 blob: only the characters whose 6 bits all come
 * from the secret are stable, chars [ceil(8k/6), floor(8(k+n)/6)). When the secret also ends
 * the blob, the last partial character (and '=' padding, if any) is stable too, so the padded
 * and unpadded tails are forms of their own: matching them leaves none of the secret's bits. */
static int b64_forms(form_ctx *f, const unsigned char *v, size_t n, const char *al)
{
    int r = 0;
    for (size_t k = 0; k < 3 && r == 0; k++) {
        rx_buf_reset(&f->t);
        if ((r = b64_encode(&f->t, v, n, k, al)) != 0)
            return r;
        r = stable_forms(f, (8 * k + 5) / 6, 8 * (k + n) / 6);
    }
    return r;
}

/* RFC 4648 base32 (upper case, as base32(1) and Python's b32encode print it), the secret at
 * offset k (mod 5) of a larger blob: as for base64, only the characters whose 5 bits all come
 * from the secret are stable, chars [ceil(8k/5), floor(8(k+n)/5)), plus the padded and unpadded
 * tails when the secret ends the blob. */
static const char b32_al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

static int b32_encode(rx_buf *t, const unsigned char *v, size_t n, size_t k)
{
    size_t total = n + k, bits = total * 8, chars = (bits + 4) / 5, padded = (total + 4) / 5 * 8;
    int r = 0;
    for (size_t c = 0; c < chars && r == 0; c++) {
        unsigned x = 0;
        for (size_t b = c * 5; b < c * 5 + 5; b++) {
            size_t i = b / 8;
            unsigned bit = i < total ? (shifted(v, k, i) >> (7 - b % 8)) & 1 : 0;
            x = x << 1 | bit;
        }
        r = rx_buf_addc(t, (unsigned char)b32_al[x]);
    }
    for (size_t c = chars; c < padded && r == 0; c++)
        r = rx_buf_addc(t, '=');
    return r;
}

static int b32_forms(form_ctx *f, const unsigned char *v, size_t n)
{
    int r = 0;
    for (size_t k = 0; k < 5 && r == 0; k++) {
        rx_buf_reset(&f->t);
        if ((r = b32_encode(&f->t, v, n, k)) != 0)
            return r;
        r = stable_forms(f, (8 * k + 4) / 5, 8 * (k + n) / 5);
    }
    return r;
}

static int hex_form(form_ctx *f, const unsigned char *v, size_t n, const char *digits)
{
    rx_buf_reset(&f->t);
    for (size_t i = 0; i < n; i++) {
        char h[2] = {digits[v[i] >> 4], digits[v[i] & 15]};
        if (rx_buf_add(&f->t, h, 2) != 0)
            return REXEC_ENOMEM;
    }
    return emit(f);
}

/* The value in ASCII lower (upper) case: what a normaliser prints back (a host name, a scheme,
 * scope.c's messages). The same bytes when it has no letter of that case: deduplicated later. */
static int case_form(form_ctx *f, const unsigned char *v, size_t n, int upper)
{
    rx_buf_reset(&f->t);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = v[i];
        if (upper ? (c >= 'a' && c <= 'z') : (c >= 'A' && c <= 'Z'))
            c ^= 0x20;
        if (rx_buf_addc(&f->t, c) != 0)
            return REXEC_ENOMEM;
    }
    return emit(f);
}

/* Percent-encoding: RFC 3986 unreserved bytes stay, plus `keep` (encoders disagree: Python's
 * quote() keeps '/', JavaScript's encodeURIComponent keeps !'()*); forms encode a space as '+'. */
static int url_form(form_ctx *f, const unsigned char *v, size_t n, const char *keep,
                    const char *digits, int plus)
{
    rx_buf_reset(&f->t);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        unsigned char c = v[i];
        int stays = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    (c && strchr("-._~", c)) || (c && strchr(keep, c));
        if (stays)
            r = rx_buf_addc(&f->t, c);
        else if (c == ' ' && plus)
            r = rx_buf_addc(&f->t, '+');
        else
            r = rx_buf_add(&f->t, (char[3]){'%', digits[c >> 4], digits[c & 15]}, 3);
    }
    return r ? r : emit(f);
}

static int url_forms(form_ctx *f, const unsigned char *v, size_t n)
{
    static const char *keeps[] = {"", "/", "!'()*"};
    int has_space = memchr(v, ' ', n) != NULL, r = 0;
    for (size_t k = 0; k < 3 && r == 0; k++)
        for (int up = 0; up < 2 && r == 0; up++)
            for (int plus = 0; plus <= has_space && r == 0; plus++)
                r = url_form(f, v, n, keeps[k], up ? hex_up : hex_lo, plus);
    return r;
}

enum { J_SLASH = 1, J_UPPER = 2, J_HTML = 4, J_ASCII = 8 };

static int json_u(rx_buf *t, unsigned cp, int flags)
{
    const char *d = (flags & J_UPPER) ? hex_up : hex_lo;
    char u[6] = {'\\', 'u', d[(cp >> 12) & 15], d[(cp >> 8) & 15], d[(cp >> 4) & 15], d[cp & 15]};
    return rx_buf_add(t, u, 6);
}

/* With J_ASCII, non-ASCII text is written as \uXXXX (UTF-16, surrogate pairs above U+FFFF),
 * as Python's json.dumps and PHP's json_encode do by default. */
static int json_nonascii(rx_buf *t, const unsigned char *v, size_t n, int flags, size_t *used)
{
    unsigned cp;
    size_t len = (flags & J_ASCII) ? rx_utf8_decode(v, n, &cp) : 0;
    if (len == 0) {
        *used = 1;
        return rx_buf_addc(t, v[0]);
    }
    *used = len;
    if (cp < 0x10000)
        return json_u(t, cp, flags);
    cp -= 0x10000;
    int r = json_u(t, 0xD800 | (cp >> 10), flags);
    return r ? r : json_u(t, 0xDC00 | (cp & 0x3FF), flags);
}

static int json_byte(rx_buf *t, unsigned char c, int flags)
{
    static const char shorts[] = "\"\"\\\\\bb\ff\nn\rr\tt";
    for (size_t i = 0; i < sizeof(shorts) - 1; i += 2)
        if (c == (unsigned char)shorts[i])
            return rx_buf_add(t, (char[2]){'\\', shorts[i + 1]}, 2);
    if (c == '/' && (flags & J_SLASH))
        return rx_buf_add(t, "\\/", 2);
    if (c < 0x20 || ((flags & J_HTML) && (c == '<' || c == '>' || c == '&')))
        return json_u(t, c, flags);
    return rx_buf_addc(t, c);
}

/* JSON string escaping as cJSON, JavaScript, Python, PHP and Go write it (see the flags). */
static int json_form(form_ctx *f, const unsigned char *v, size_t n, int flags)
{
    rx_buf_reset(&f->t);
    int r = 0;
    for (size_t i = 0, used; i < n && r == 0; i += used) {
        used = 1;
        if (v[i] >= 0x80)
            r = json_nonascii(&f->t, v + i, n - i, flags, &used);
        else
            r = json_byte(&f->t, v[i], flags);
    }
    return r ? r : emit(f);
}

static int json_forms(form_ctx *f, const unsigned char *v, size_t n)
{
    static const int variants[] = {0, J_SLASH, J_UPPER, J_HTML, J_ASCII, J_ASCII | J_SLASH,
                                   J_ASCII | J_UPPER};
    int r = 0;
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]) && r == 0; i++)
        r = json_form(f, v, n, variants[i]);
    return r;
}

/* v with every byte in `set` replaced by `with` (or prefixed by a backslash when with is NULL). */
static int escape_form(form_ctx *f, const unsigned char *v, size_t n, const char *set,
                       const char *with)
{
    rx_buf_reset(&f->t);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        if (v[i] == 0 || strchr(set, v[i]) == NULL)
            r = rx_buf_addc(&f->t, v[i]);
        else if (with)
            r = rx_buf_adds(&f->t, with);
        else if ((r = rx_buf_addc(&f->t, '\\')) == 0)
            r = rx_buf_addc(&f->t, v[i]);
    }
    return r ? r : emit(f);
}

/* bash's $'...' quoting, byte for byte as bash 5 prints it (printf %q, declare -p, set -x):
 * \a \b \E \f \n \r \t \v \\ \' by name, other control bytes, DEL and every byte >= 0x80 as
 * three octal digits in the C locale; in a UTF-8 locale a well-formed multi-byte character stays
 * as it is (bash keeps what the locale calls printable: U+0080..U+009F would be octal there,
 * documented). esc is what ESC is written as: bash writes \E, ksh and zsh \e. */
static int ansi_c_form(form_ctx *f, const unsigned char *v, size_t n, int utf8, char esc)
{
    static const char named[] = "\aa\bb\ff\nn\rr\tt\vv\\\\''";
    rx_buf_reset(&f->t);
    int r = 0;
    for (size_t i = 0, used; i < n && r == 0; i += used) {
        const char *k = v[i] ? memchr(named, v[i], sizeof(named) - 1) : NULL;
        unsigned cp;
        used = 1;
        if (k && (k - named) % 2 == 0)
            r = rx_buf_add(&f->t, (char[2]){'\\', k[1]}, 2);
        else if (v[i] == 0x1b)
            r = rx_buf_add(&f->t, (char[2]){'\\', esc}, 2);
        else if (v[i] >= 0x80 && utf8 && (used = rx_utf8_decode(v + i, n - i, &cp)) != 0)
            r = rx_buf_add(&f->t, v + i, used);
        else if (v[i] < 0x20 || v[i] >= 0x7f)
            used = 1, r = rx_buf_addf(&f->t, "\\%03o", v[i]);
        else
            r = rx_buf_addc(&f->t, v[i]);
    }
    return r ? r : emit(f);
}

/* The inside of single quotes ('\'' and '"'"' for a quote), printf %q backslashes, the inside of
 * double quotes, and $'...'. A form equal to v itself is harmless: the caller dedupes. */
static int shell_forms(form_ctx *f, const unsigned char *v, size_t n)
{
    int r = escape_form(f, v, n, "'", "'\\''");
    if (r == 0)
        r = escape_form(f, v, n, "'", "'\"'\"'");
    if (r == 0)
        r = escape_form(f, v, n, " \t!\"#$&'()*,;<=>?[\\]^`{|}~", NULL);
    if (r == 0)
        r = escape_form(f, v, n, " \t!\"$&'()*;<>?[\\]^`{|}", NULL);
    if (r == 0)
        r = escape_form(f, v, n, "\"\\$`", NULL);
    for (int utf8 = 0; utf8 < 2 && r == 0; utf8++)
        for (int e = 0; e < 2 && r == 0; e++)
            r = ansi_c_form(f, v, n, utf8, e ? 'e' : 'E');
    return r;
}

static int one_value(form_ctx *f, const unsigned char *v, size_t n)
{
    int r = add_form(f, v, n);
    if (r == 0)
        r = case_form(f, v, n, 0);
    if (r == 0)
        r = case_form(f, v, n, 1);
    f->wrap = 1;
    if (r == 0)
        r = b64_forms(f, v, n, b64_std);
    if (r == 0)
        r = b64_forms(f, v, n, b64_url);
    if (r == 0)
        r = b32_forms(f, v, n);
    if (r == 0)
        r = hex_form(f, v, n, hex_lo);
    if (r == 0)
        r = hex_form(f, v, n, hex_up);
    f->wrap = 0;
    if (r == 0)
        r = url_forms(f, v, n);
    if (r == 0)
        r = json_forms(f, v, n);
    if (r == 0)
        r = shell_forms(f, v, n);
    return r;
}

/* A multi-line secret may be printed one line at a time, or with CRLF line ends. */
static int line_forms(form_ctx *f, const unsigned char *v, size_t n, size_t min_len)
{
    int r = escape_form(f, v, n, "\n", "\r\n");
    for (size_t i = 0; i < n && r == 0;) {
        const unsigned char *nl = memchr(v + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - v) : n, len = end - i;
        if (len && v[i + len - 1] == '\r')
            len--;
        if (len >= min_len && len < n)
            r = one_value(f, v + i, len);
        i = end + 1;
    }
    return r;
}

int rx_forms(const unsigned char *v, size_t n, size_t min_len, rx_form_fn add, void *ctx)
{
    form_ctx f = {add, ctx, {0}, 0};
    rx_buf_init(&f.t, FORM_MAX(n));
    int r = one_value(&f, v, n);
    if (r == 0 && memchr(v, '\n', n))
        r = line_forms(&f, v, n, min_len);
    rx_buf_free(&f.t);
    return r;
}
