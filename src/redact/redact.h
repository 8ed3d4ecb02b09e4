/* The streaming redactor: every secret handed to a call, in its encoded forms, and known secret
 * shapes are replaced before any byte is stored or shown.
 *
 * A compiled rx_redactor is immutable and may be shared by many streams (one per stdout/stderr of
 * each call, plus one-shot uses for messages, audit fields and JSON). A stream holds back only the
 * bytes that could still begin a match, and flushes at EOF: a secret split across any chunk
 * boundary is caught. */
#ifndef RX_REDACT_H
#define RX_REDACT_H

#include <stddef.h>

#include "buf.h"
#include "rexec.h"

/* A secret shorter than this is refused when loaded (redacting a 3-byte value would shred all
 * output and still leak it by elimination). Documented in docs/redaction.md. */
#define RX_SECRET_MIN_LEN 8

typedef struct rx_secret {
    const char *name;           /* e.g. "API_TOKEN"; the marker is "[REDACTED:API_TOKEN]" */
    const unsigned char *value; /* any bytes but NUL */
    size_t len;
} rx_secret;

typedef struct rx_redactor rx_redactor;
typedef struct rx_redact_stream rx_redact_stream;

/* Where redacted bytes go. */
typedef void (*rx_redact_sink)(void *ctx, const unsigned char *data, size_t len);

/* Compiles the matcher for these secrets (values are copied; the caller may wipe its own) plus
 * the built-in secret shapes. n may be 0 (shapes only). Returns 0, REXEC_ENOMEM, or
 * REXEC_ECONFIG naming a secret that is too short or holds NUL. */
int rx_redactor_new(rx_redactor **out, const rx_secret *secrets, size_t n, rexec_error *err);
void rx_redactor_free(rx_redactor *r); /* wipes the copied values; NULL is fine */

/* A stream over r (which must outlive it). sink receives redacted bytes, possibly in pieces. */
rx_redact_stream *rx_redact_stream_new(const rx_redactor *r, rx_redact_sink sink, void *ctx);
/* Feeds raw bytes; calls sink with what can no longer be part of a match. */
void rx_redact_feed(rx_redact_stream *s, const void *data, size_t len);
/* End of stream: flushes what was held back (redacted). The stream can then only be freed. */
void rx_redact_finish(rx_redact_stream *s);
void rx_redact_stream_free(rx_redact_stream *s); /* wipes held-back bytes; NULL is fine */

/* One shot: appends the redacted form of data to out. Returns 0 or an rx_buf error. */
int rx_redact_buf(const rx_redactor *r, const void *data, size_t len, rx_buf *out);

/* The last check before an audit or evidence record is written: 1 if data still holds a
 * handed-out secret value (in any encoded form the redactor knows), else 0. */
int rx_redact_contains_secret(const rx_redactor *r, const void *data, size_t len);

/* The most bytes a stream over r holds back between feeds (its longest form, or the longest
 * look-ahead a secret shape needs before it decides). Output lags input by at most this much,
 * except inside a match whose end is not seen yet (a private key, a header line, a token). */
size_t rx_redactor_max_hold(const rx_redactor *r);

#endif
