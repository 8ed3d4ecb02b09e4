/* call_put.c: the trailer of a put's stream (docs/remote-contract.md, "Files: put and get").
 * A put action's stdin is the file's bytes, hashed as they are sent, then a trailer: the
 * SHA-256 of exactly those bytes as 64 lowercase hex and a newline. The VM writes the first
 * content_size bytes, hashes them on the way in, and renames the file into place only when the
 * trailer is its own hash (and content_sha256, when given, too). So `rexec put` needs no pass
 * over the file before it sends: the hash is taken on the one pass that sends it. */
#ifndef REXEC_CALL_PUT_H
#define REXEC_CALL_PUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "err.h"

#define RX_PUT_TRAILER_LEN 65 /* 64 hex + "\n" */

typedef struct rexec_call rexec_call;

/* A put call gets its trailer state (c->put; nothing for any other action): the hash of the
 * bytes sent starts; an in-memory stdin is hashed now and gets its trailer appended. 0, or the
 * error. */
int rx_put_begin(rexec_call *c, rexec_error *err);
/* The bytes on the wire after stdin_len: the trailer's for a put, else 0. */
size_t rx_put_wire_extra(const rexec_call *c);
/* The file's bytes due before the trailer, of the n a pull may give (all n when not a put). */
size_t rx_put_file_room(const rexec_call *c, size_t n);
/* got bytes of the file were read into buf: hashed. */
void rx_put_hashed(rexec_call *c, const unsigned char *buf, size_t got);
/* A --stdin file is all read (stdin_sent == stdin_len): the hash is final, unless the file
 * changed while it was sent (its size, mtime or ctime moved since call_stdin_file's fstat):
 * then -1, with msg saying so (the trailer never goes: the VM discards what it got). */
long rx_put_file_done(rexec_call *c, char *msg, size_t cap);
/* The file's end was reached (a pipe's EOF): the hash is final. */
void rx_put_finish(rexec_call *c);
/* Copies the next trailer bytes into buf (at most n): how many, 0 once it is all sent. */
size_t rx_put_trailer_next(rexec_call *c, unsigned char *buf, size_t n);
/* The SHA-256 of the file as sent, once all of it was hashed; else NULL. */
const char *rx_put_sent_hex(const rexec_call *c);
void rx_put_free(rexec_call *c);

#endif
