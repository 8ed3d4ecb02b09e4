/* Internals shared by redact.c (the matcher and streams), redact_enc.c (the encoded forms of a
 * secret) and redact_shape.c (secret shapes nobody handed out). Not for other modules. */
#ifndef RX_REDACT_INT_H
#define RX_REDACT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Every position of the input is looked up by its first 4 bytes, case-folded (| 0x20 on each
 * byte), so one filter serves case-sensitive secrets and case-insensitive header names alike. */
#define RX_FOLD32 0x20202020u
#define RX_FOLD64 0x2020202020202020ull
#define RX_HASH_MUL 0x9E3779B1u

/* What a matcher says about one position. MORE: the window ends before it can decide. */
enum { RX_NO = 0, RX_YES = 1, RX_MORE = 2 };

/* Conditions under which a range's end is not known yet. */
enum {
    RX_OPEN_EOL = 1, /* a header value: ends at CR or LF (or an unescaped '"' when quoted) */
    RX_OPEN_CS = 2,  /* a token: ends at the first byte outside its charset */
    RX_OPEN_PEM = 4, /* a private key: ends after its -----END ... PRIVATE KEY----- line */
};

/* A piece of one stream: p[0..n) sits at absolute offset base; before is the byte at base-1
 * (-1 at the start of the stream); eof says nothing follows p[n-1]. */
typedef struct rx_win {
    const unsigned char *p;
    size_t n;
    uint64_t base;
    int before;
    int eof;
} rx_win;

/* A 256-bit byte set. */
typedef struct rx_cset {
    uint64_t w[4];
} rx_cset;

static inline int rx_cset_has(const rx_cset *c, unsigned char b)
{
    return (int)((c->w[b >> 6] >> (b & 63)) & 1);
}

/* A range to replace, as a matcher found it. Offsets are absolute. */
typedef struct rx_hit {
    uint64_t a, b;      /* [a, b) is known to be secret; open conditions may extend b */
    const char *marker; /* "[REDACTED:NAME]" */
    unsigned open;      /* RX_OPEN_* still to be resolved */
    unsigned resolve;   /* RX_OPEN_* this hit ends (the END line of a private key) */
    int quoted;         /* RX_OPEN_EOL also ends at an unescaped '"' */
    const rx_cset *cs;  /* for RX_OPEN_CS */
} rx_hit;

static inline uint32_t rx_load32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint64_t rx_load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* ---- encoded forms (redact_enc.c) ---------------------------------------------------------- */

/* Receives one form of a secret; wrap: the form is an encoded run (hex, base64, base32) that a
 * tool may wrap at any column, so it also matches with line breaks between its bytes. Returns 0
 * or REXEC_ENOMEM. */
typedef int (*rx_form_fn)(void *ctx, const unsigned char *p, size_t n, int wrap);

/* Calls add with v itself and every encoded form the redactor knows (base64 at the three
 * alignments, base64url, base32 at the five, percent, JSON, hex, shell quoting including bash's
 * $'...' as the C and UTF-8 locales print it), then the same for each line of a
 * multi-line v that is at least min_len long. Forms may repeat; the caller dedupes.
 * Returns 0 or the first error add returned. */
int rx_forms(const unsigned char *v, size_t n, size_t min_len, rx_form_fn add, void *ctx);

/* ---- secret shapes (redact_shape.c) -------------------------------------------------------- */

/* One way a shape can start: the folded first 4 bytes and the shape to try there. */
typedef struct rx_trigger {
    uint32_t gram;
    uint16_t shape;
} rx_trigger;

/* Charsets the shape matchers use; built once per redactor (hits point into it). */
typedef struct rx_shapes {
    rx_cset cs[8];
} rx_shapes;

void rx_shapes_init(rx_shapes *sh);

/* Fills out with every trigger (at most max) and returns how many there are. */
size_t rx_shape_triggers(rx_trigger *out, size_t max);

/* Tries shape at w->p[q]. pem_open: a private-key block is open (only then does an END line
 * count). Returns RX_NO, RX_MORE, or RX_YES with *hit filled. On RX_NO, *next may be raised
 * to the first position after q where this shape could start (it is left alone otherwise):
 * a run of dashes would otherwise cost a lookup per byte. */
int rx_shape_match(const rx_shapes *sh, unsigned shape, const rx_win *w, size_t q, int pem_open,
                   rx_hit *hit, size_t *next);

/* The most bytes any shape needs to see from its start before it decides. */
size_t rx_shape_lookahead(void);

/* ---- the compiled matcher -------------------------------------------------------------------- */

typedef struct rx_pat {
    const unsigned char *p; /* into r->pool */
    uint32_t len;
    uint32_t secret : 31;
    uint32_t wrap : 1; /* may be wrapped: "\n" or "\r\n" may stand between any two bytes */
} rx_pat;

/* A wrapped form spans at most this many input bytes per form byte (a break after each). */
#define RX_WRAP_SPAN 3

/* An entry of the gram table: the forms (for tail checks) and shapes that begin with a gram. */
typedef struct gram_slot {
    uint32_t key;
    uint32_t lit, nlit;
    uint16_t shape, nshape;
    uint8_t used;
} gram_slot;

/* An entry of the form table: the forms whose first 8 bytes are key. */
typedef struct lit_slot {
    uint64_t key;
    uint32_t first, n;
    uint8_t used;
} lit_slot;

/* The compiled matcher (built by redact_build.c, used by redact.c). */
struct rx_redactor {
    uint64_t *filter; /* one bit per hashed folded gram */
    unsigned fshift;
    gram_slot *grams;
    unsigned gshift;
    uint32_t *gram_lits;
    uint16_t *gram_shapes;
    lit_slot *lits;
    unsigned lshift;
    uint32_t *lit_ids;
    rx_pat *pats;
    size_t npats;
    unsigned char *pool; /* every form's bytes: secret material, wiped on free */
    size_t pool_len;
    char **markers; /* "[REDACTED:NAME]" per secret */
    size_t nsecrets;
    size_t maxlen;    /* the most input bytes one form spans (wrapped forms: with breaks) */
    int has_wrap;     /* some form is wrappable: line breaks are looked at too */
    uint64_t pre1[4], pre2[1024], pre3[1024]; /* folded prefixes of 1, 2, 3 bytes */
    size_t filter_words, gram_slots, lit_slots, ngram_lits, ngram_shapes, pool_cap;
    rx_shapes shapes;
};

/* The bit of pre3 for the first 3 bytes at p (folded). */
static inline uint32_t rx_pre3_hash(const unsigned char *p)
{
    uint32_t v = (uint32_t)(p[0] | 0x20) | (uint32_t)(p[1] | 0x20) << 8 |
                 (uint32_t)(p[2] | 0x20) << 16;
    return (v * RX_HASH_MUL) >> 16;
}

#endif
