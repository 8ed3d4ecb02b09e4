/* Compiling a redactor: expand every secret into its forms, dedupe them, and build the tables
 * redact.c looks positions up in (filter bitmap, 4-byte gram table, 8-byte form table, prefix
 * bitmaps for the last bytes of a window). Everything that holds secret bytes is wiped on free:
 * the forms themselves, and the tables keyed by their first bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "err.h"
#include "redact.h"
#include "redact_int.h"

#define POOL_MAX ((size_t)1 << 30) /* all forms of all secrets: far above any real use */
#define MAX_SHAPES_PER_GRAM 7      /* redact.c tries one form and these at a position */
#define SHAPE_BIT 0x80000000u

typedef struct gen_pat {
    uint32_t off, len, secret, wrap;
} gen_pat;

typedef struct gen_ctx {
    rx_buf pool;
    gen_pat *v;
    size_t n, cap;
    uint32_t secret;
} gen_ctx;

/* A gram and what starts with it: a form (id) or, with SHAPE_BIT, a shape. */
typedef struct gram_ent {
    uint32_t gram, what;
} gram_ent;

static void wipe_free(void *p, size_t n)
{
    if (p) {
        OPENSSL_cleanse(p, n);
        free(p);
    }
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

static unsigned log2_of(size_t p)
{
    unsigned b = 0;
    while (((size_t)1 << b) < p)
        b++;
    return b;
}

/* ---- forms --------------------------------------------------------------------------------- */

static int gen_add(void *ctx, const unsigned char *p, size_t n, int wrap)
{
    gen_ctx *g = ctx;
    if (n < RX_SECRET_MIN_LEN || n > UINT32_MAX)
        return 0; /* every form of a valid secret is at least this long; never happens */
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        gen_pat *v = realloc(g->v, cap * sizeof(*v));
        if (v == NULL)
            return REXEC_ENOMEM;
        g->v = v;
        g->cap = cap;
    }
    size_t off = g->pool.len;
    if (rx_buf_add(&g->pool, p, n) != 0)
        return REXEC_ENOMEM;
    g->v[g->n++] = (gen_pat){(uint32_t)off, (uint32_t)n, g->secret, wrap != 0};
    return 0;
}

static int pat_cmp(const void *x, const void *y)
{
    const rx_pat *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->p, b->p, n);
    if (c == 0)
        c = (a->len > b->len) - (a->len < b->len);
    return c ? c : (a->secret > b->secret) - (a->secret < b->secret);
}

/* Sorts the forms and drops repeats, keeping the first secret's (its name is the marker). */
static int forms_finish(rx_redactor *r, gen_ctx *g)
{
    r->pool_cap = g->pool.len + 1;
    r->pool = rx_buf_steal(&g->pool, &r->pool_len);
    r->pats = calloc(g->n ? g->n : 1, sizeof(*r->pats));
    if (r->pool == NULL || r->pats == NULL)
        return REXEC_ENOMEM;
    for (size_t i = 0; i < g->n; i++)
        r->pats[i] = (rx_pat){r->pool + g->v[i].off, g->v[i].len, g->v[i].secret & 0x7fffffffu,
                              g->v[i].wrap};
    qsort(r->pats, g->n, sizeof(*r->pats), pat_cmp);
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++) {
        const rx_pat *a = &r->pats[i], *b = k ? &r->pats[k - 1] : NULL;
        if (b && a->len == b->len && memcmp(a->p, b->p, a->len) == 0) {
            r->pats[k - 1].wrap |= a->wrap; /* the same bytes as an encoded run: may wrap */
            continue;
        }
        r->pats[k++] = *a;
    }
    for (size_t i = 0; i < k; i++) { /* the most input one form can span */
        size_t span = (size_t)r->pats[i].len * (r->pats[i].wrap ? RX_WRAP_SPAN : 1);
        r->has_wrap |= r->pats[i].wrap;
        r->maxlen = span > r->maxlen ? span : r->maxlen;
    }
    r->npats = k;
    return 0;
}

static int forms_build(rx_redactor *r, const rx_secret *secrets, size_t n)
{
    gen_ctx g = {.v = NULL};
    rx_buf_init(&g.pool, POOL_MAX);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        g.secret = (uint32_t)i;
        rc = rx_forms(secrets[i].value, secrets[i].len, RX_SECRET_MIN_LEN, gen_add, &g);
    }
    if (rc == 0)
        rc = forms_finish(r, &g);
    rx_buf_free(&g.pool);
    free(g.v);
    return rc;
}

/* ---- the gram table ------------------------------------------------------------------------ */

static int ent_cmp(const void *x, const void *y)
{
    const gram_ent *a = x, *b = y;
    if (a->gram != b->gram)
        return a->gram < b->gram ? -1 : 1;
    return (a->what > b->what) - (a->what < b->what);
}

/* Every (gram, form) and (gram, shape) pair, sorted and without repeats. */
static gram_ent *grams_collect(const rx_redactor *r, size_t *count)
{
    size_t nt = rx_shape_triggers(NULL, 0), n = r->npats + nt, k = 0;
    gram_ent *e = malloc(n * sizeof(*e));
    rx_trigger *t = malloc(nt * sizeof(*t));
    if (e && t) {
        rx_shape_triggers(t, nt);
        for (size_t i = 0; i < r->npats; i++)
            e[i] = (gram_ent){rx_load32(r->pats[i].p) | RX_FOLD32, (uint32_t)i};
        for (size_t i = 0; i < nt; i++)
            e[r->npats + i] = (gram_ent){t[i].gram, SHAPE_BIT | t[i].shape};
        qsort(e, n, sizeof(*e), ent_cmp);
        for (size_t i = 0; i < n; i++)
            if (k == 0 || ent_cmp(&e[k - 1], &e[i]) != 0)
                e[k++] = e[i];
    }
    free(t);
    *count = k;
    return e && t ? e : (free(e), NULL);
}

static gram_slot *gram_slot_new(rx_redactor *r, uint32_t gram)
{
    uint32_t mask = (uint32_t)(r->gram_slots - 1);
    uint32_t i = (uint32_t)(gram * RX_HASH_MUL) >> r->gshift;
    while (r->grams[i].used)
        i = (i + 1) & mask;
    r->grams[i] = (gram_slot){.key = gram, .used = 1};
    return &r->grams[i];
}

/* One slot per distinct gram, pointing at its runs in gram_lits / gram_shapes. */
static int grams_fill(rx_redactor *r, const gram_ent *e, size_t n)
{
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++)
        distinct += i == 0 || e[i].gram != e[i - 1].gram;
    r->gram_slots = pow2_at_least(distinct * 2 + 16);
    r->gshift = 32 - log2_of(r->gram_slots);
    r->grams = calloc(r->gram_slots, sizeof(*r->grams));
    r->gram_lits = calloc(n + 1, sizeof(*r->gram_lits));
    r->gram_shapes = calloc(n + 1, sizeof(*r->gram_shapes));
    if (!r->grams || !r->gram_lits || !r->gram_shapes)
        return REXEC_ENOMEM;
    gram_slot *s = NULL;
    for (size_t i = 0; i < n; i++) {
        if (s == NULL || s->key != e[i].gram) {
            s = gram_slot_new(r, e[i].gram);
            s->lit = (uint32_t)r->ngram_lits;
            s->shape = (uint16_t)r->ngram_shapes;
        }
        if (e[i].what & SHAPE_BIT) {
            if (++s->nshape > MAX_SHAPES_PER_GRAM)
                return REXEC_EINTERNAL;
            r->gram_shapes[r->ngram_shapes++] = (uint16_t)(e[i].what & ~SHAPE_BIT);
        } else {
            s->nlit++;
            r->gram_lits[r->ngram_lits++] = e[i].what;
        }
    }
    return 0;
}

/* The filter (at least 64 bits per gram: under 1.6% of unrelated positions pass) and the
 * prefix bitmaps. */
static int filter_fill(rx_redactor *r, const gram_ent *e, size_t n)
{
    size_t bits = pow2_at_least(n * 64);
    bits = bits < ((size_t)1 << 12) ? (size_t)1 << 12 : bits > ((size_t)1 << 23) ? (size_t)1 << 23 : bits;
    r->fshift = 32 - log2_of(bits);
    r->filter_words = bits / 64;
    r->filter = calloc(r->filter_words, sizeof(uint64_t));
    if (r->filter == NULL)
        return REXEC_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        uint32_t h = (uint32_t)(e[i].gram * RX_HASH_MUL) >> r->fshift;
        unsigned char b[4];
        memcpy(b, &e[i].gram, 4);
        r->filter[h >> 6] |= 1ull << (h & 63);
        r->pre1[b[0] >> 6] |= 1ull << (b[0] & 63);
        unsigned two = b[0] | (unsigned)b[1] << 8, three = rx_pre3_hash(b);
        r->pre2[two >> 6] |= 1ull << (two & 63);
        r->pre3[three >> 6] |= 1ull << (three & 63);
    }
    return 0;
}

/* ---- the form table (exact first 8 bytes) --------------------------------------------------- */

typedef struct lit_ent {
    uint64_t key; /* the form's first 8 bytes */
    uint32_t id;
} lit_ent;

static int lit_cmp(const void *x, const void *y)
{
    const lit_ent *a = x, *b = y;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static lit_slot *lit_slot_new(rx_redactor *r, uint64_t k, uint32_t first)
{
    uint32_t j = (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> r->lshift);
    while (r->lits[j].used)
        j = (j + 1) & (uint32_t)(r->lit_slots - 1);
    r->lits[j] = (lit_slot){.key = k, .first = first, .used = 1};
    return &r->lits[j];
}

/* Forms grouped by their exact first 8 bytes: lit_ids holds each group's ids in a row. */
static int lits_fill(rx_redactor *r)
{
    size_t distinct = 0;
    lit_ent *e = malloc((r->npats + 1) * sizeof(*e));
    r->lit_ids = malloc((r->npats + 1) * sizeof(*r->lit_ids));
    if (e == NULL || r->lit_ids == NULL) {
        free(e);
        return REXEC_ENOMEM;
    }
    for (size_t i = 0; i < r->npats; i++)
        e[i] = (lit_ent){rx_load64(r->pats[i].p), (uint32_t)i};
    qsort(e, r->npats, sizeof(*e), lit_cmp);
    for (size_t i = 0; i < r->npats; i++)
        distinct += i == 0 || e[i].key != e[i - 1].key;
    r->lit_slots = pow2_at_least(distinct * 2 + 16);
    r->lshift = 64 - log2_of(r->lit_slots);
    r->lits = calloc(r->lit_slots, sizeof(*r->lits));
    lit_slot *s = NULL;
    for (size_t i = 0; r->lits && i < r->npats; i++) {
        if (s == NULL || s->key != e[i].key)
            s = lit_slot_new(r, e[i].key, (uint32_t)i);
        r->lit_ids[i] = e[i].id;
        s->n++;
    }
    wipe_free(e, (r->npats + 1) * sizeof(*e));
    return r->lits ? 0 : REXEC_ENOMEM;
}

/* ---- public -------------------------------------------------------------------------------- */

static int check_secret(const rx_secret *s, size_t i, rexec_error *err)
{
    if (s->name == NULL || s->value == NULL)
        return rx_fail(err, REXEC_ECONFIG, "secret #%zu: no name or no value", i);
    if (s->len < RX_SECRET_MIN_LEN)
        return rx_fail(err, REXEC_ECONFIG,
                       "secret %s: shorter than %d bytes, too short to redact reliably", s->name,
                       RX_SECRET_MIN_LEN);
    if (memchr(s->value, 0, s->len))
        return rx_fail(err, REXEC_ECONFIG, "secret %s: holds a NUL byte", s->name);
    return 0;
}

static int markers_build(rx_redactor *r, const rx_secret *secrets, size_t n)
{
    r->markers = calloc(n ? n : 1, sizeof(*r->markers));
    if (r->markers == NULL)
        return REXEC_ENOMEM;
    r->nsecrets = n;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(secrets[i].name) + sizeof("[REDACTED:]");
        if ((r->markers[i] = malloc(len)) == NULL)
            return REXEC_ENOMEM;
        snprintf(r->markers[i], len, "[REDACTED:%s]", secrets[i].name);
    }
    return 0;
}

static int tables_build(rx_redactor *r)
{
    size_t n;
    gram_ent *e = grams_collect(r, &n);
    if (e == NULL)
        return REXEC_ENOMEM;
    int rc = grams_fill(r, e, n);
    if (rc == 0)
        rc = filter_fill(r, e, n);
    if (rc == 0)
        rc = lits_fill(r);
    wipe_free(e, n * sizeof(*e));
    return rc;
}

int rx_redactor_new(rx_redactor **out, const rx_secret *secrets, size_t n, rexec_error *err)
{
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        int rc = check_secret(&secrets[i], i, err);
        if (rc != 0)
            return rc;
    }
    rx_redactor *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return rx_fail(err, REXEC_ENOMEM, "redactor: out of memory");
    rx_shapes_init(&r->shapes);
    int rc = markers_build(r, secrets, n);
    if (rc == 0)
        rc = forms_build(r, secrets, n);
    if (rc == 0)
        rc = tables_build(r);
    if (rc != 0) {
        rx_redactor_free(r);
        return rx_fail(err, rc, "redactor: %s", rexec_strerror(rc));
    }
    *out = r;
    return 0;
}

void rx_redactor_free(rx_redactor *r)
{
    if (r == NULL)
        return;
    wipe_free(r->pool, r->pool_cap);
    wipe_free(r->filter, r->filter_words * sizeof(uint64_t));
    wipe_free(r->grams, r->gram_slots * sizeof(*r->grams));
    wipe_free(r->lits, r->lit_slots * sizeof(*r->lits));
    free(r->gram_lits);
    free(r->gram_shapes);
    free(r->lit_ids);
    free(r->pats);
    for (size_t i = 0; r->markers && i < r->nsecrets; i++)
        free(r->markers[i]);
    free(r->markers);
    OPENSSL_cleanse(r, sizeof(*r));
    free(r);
}
