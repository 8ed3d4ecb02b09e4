/* The streaming redactor.
 *
 * Matching: every handed-out secret is expanded into its encoded forms (redact_enc.c), each a
 * plain byte string of at least 8 bytes. Every input position is looked up by its first 4 bytes
 * (case-folded) in a bitmap filter that also holds the triggers of the secret shapes
 * (redact_shape.c); almost every position fails that one probe, which is what makes the common
 * case fast whatever the number of secrets. A position that passes is checked exactly: a table
 * keyed by the first 8 bytes gives the forms that may start there, and the 4-byte gram table gives
 * the shapes to try.
 *
 * Streams: a stream holds back only the tail of its input that could still begin a match (a
 * proper prefix of a form, or a shape that has not decided yet), and keeps one "range" of output
 * to replace: matches that overlap or touch it are merged into it, so no tail of one secret is
 * left beside another, and it is written as one marker once the scan has moved past its end.
 * Shapes whose end is not known yet (a header value to the end of its line, a private key to its
 * END line, a token to the end of its charset) keep the range open without holding its bytes. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "err.h"
#include "redact.h"
#include "redact_int.h"

#define MAX_HITS 8 /* matches tried at one position: the forms, plus shapes */
#define ERROR_MARKER "[REDACTED:ERROR]"

/* The range being replaced: [a, b) plus the conditions that may still extend b. */
typedef struct rx_range {
    uint64_t a, b;
    const char *marker;
    unsigned open;
    uint64_t eol_at, cs_at; /* how far the open EOL / charset conditions have been checked */
    int quoted, esc;
    rx_cset cs;
} rx_range;

/* Invariants that keep every secret byte out of the output:
 * - a match found while scanning position q starts at q or later (a header value starts after
 *   its name), so raw bytes are written only up to the scan position, and never past the start
 *   of the active range;
 * - so every byte before `emit` has been written (raw or inside a marker), and `emit` lies in the
 *   current window unless the range is active and emit == rng.a (its bytes are not needed: they
 *   become the marker);
 * - a range is written out only once nothing can merge with it any more: the scan has passed
 *   its end (a match starting exactly at its end still merges) and no condition is open. */
struct rx_redact_stream {
    const rx_redactor *r;
    rx_redact_sink sink;
    void *ctx;
    rx_buf hold;    /* the held-back tail, starting at absolute offset base */
    uint64_t base;
    uint64_t emit;  /* output has been produced for every byte before this offset */
    int before;     /* the byte at base-1, or -1 */
    int active;     /* rng is in use */
    int done;       /* finished, or failed (out of memory) */
    rx_range rng;
};

/* ---- lookups --------------------------------------------------------------------------------- */

static inline uint32_t gram_hash(uint32_t g, unsigned shift)
{
    return (uint32_t)(g * RX_HASH_MUL) >> shift;
}

static const gram_slot *gram_find(const rx_redactor *r, uint32_t g)
{
    uint32_t mask = (uint32_t)((1ull << (32 - r->gshift)) - 1);
    for (uint32_t i = gram_hash(g, r->gshift);; i = (i + 1) & mask) {
        if (!r->grams[i].used)
            return NULL;
        if (r->grams[i].key == g)
            return &r->grams[i];
    }
}

static uint32_t lit_hash(uint64_t k, unsigned shift)
{
    return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> shift);
}

static const lit_slot *lit_find(const rx_redactor *r, uint64_t k)
{
    uint32_t mask = (uint32_t)((1ull << (64 - r->lshift)) - 1);
    for (uint32_t i = lit_hash(k, r->lshift);; i = (i + 1) & mask) {
        if (!r->lits[i].used)
            return NULL;
        if (r->lits[i].key == k)
            return &r->lits[i];
    }
}

/* The filter word for gram g, shifted so that g's bit is bit 0. (x86 shifts take the count mod
 * 64 themselves, so the & 63 costs nothing.) */
static inline uint64_t filter_probe(const uint64_t *f, unsigned shift, uint32_t g)
{
    uint32_t h = gram_hash(g, shift);
    return f[h >> 6] >> (h & 63);
}

/* The first position in [i, lim) whose gram passes the filter, else lim. The fast loop probes
 * 8 positions from two 8-byte loads and ORs the probes together: one branch per 8 positions,
 * and a block that passes is looked at again one position at a time. A block that is one
 * (folded) byte repeated, as in the runs of zeros of core dumps, images and padding, holds the
 * same gram at all 8 positions: one probe answers for them. */
static size_t next_hit(const rx_redactor *r, const unsigned char *p, size_t i, size_t lim)
{
    const uint64_t *f = r->filter;
    unsigned sh = r->fshift;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 9 <= lim; i += 8) { /* lim = n - 3: bytes up to i + 11 exist */
        uint64_t x = rx_load64(p + i) | RX_FOLD64, y = rx_load64(p + i + 4) | RX_FOLD64;
        if (x == y && x == ((x >> 8) | (x << 56))) { /* bytes i..i+11 all alike */
            if (filter_probe(f, sh, (uint32_t)x) & 1)
                break;
            continue;
        }
        uint64_t m = filter_probe(f, sh, (uint32_t)x) | filter_probe(f, sh, (uint32_t)(x >> 8)) |
                     filter_probe(f, sh, (uint32_t)(x >> 16)) |
                     filter_probe(f, sh, (uint32_t)(x >> 24)) | filter_probe(f, sh, (uint32_t)y) |
                     filter_probe(f, sh, (uint32_t)(y >> 8)) |
                     filter_probe(f, sh, (uint32_t)(y >> 16)) |
                     filter_probe(f, sh, (uint32_t)(y >> 24));
        if (m & 1)
            break;
    }
#endif
    for (; i < lim; i++)
        if (filter_probe(f, sh, rx_load32(p + i) | RX_FOLD32) & 1)
            return i;
    return lim;
}

static unsigned char fold(unsigned char c)
{
    return c | 0x20;
}

/* Could the last 1-3 bytes of a window begin a form or a shape? (No false negatives.) */
static int maybe_prefix(const rx_redactor *r, const unsigned char *p, size_t n)
{
    unsigned a = fold(p[0]), b, h;
    switch (n) {
    case 1:
        return (int)((r->pre1[a >> 6] >> (a & 63)) & 1);
    case 2:
        b = a | (unsigned)fold(p[1]) << 8;
        return (int)((r->pre2[b >> 6] >> (b & 63)) & 1);
    default:
        h = rx_pre3_hash(p);
        return (int)((r->pre3[h >> 6] >> (h & 63)) & 1);
    }
}

/* ---- wrapped encoded runs ------------------------------------------------------------------ */

/* Bytes of hex, base64 (both alphabets, padding) and base32: the only forms that wrap. */
static int wrap_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '/' || c == '=' || c == '-' || c == '_';
}

/* The line break at w->p[i]: its length (1 for "\n", 2 for "\r\n"), 0 if none, -1 if the
 * window ends after a '\r' (more input decides). */
static int break_at(const rx_win *w, size_t i)
{
    if (w->p[i] == '\n')
        return 1;
    if (w->p[i] != '\r')
        return 0;
    if (i + 1 < w->n)
        return w->p[i + 1] == '\n' ? 2 : 0;
    return w->eof ? 0 : -1;
}

enum { WALK_END = 1, WALK_SKIPPED = 2 };

/* Compares pt with the input at q. A wrappable form may have one line break between any two
 * of its bytes. Returns RX_YES with *end (relative) after its last byte, RX_NO, or RX_MORE when
 * the window ends first. */
static int form_cmp(const rx_win *w, size_t q, const rx_pat *pt, size_t *end)
{
    if (q + pt->len <= w->n && memcmp(w->p + q, pt->p, pt->len) == 0) {
        *end = q + pt->len;
        return RX_YES;
    }
    size_t i = q;
    for (uint32_t j = 0; j < pt->len; j++, i++) {
        if (i < w->n && j > 0 && pt->wrap) {
            int b = break_at(w, i);
            if (b < 0)
                return RX_MORE;
            i += (size_t)b;
        }
        if (i >= w->n)
            return w->eof ? RX_NO : RX_MORE;
        if (w->p[i] != pt->p[j])
            return RX_NO;
    }
    *end = i;
    return RX_YES;
}

/* The first up-to-8 bytes of a wrapped run at q, line breaks skipped (one between two bytes).
 * Returns how many it found; *how gets WALK_END if the window ended first (more input may
 * follow) and WALK_SKIPPED if a break was skipped. */
static size_t joined8(const rx_win *w, size_t q, unsigned char key[8], unsigned *how)
{
    size_t k = 0, i = q;
    *how = 0;
    while (k < 8) {
        if (i >= w->n) {
            *how |= w->eof ? 0 : WALK_END;
            break;
        }
        int b = k ? break_at(w, i) : 0;
        if (b < 0) {
            *how |= WALK_END;
            break;
        }
        if (b) {
            i += (size_t)b;
            *how |= WALK_SKIPPED;
            if (i >= w->n) {
                *how |= w->eof ? 0 : WALK_END;
                break;
            }
            if (!wrap_char(w->p[i]))
                break;
        }
        key[k++] = w->p[i++];
    }
    return k;
}

/* The best (longest) form so far at one position. */
typedef struct lit_best {
    const rx_pat *pt;
    size_t end;
    int more;
} lit_best;

static void lit_try(const rx_redactor *r, const rx_win *w, size_t q, const lit_slot *ls,
                    int wrap_only, lit_best *lb)
{
    for (uint32_t i = 0; ls && i < ls->n; i++) {
        const rx_pat *pt = &r->pats[r->lit_ids[ls->first + i]];
        size_t end;
        if (wrap_only && !pt->wrap)
            continue;
        int v = form_cmp(w, q, pt, &end);
        lb->more |= v == RX_MORE;
        if (v == RX_YES && (!lb->pt || pt->len > lb->pt->len))
            lb->pt = pt, lb->end = end;
    }
}

/* Fewer than 8 bytes k are left before the window ends: could a form start with them? */
static int lit_prefix(const rx_redactor *r, const unsigned char *key, size_t k, int wrap_only)
{
    if (k < 4)
        return k && maybe_prefix(r, key, k);
    const gram_slot *g = gram_find(r, rx_load32(key) | RX_FOLD32);
    for (uint32_t i = 0; g && i < g->nlit; i++) {
        const rx_pat *pt = &r->pats[r->gram_lits[g->lit + i]];
        if (memcmp(key, pt->p, k) == 0 && (pt->wrap || !wrap_only))
            return 1;
    }
    return 0;
}

/* The longest form starting at q: looked up by its first 8 bytes as they stand, and (for the
 * wrappable forms) by its first 8 bytes with line breaks skipped. */
static int lit_match(const rx_redactor *r, const rx_win *w, size_t q, rx_hit *hit)
{
    lit_best lb = {NULL, 0, 0};
    size_t avail = w->n - q;
    if (avail >= 8)
        lit_try(r, w, q, lit_find(r, rx_load64(w->p + q)), 0, &lb);
    else if (!w->eof)
        lb.more |= lit_prefix(r, w->p + q, avail, 0);
    if (r->has_wrap) {
        unsigned char key[8];
        unsigned how;
        size_t k = joined8(w, q, key, &how);
        if ((how & WALK_SKIPPED) && k == 8)
            lit_try(r, w, q, lit_find(r, rx_load64(key)), 1, &lb);
        else if (how & WALK_END)
            lb.more |= lit_prefix(r, key, k, 1);
    }
    if (lb.more || !lb.pt)
        return lb.more ? RX_MORE : RX_NO;
    *hit = (rx_hit){.a = w->base + q, .b = w->base + lb.end, .marker = r->markers[lb.pt->secret]};
    return RX_YES;
}

/* Does the first 4 bytes of the run at q, line breaks skipped, pass the filter? Yes when the
 * window ends first (more input decides). Most line ends of ordinary text stop here. */
static int wrap_gram_passes(const rx_redactor *r, const rx_win *w, size_t q)
{
    unsigned char key[8];
    unsigned how;
    size_t k = joined8(w, q, key, &how);
    if (k < 4)
        return (how & WALK_END) != 0;
    return (int)(filter_probe(r->filter, r->fshift, rx_load32(key) | RX_FOLD32) & 1);
}

/* The next position at or after q (before lim) where a wrapped form may start with a line break
 * inside its first 8 bytes: the filter cannot see those. *nl caches the next '\n' found. */
static size_t next_wrap(const rx_redactor *r, const rx_win *w, size_t q, size_t lim, size_t *nl)
{
    if (!r->has_wrap)
        return lim;
    while (q < lim) {
        if (*nl == SIZE_MAX || *nl < q) {
            const unsigned char *f = memchr(w->p + q, '\n', w->n - q);
            *nl = f ? (size_t)(f - w->p) : w->n;
        }
        if (*nl >= w->n && (w->eof || w->n == 0 || w->p[w->n - 1] != '\r'))
            return lim; /* a '\r' ending the window may begin a break: more input decides */
        size_t b = *nl > 0 && w->p[*nl - 1] == '\r' ? *nl - 1 : *nl, start = b;
        while (start > q && b - start < 7 && wrap_char(w->p[start - 1]))
            start--;
        int after = *nl + 1 >= w->n || wrap_char(w->p[*nl + 1]); /* unknown yet: try */
        for (; start < b && after && start < lim; start++)
            if (wrap_gram_passes(r, w, start))
                return start;
        if (*nl >= w->n)
            return lim;
        q = *nl + 1;
    }
    return lim;
}

/* Everything that matches at q. Returns RX_MORE (and nothing) if anything needs more input.
 * *next is where the scan goes on: q + 1, or further when every shape of this gram says so
 * and no handed-out form starts with it. wrapped: q may start a wrapped form. */
static int match_at(const rx_redactor *r, const rx_win *w, size_t q, int pem_open, int wrapped,
                    rx_hit *hits, size_t *nhits, size_t *next)
{
    const gram_slot *g = gram_find(r, rx_load32(w->p + q) | RX_FOLD32);
    int more = 0, v = RX_NO;
    size_t n = 0, skip = SIZE_MAX;
    if ((g && g->nlit) || wrapped) {
        v = lit_match(r, w, q, &hits[n]);
        n += v == RX_YES;
        more |= v == RX_MORE;
    }
    for (uint16_t i = 0; g && i < g->nshape; i++) {
        size_t nx = q + 1;
        v = rx_shape_match(&r->shapes, r->gram_shapes[g->shape + i], w, q, pem_open, &hits[n], &nx);
        n += v == RX_YES;
        more |= v == RX_MORE;
        skip = nx < skip ? nx : skip;
    }
    *next = g && g->nlit == 0 && g->nshape && n == 0 && !wrapped ? skip : q + 1;
    *nhits = more ? 0 : n;
    return more ? RX_MORE : n ? RX_YES : RX_NO;
}

/* Could a wrapped form start at q of the window's last bytes? (Conservative.) */
static int maybe_wrapped_prefix(const rx_redactor *r, const rx_win *w, size_t q)
{
    int brk = 0;
    if (!r->has_wrap || !wrap_char(w->p[q]))
        return 0;
    for (size_t i = q + 1; i < w->n; i++) {
        if (w->p[i] == '\r' || w->p[i] == '\n')
            brk = 1;
        else if (!wrap_char(w->p[i]))
            return 0;
    }
    return brk;
}

/* ---- output ------------------------------------------------------------------------------- */

static void put(rx_redact_stream *s, const void *p, size_t n)
{
    if (n)
        s->sink(s->ctx, p, n);
}

/* Emits the raw bytes [emit, upto) of w (all of them are in w: see the range invariants). */
static void emit_raw(rx_redact_stream *s, const rx_win *w, uint64_t upto)
{
    if (upto <= s->emit)
        return;
    put(s, w->p + (s->emit - w->base), (size_t)(upto - s->emit));
    s->emit = upto;
}

static void range_close(rx_redact_stream *s, const rx_win *w)
{
    emit_raw(s, w, s->rng.a);
    put(s, s->rng.marker, strlen(s->rng.marker));
    s->emit = s->rng.b;
    s->active = 0;
}

/* A header value ends at CR or LF, or (quoted JSON) at an unescaped '"'. */
static void extend_eol(rx_range *g, const rx_win *w)
{
    size_t i = g->eol_at > w->base ? (size_t)(g->eol_at - w->base) : 0;
    for (; i < w->n; i++) {
        unsigned char c = w->p[i];
        if (c == '\r' || c == '\n' || (g->quoted && !g->esc && c == '"'))
            break;
        g->esc = g->quoted && !g->esc && c == '\\';
    }
    g->eol_at = w->base + i;
    if (i < w->n) {
        g->open &= ~(unsigned)RX_OPEN_EOL;
        g->b = g->b > g->eol_at ? g->b : g->eol_at;
    }
}

static void extend_cs(rx_range *g, const rx_win *w)
{
    size_t i = g->cs_at > w->base ? (size_t)(g->cs_at - w->base) : 0;
    while (i < w->n && rx_cset_has(&g->cs, w->p[i]))
        i++;
    g->cs_at = w->base + i;
    if (i < w->n) {
        g->open &= ~(unsigned)RX_OPEN_CS;
        g->b = g->b > g->cs_at ? g->b : g->cs_at;
    }
}

/* Moves the open ends of the range as far as this window shows them. */
static void range_extend(rx_redact_stream *s, const rx_win *w)
{
    if (s->rng.open & RX_OPEN_EOL)
        extend_eol(&s->rng, w);
    if (s->rng.open & RX_OPEN_CS)
        extend_cs(&s->rng, w);
}

static void range_open_conditions(rx_range *g, const rx_hit *h)
{
    if ((h->open & RX_OPEN_EOL) && !(g->open & RX_OPEN_EOL)) {
        g->eol_at = h->b;
        g->quoted = h->quoted;
        g->esc = 0;
    } else if (h->open & RX_OPEN_EOL) {
        g->quoted &= h->quoted; /* both end at the same line end; a quote ends only both */
    }
    if ((h->open & RX_OPEN_CS) && !(g->open & RX_OPEN_CS)) {
        g->cs_at = h->b;
        g->cs = *h->cs;
    } else if (h->open & RX_OPEN_CS) {
        for (int i = 0; i < 4; i++)
            g->cs.w[i] |= h->cs->w[i];
    }
    g->open = (g->open & ~h->resolve) | h->open;
}

/* Adds a match: merged into the range if it overlaps or touches it (or the range is still
 * open), else the range is written out and the match starts a new one. */
static void add_hit(rx_redact_stream *s, const rx_win *w, const rx_hit *h)
{
    rx_range *g = &s->rng;
    if (s->active && (g->open || h->a <= g->b)) {
        if (h->a < g->a) {
            g->a = h->a;
            g->marker = h->marker;
        }
        g->b = g->b > h->b ? g->b : h->b;
    } else {
        if (s->active)
            range_close(s, w);
        *g = (rx_range){.a = h->a, .b = h->b, .marker = h->marker};
        s->active = 1;
    }
    range_open_conditions(g, h);
    range_extend(s, w);
}

/* ---- scanning a window -------------------------------------------------------------------- */

/* Scans the positions [from, stop) of w (absolute offsets); returns where the held-back tail
 * starts, or the (relative) end of what it scanned if nothing needs holding back. */
static size_t scan(rx_redact_stream *s, const rx_win *w, uint64_t from, uint64_t stop)
{
    const rx_redactor *r = s->r;
    size_t n = w->n, end = stop - w->base < n ? (size_t)(stop - w->base) : n;
    size_t lim = n > 3 ? n - 3 : 0, q = (size_t)(from - w->base), nh, next;
    lim = lim < end ? lim : end;
    rx_hit hits[MAX_HITS];
    if (s->active)
        range_extend(s, w);
    size_t nl = SIZE_MAX, hq = SIZE_MAX, wq = SIZE_MAX;
    while (q < lim) {
        hq = hq >= q && hq != SIZE_MAX ? hq : next_hit(r, w->p, q, lim);
        wq = wq >= q && wq != SIZE_MAX ? wq : next_wrap(r, w, q, lim, &nl);
        if ((q = hq < wq ? hq : wq) >= lim)
            break;
        if (s->active && !s->rng.open && w->base + q > s->rng.b)
            range_close(s, w);
        int pem_open = s->active && (s->rng.open & RX_OPEN_PEM);
        if (match_at(r, w, q, pem_open, q == wq, hits, &nh, &next) == RX_MORE)
            return q;
        for (size_t i = 0; i < nh; i++)
            add_hit(s, w, &hits[i]);
        q = next;
    }
    for (q = lim > q ? lim : q; q < end && !w->eof; q++)
        if (maybe_prefix(r, w->p + q, n - q) || maybe_wrapped_prefix(r, w, q))
            return q;
    return end;
}

/* After a scan held back from `hold`: writes out what can no longer change. */
static void scan_done(rx_redact_stream *s, const rx_win *w, size_t hold)
{
    uint64_t h = w->base + hold;
    if (s->active && !s->rng.open && s->rng.b < h)
        range_close(s, w); /* a match starting at h would not even touch it */
    emit_raw(s, w, s->active && s->rng.a < h ? s->rng.a : h);
}

/* Empties the held-back tail, wiping only what was used (its capacity may be much larger). */
static void hold_clear(rx_redact_stream *s)
{
    if (s->hold.data) {
        OPENSSL_cleanse(s->hold.data, s->hold.len);
        s->hold.data[0] = 0;
    }
    s->hold.len = 0;
}

/* Keeps w->p[hold..n) as the new held-back tail (w may be the tail itself). */
static int keep_tail(rx_redact_stream *s, const rx_win *w, size_t hold)
{
    size_t keep = w->n - hold;
    int before = hold ? w->p[hold - 1] : s->before;
    if (w->p == s->hold.data) {
        memmove(s->hold.data, s->hold.data + hold, keep);
        OPENSSL_cleanse(s->hold.data + keep, hold);
        s->hold.len = keep;
        s->hold.data[keep] = 0;
    } else {
        hold_clear(s);
        if (rx_buf_add(&s->hold, w->p + hold, keep) != 0)
            return REXEC_ENOMEM;
    }
    s->base += hold;
    s->before = before;
    return 0;
}

/* Out of memory mid-stream: fail closed. Nothing more is written but one marker. */
static void stream_fail(rx_redact_stream *s)
{
    put(s, ERROR_MARKER, strlen(ERROR_MARKER));
    rx_buf_free(&s->hold);
    s->active = 0;
    s->done = 1;
}

/* ---- public: streams ---------------------------------------------------------------------- */

rx_redact_stream *rx_redact_stream_new(const rx_redactor *r, rx_redact_sink sink, void *ctx)
{
    rx_redact_stream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->r = r;
    s->sink = sink;
    s->ctx = ctx;
    s->before = -1;
    rx_buf_init(&s->hold, SIZE_MAX);
    return s;
}

/* Scans w from `from` to its end, writes out what is decided and keeps the rest. */
static void feed_window(rx_redact_stream *s, const rx_win *w, uint64_t from)
{
    size_t hold = scan(s, w, from, UINT64_MAX);
    scan_done(s, w, hold);
    if (keep_tail(s, w, hold) != 0)
        stream_fail(s);
}

/* Enough input after the held-back tail to decide every match that starts in the tail. */
static size_t seam_len(const rx_redactor *r)
{
    return rx_redactor_max_hold(r) + 8;
}

/* Decides the held-back tail with the first bytes of data appended to it (the seam). Returns
 * 1 when the tail is done with and the rest of data can be scanned where it lies, else 0, when
 * the tail has taken all of data (short data, or a match in the tail still undecided). */
static int feed_seam(rx_redact_stream *s, const unsigned char *d, size_t len)
{
    size_t old = s->hold.len, seam = len < seam_len(s->r) ? len : seam_len(s->r), h = 0;
    if (rx_buf_add(&s->hold, d, seam) != 0) {
        stream_fail(s);
        return 0;
    }
    rx_win w = {s->hold.data, s->hold.len, s->base, s->before, 0};
    if (seam < len && (h = scan(s, &w, s->base, s->base + old)) == old) {
        scan_done(s, &w, old);
        s->before = w.p[old - 1];
        s->base += old;
        hold_clear(s);
        return 1;
    }
    if (seam < len && rx_buf_add(&s->hold, d + seam, len - seam) != 0) {
        stream_fail(s);
        return 0;
    }
    w = (rx_win){s->hold.data, s->hold.len, s->base, s->before, 0};
    feed_window(s, &w, s->base + h); /* [base, base + h) is scanned already */
    return 0;
}

/* Most input is scanned where the caller holds it: only the held-back tail and a bounded seam
 * after it are copied, so a 16 KiB read costs no 16 KiB copy. */
void rx_redact_feed(rx_redact_stream *s, const void *data, size_t len)
{
    if (s->done || len == 0)
        return;
    if (s->hold.len && !feed_seam(s, data, len))
        return;
    rx_win w = {data, len, s->base, s->before, 0};
    feed_window(s, &w, s->base);
}

void rx_redact_finish(rx_redact_stream *s)
{
    if (s->done)
        return;
    rx_win w = {s->hold.data, s->hold.len, s->base, s->before, 1};
    scan(s, &w, s->base, UINT64_MAX);
    if (s->active) { /* what is still open runs to the end of the stream */
        if (s->rng.open)
            s->rng.b = w.base + w.n;
        s->rng.open = 0;
        range_close(s, &w);
    }
    emit_raw(s, &w, w.base + w.n);
    rx_buf_free(&s->hold);
    s->done = 1;
}

void rx_redact_stream_free(rx_redact_stream *s)
{
    if (s == NULL)
        return;
    rx_buf_free(&s->hold);
    OPENSSL_cleanse(s, sizeof(*s));
    free(s);
}

typedef struct buf_sink {
    rx_buf *out;
    int err;
} buf_sink;

static void to_buf(void *ctx, const unsigned char *data, size_t len)
{
    buf_sink *b = ctx;
    if (b->err == 0)
        b->err = rx_buf_add(b->out, data, len);
}

int rx_redact_buf(const rx_redactor *r, const void *data, size_t len, rx_buf *out)
{
    buf_sink b = {out, 0};
    rx_redact_stream s = {.r = r, .sink = to_buf, .ctx = &b, .before = -1};
    rx_buf_init(&s.hold, SIZE_MAX);
    rx_redact_feed(&s, data, len);
    rx_redact_finish(&s);
    rx_buf_free(&s.hold);
    return b.err;
}

int rx_redact_contains_secret(const rx_redactor *r, const void *data, size_t len)
{
    rx_win w = {data, len, 0, -1, 1};
    size_t lim = len > 3 ? len - 3 : 0, nl = SIZE_MAX;
    rx_hit hit;
    for (size_t q = 0; q < lim; q++) {
        size_t hq = next_hit(r, w.p, q, lim), wq = next_wrap(r, &w, q, lim, &nl);
        if ((q = hq < wq ? hq : wq) >= lim)
            break;
        const gram_slot *g = gram_find(r, rx_load32(w.p + q) | RX_FOLD32);
        if (((g && g->nlit) || q == wq) && lit_match(r, &w, q, &hit) == RX_YES)
            return 1;
    }
    return 0;
}

size_t rx_redactor_max_hold(const rx_redactor *r)
{
    size_t shapes = rx_shape_lookahead();
    return r->maxlen > shapes ? r->maxlen : shapes;
}
