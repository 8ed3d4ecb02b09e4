/* Secret shapes: private keys, credential headers, JWTs and vendor tokens that are redacted even
 * when nobody handed them to the call. Each shape starts with a fixed trigger whose first 4 bytes
 * go into the same filter as the handed-out secrets, so a shape costs nothing until its trigger
 * shows up; the matchers below then decide from a bounded look-ahead (rx_shape_lookahead). */
#include <string.h>
#include <strings.h>

#include "redact_int.h"

/* Bounds on what a matcher looks at before it decides: they bound what a stream holds back. */
#define JWT_HEADER_MAX 2048 /* a JWT header segment (x5c chains can make them long) */
#define HEADER_SPACE_MAX 64 /* blanks between a header name, its colon and its value */
#define PEM_LABEL_MAX 48    /* "RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", ... */
#define TOKEN_BODY_MAX 64   /* the longest fixed body length below */

enum cs_id { CS_WORD, CS_B64URL, CS_JWT, CS_ALNUM, CS_ALNUM_US, CS_ALNUM_DASH, CS_UPPER_DIGIT,
             CS_ALPHA };

enum shape_id { SH_PEM_BEGIN, SH_PEM_END, SH_AUTHZ, SH_COOKIE, SH_JWT, SH_TOKEN0 };

enum { TK_EXACT = 1, TK_DIGIT = 2 };

/* A vendor token: prefix, then at least `min` bytes of charset `cs` (exactly `min` with
 * TK_EXACT; TK_DIGIT: one of them a digit, so "sk-" does not hit hyphenated English). */
static const struct token {
    const char *prefix;
    unsigned char cs;
    unsigned char min;
    unsigned char flags;
    const char *marker;
} tokens[] = {
    {"AKIA", CS_UPPER_DIGIT, 16, TK_EXACT, "[REDACTED:AWS_KEY_ID]"},
    {"ASIA", CS_UPPER_DIGIT, 16, TK_EXACT, "[REDACTED:AWS_KEY_ID]"},
    {"ghp_", CS_ALNUM, 30, 0, "[REDACTED:TOKEN]"},
    {"gho_", CS_ALNUM, 30, 0, "[REDACTED:TOKEN]"},
    {"ghu_", CS_ALNUM, 30, 0, "[REDACTED:TOKEN]"},
    {"ghs_", CS_ALNUM, 30, 0, "[REDACTED:TOKEN]"},
    {"ghr_", CS_ALNUM, 30, 0, "[REDACTED:TOKEN]"},
    {"github_pat_", CS_ALNUM_US, 22, 0, "[REDACTED:TOKEN]"},
    {"xoxb-", CS_ALNUM_DASH, 10, 0, "[REDACTED:TOKEN]"},
    {"xoxp-", CS_ALNUM_DASH, 10, 0, "[REDACTED:TOKEN]"},
    {"xoxa-", CS_ALNUM_DASH, 10, 0, "[REDACTED:TOKEN]"},
    {"xoxr-", CS_ALNUM_DASH, 10, 0, "[REDACTED:TOKEN]"},
    {"xoxs-", CS_ALNUM_DASH, 10, 0, "[REDACTED:TOKEN]"},
    {"xoxe-", CS_ALNUM_DASH, 10, 0, "[REDACTED:TOKEN]"},
    {"xapp-", CS_ALNUM_DASH, 10, 0, "[REDACTED:TOKEN]"},
    {"sk_live_", CS_ALNUM, 16, 0, "[REDACTED:TOKEN]"},
    {"rk_live_", CS_ALNUM, 16, 0, "[REDACTED:TOKEN]"},
    {"sk_test_", CS_ALNUM, 16, 0, "[REDACTED:TOKEN]"},
    {"rk_test_", CS_ALNUM, 16, 0, "[REDACTED:TOKEN]"},
    {"sk-", CS_B64URL, 20, TK_DIGIT, "[REDACTED:TOKEN]"},
    {"glpat-", CS_B64URL, 20, 0, "[REDACTED:TOKEN]"},
    {"npm_", CS_ALNUM, 36, 0, "[REDACTED:TOKEN]"},
    {"AIza", CS_B64URL, 35, 0, "[REDACTED:TOKEN]"},
    {"hf_", CS_ALPHA, 30, 0, "[REDACTED:TOKEN]"},
    {"pypi-AgEI", CS_B64URL, 50, 0, "[REDACTED:TOKEN]"},
    {"dop_v1_", CS_ALNUM, 64, TK_EXACT, "[REDACTED:TOKEN]"},
    {"shpat_", CS_ALNUM, 32, 0, "[REDACTED:TOKEN]"},
    {"shpss_", CS_ALNUM, 32, 0, "[REDACTED:TOKEN]"},
    {"AGE-SECRET-KEY-1", CS_UPPER_DIGIT, 50, 0, "[REDACTED:TOKEN]"},
};
#define N_TOKENS (sizeof(tokens) / sizeof(tokens[0]))

static void cs_add(rx_cset *c, const char *ranges)
{
    for (const char *p = ranges; *p; p++) {
        unsigned char lo = (unsigned char)*p, hi = lo;
        if (p[1] == '.' && p[2] == '.' && p[3]) {
            hi = (unsigned char)p[3];
            p += 3;
        }
        for (unsigned b = lo; b <= hi; b++)
            c->w[b >> 6] |= 1ull << (b & 63);
    }
}

void rx_shapes_init(rx_shapes *sh)
{
    static const char *defs[] = {
        [CS_WORD] = "A..Za..z0..9_-",      [CS_B64URL] = "A..Za..z0..9_-",
        [CS_JWT] = "A..Za..z0..9_-.=",     [CS_ALNUM] = "A..Za..z0..9",
        [CS_ALNUM_US] = "A..Za..z0..9_",   [CS_ALNUM_DASH] = "A..Za..z0..9-",
        [CS_UPPER_DIGIT] = "A..Z0..9",     [CS_ALPHA] = "A..Za..z",
    };
    memset(sh, 0, sizeof(*sh));
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
        cs_add(&sh->cs[i], defs[i]);
}

static uint32_t fold_gram(const char *s)
{
    return rx_load32((const unsigned char *)s) | RX_FOLD32;
}

static size_t push(rx_trigger *out, size_t max, size_t n, const char *gram4, unsigned shape)
{
    if (n < max)
        out[n] = (rx_trigger){fold_gram(gram4), (uint16_t)shape};
    return n + 1;
}

/* A trigger shorter than 4 bytes ("sk-", "hf_", "eyJ") is registered once per byte that may
 * follow it, so every trigger is a full 4-byte gram. */
static size_t push_short(rx_trigger *out, size_t max, size_t n, const char *pre, const rx_cset *cs,
                         unsigned shape)
{
    for (unsigned b = 1; b < 256; b++) {
        if (!rx_cset_has(cs, (unsigned char)b))
            continue;
        char g[4] = {pre[0], pre[1], pre[2], (char)b};
        n = push(out, max, n, g, shape);
    }
    return n;
}

size_t rx_shape_triggers(rx_trigger *out, size_t max)
{
    rx_shapes sh;
    rx_shapes_init(&sh);
    size_t n = 0;
    n = push(out, max, n, "----", SH_PEM_BEGIN);
    n = push(out, max, n, "----", SH_PEM_END);
    n = push(out, max, n, "auth", SH_AUTHZ);
    n = push(out, max, n, "cook", SH_COOKIE);
    n = push_short(out, max, n, "eyJ", &sh.cs[CS_B64URL], SH_JWT);
    for (size_t i = 0; i < N_TOKENS; i++) {
        if (strlen(tokens[i].prefix) >= 4)
            n = push(out, max, n, tokens[i].prefix, SH_TOKEN0 + (unsigned)i);
        else
            n = push_short(out, max, n, tokens[i].prefix, &sh.cs[tokens[i].cs], SH_TOKEN0 + i);
    }
    return n;
}

size_t rx_shape_lookahead(void)
{
    return 5 + JWT_HEADER_MAX + 4;
}

/* RX_YES when w has k bytes from q; else RX_MORE, or RX_NO at the end of the stream. */
static int need(const rx_win *w, size_t q, size_t k)
{
    if (q + k <= w->n)
        return RX_YES;
    return w->eof ? RX_NO : RX_MORE;
}

static int prev_byte(const rx_win *w, size_t q)
{
    return q ? w->p[q - 1] : w->before;
}

/* Length of the run of cs bytes at q, looking at no more than max bytes. */
static size_t run(const rx_win *w, size_t q, const rx_cset *cs, size_t max)
{
    size_t i = q;
    while (i < w->n && i - q < max && rx_cset_has(cs, w->p[i]))
        i++;
    return i - q;
}

static int ends_with(const unsigned char *p, size_t n, const char *s)
{
    size_t k = strlen(s);
    return n >= k && memcmp(p + n - k, s, k) == 0;
}

/* "-----" kw label "-----" where label ends in PRIVATE KEY (or PRIVATE KEY BLOCK, for PGP). */
static int pem_line(const rx_win *w, size_t q, const char *kw, size_t *end)
{
    size_t k = strlen(kw);
    int v = need(w, q, 5 + k);
    if (v != RX_YES)
        return v;
    if (memcmp(w->p + q, "-----", 5) != 0 || memcmp(w->p + q + 5, kw, k) != 0)
        return RX_NO;
    size_t l = q + 5 + k, i = l;
    while (i < w->n && i - l <= PEM_LABEL_MAX &&
           ((w->p[i] >= 'A' && w->p[i] <= 'Z') || (w->p[i] >= '0' && w->p[i] <= '9') ||
            w->p[i] == ' '))
        i++;
    if (i - l > PEM_LABEL_MAX)
        return RX_NO;
    if ((v = need(w, i, 5)) != RX_YES)
        return v;
    if (memcmp(w->p + i, "-----", 5) != 0 ||
        !(ends_with(w->p + l, i - l, "PRIVATE KEY") ||
          ends_with(w->p + l, i - l, "PRIVATE KEY BLOCK")))
        return RX_NO;
    *end = i + 5;
    return RX_YES;
}

/* Inside a run of dashes no "-----BEGIN" or "-----END" starts before the run's last 5 dashes. */
static size_t past_dashes(const rx_win *w, size_t q)
{
    size_t e = q;
    while (e < w->n && w->p[e] == '-')
        e++;
    return e - q > 5 ? e - 5 : q + 1;
}

static int pem_match(const rx_win *w, size_t q, int begin, int pem_open, rx_hit *hit,
                     size_t *next)
{
    size_t end;
    int v = begin || pem_open ? pem_line(w, q, begin ? "BEGIN " : "END ", &end) : RX_NO;
    if (v == RX_NO)
        *next = past_dashes(w, q); /* an END line alone is no secret either */
    if (v != RX_YES)
        return v;
    *hit = (rx_hit){.a = w->base + q, .b = w->base + end, .marker = "[REDACTED:PRIVATE_KEY]"};
    if (begin)
        hit->open = RX_OPEN_PEM;
    else
        hit->resolve = RX_OPEN_PEM;
    return RX_YES;
}

static int is_blank(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static size_t skip_blanks(const rx_win *w, size_t i)
{
    size_t s = i;
    while (i < w->n && i - s <= HEADER_SPACE_MAX && is_blank(w->p[i]))
        i++;
    return i;
}

/* name ["] [blanks] ':' [blanks] value: the value, to the end of its line, is the secret. A
 * quoted name ("Authorization": "Bearer ...") makes it JSON: a quoted value ends at its quote. */
static int header_match(const rx_win *w, size_t q, const char *name, const char *marker,
                        rx_hit *hit)
{
    size_t k = strlen(name), i = q + k;
    int v = need(w, q, k + 1), quoted = 0;
    if (v != RX_YES)
        return v;
    if (strncasecmp((const char *)w->p + q, name, k) != 0)
        return RX_NO;
    if (w->p[i] == '"' || w->p[i] == '\'')
        quoted = w->p[i++] == '"';
    i = skip_blanks(w, i);
    if ((v = need(w, i, 1)) != RX_YES || w->p[i] != ':')
        return v == RX_YES ? RX_NO : v;
    i = skip_blanks(w, i + 1);
    if ((v = need(w, i, 1)) != RX_YES)
        return v;
    if (w->p[i] == '\r' || w->p[i] == '\n')
        return RX_NO; /* an empty value */
    quoted = quoted && w->p[i] == '"';
    if (quoted) {
        if ((v = need(w, ++i, 1)) != RX_YES)
            return v;
        if (w->p[i] == '"')
            return RX_NO; /* "" */
    }
    *hit = (rx_hit){.a = w->base + i, .b = w->base + i, .marker = marker, .open = RX_OPEN_EOL,
                    .quoted = quoted};
    return RX_YES;
}

/* eyJ<header>.eyJ<payload>.<signature>: both JSON segments of a JWT start with base64("{\""). */
static int jwt_match(const rx_shapes *sh, const rx_win *w, size_t q, rx_hit *hit)
{
    int prev = prev_byte(w, q);
    if (prev >= 0 && (rx_cset_has(&sh->cs[CS_B64URL], (unsigned char)prev) || prev == '.'))
        return RX_NO; /* inside a longer base64 run: not the start of a JWT */
    if (memcmp(w->p + q, "eyJ", 3) != 0)
        return RX_NO;
    size_t seg = run(w, q, &sh->cs[CS_B64URL], JWT_HEADER_MAX + 1), dot = q + seg;
    if (seg > JWT_HEADER_MAX || seg < 10)
        return seg < 10 && dot == w->n && !w->eof ? RX_MORE : RX_NO;
    int v = need(w, dot, 5);
    if (v != RX_YES)
        return v;
    if (w->p[dot] != '.' || memcmp(w->p + dot + 1, "eyJ", 3) != 0 ||
        !rx_cset_has(&sh->cs[CS_B64URL], w->p[dot + 4]))
        return RX_NO;
    *hit = (rx_hit){.a = w->base + q, .b = w->base + dot + 5, .marker = "[REDACTED:JWT]",
                    .open = RX_OPEN_CS, .cs = &sh->cs[CS_JWT]};
    return RX_YES;
}

static int has_digit(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] >= '0' && p[i] <= '9')
            return 1;
    return 0;
}

static int token_match(const rx_shapes *sh, const struct token *t, const rx_win *w, size_t q,
                       rx_hit *hit)
{
    size_t pl = strlen(t->prefix);
    int v = need(w, q, pl), prev = prev_byte(w, q);
    if (v != RX_YES)
        return v;
    if (memcmp(w->p + q, t->prefix, pl) != 0 ||
        (prev >= 0 && rx_cset_has(&sh->cs[CS_WORD], (unsigned char)prev)))
        return RX_NO;
    const rx_cset *cs = &sh->cs[t->cs];
    size_t body = run(w, q + pl, cs, (size_t)t->min + 1), end = q + pl + body;
    size_t want = t->min + ((t->flags & TK_EXACT) ? 1u : 0u);
    if (body < want && end == w->n && !w->eof)
        return RX_MORE; /* the body (or, for an exact length, what follows it) is not here yet */
    if (body < t->min || ((t->flags & TK_DIGIT) && !has_digit(w->p + q + pl, t->min)))
        return RX_NO;
    if ((t->flags & TK_EXACT) &&
        (body > t->min || (end < w->n && rx_cset_has(&sh->cs[CS_WORD], w->p[end]))))
        return RX_NO;
    *hit = (rx_hit){.a = w->base + q, .b = w->base + q + pl + t->min, .marker = t->marker};
    if (!(t->flags & TK_EXACT)) {
        hit->open = RX_OPEN_CS;
        hit->cs = cs;
    }
    return RX_YES;
}

int rx_shape_match(const rx_shapes *sh, unsigned shape, const rx_win *w, size_t q, int pem_open,
                   rx_hit *hit, size_t *next)
{
    switch (shape) {
    case SH_PEM_BEGIN:
    case SH_PEM_END:
        return pem_match(w, q, shape == SH_PEM_BEGIN, pem_open, hit, next);
    case SH_AUTHZ:
        return header_match(w, q, "authorization", "[REDACTED:AUTHORIZATION]", hit);
    case SH_COOKIE:
        return header_match(w, q, "cookie", "[REDACTED:COOKIE]", hit);
    case SH_JWT:
        return jwt_match(sh, w, q, hit);
    default:
        if (shape - SH_TOKEN0 < N_TOKENS)
            return token_match(sh, &tokens[shape - SH_TOKEN0], w, q, hit);
        return RX_NO;
    }
}
