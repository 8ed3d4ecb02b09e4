/* A growable byte buffer with a mandatory size cap that wipes its memory on free (after curl's
 * dynbuf and OpenSSH's sshbuf). Secrets and script text live in these. */
#ifndef RX_BUF_H
#define RX_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rx_buf {
    unsigned char *data; /* always NUL-terminated when non-NULL (the NUL is not counted in len) */
    size_t len;
    size_t cap;
    size_t max; /* appends that would pass max fail with REXEC_EREQUEST and change nothing */
} rx_buf;

/* Sets up an empty buffer that may grow to max bytes. */
void rx_buf_init(rx_buf *b, size_t max);

/* Appends n bytes. Returns 0, REXEC_ENOMEM, or REXEC_EREQUEST when max would be passed. */
int rx_buf_add(rx_buf *b, const void *p, size_t n);
int rx_buf_adds(rx_buf *b, const char *s); /* a C string */
int rx_buf_addc(rx_buf *b, unsigned char c);
/* printf-style append: for text that is never shell (JSON keys, messages). */
int rx_buf_addf(rx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends as much of p as fits under max and returns how many bytes it kept (the caller sees
 * truncation as a return below n). Output caps work this way, on redacted bytes. */
size_t rx_buf_add_capped(rx_buf *b, const void *p, size_t n);

/* Empties the buffer (wiping what it held) but keeps max. */
void rx_buf_reset(rx_buf *b);

/* Wipes and frees the memory; b may be NULL. The buffer can be reused after rx_buf_init. */
void rx_buf_free(rx_buf *b);

/* Gives up ownership: returns the data (NUL-terminated, caller frees) and empties b. */
unsigned char *rx_buf_steal(rx_buf *b, size_t *len);

/* Writes n bytes as 2n lowercase hex digits and a NUL into out. */
void rx_hex_encode(const void *p, size_t n, char *out);

/* SHA-256 of data as 64 lowercase hex digits and a NUL. Returns 0, or -1 (out set to "") when
 * OpenSSL fails: an empty digest never equals a real one. */
int rx_sha256_hex(const void *data, size_t len, char out[65]);

/* SHA-256 of an open file's first max bytes (all of it to its end when max is UINT64_MAX), read
 * with pread from offset 0 in fixed pieces (the fd's offset is left alone), as hex into out; *got
 * is the number of bytes hashed. Returns 0; -1 with errno set when a read fails (EIO, ...) or
 * ENOMEM when OpenSSL or the buffer fails. A file shorter than max is not an error here: the
 * caller compares *got. */
int rx_sha256_fd(int fd, uint64_t max, char out[65], uint64_t *got);

#endif
