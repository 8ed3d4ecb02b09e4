/* SHA-256 on a thread of its own, fed the bytes a caller streams (a put's file as it is sent,
 * src/api/call_put.c): the hash no longer lengthens the sending thread's path (its read and
 * its encryption), it runs beside it on another CPU. The bytes are copied into a small ring
 * (RX_SHA_WORKER_SLOTS pieces of RX_SHA_WORKER_SLOT bytes: flat memory); a caller that gets
 * ahead of the hash waits for a free piece. */
#ifndef REXEC_SHA_WORKER_H
#define REXEC_SHA_WORKER_H

#include <stddef.h>

#define RX_SHA_WORKER_SLOTS 4
#define RX_SHA_WORKER_SLOT (256u * 1024)

typedef struct rx_sha_worker rx_sha_worker;

/* The thread started, or NULL (no memory, no thread): the caller then hashes on its own. */
rx_sha_worker *rx_sha_worker_start(void);
/* Hands n bytes to the hash (copied before it returns). */
void rx_sha_worker_add(rx_sha_worker *w, const void *data, size_t n);
/* Waits until every byte handed over is hashed, ends the thread, writes the digest (32 bytes)
 * and frees w. 0, or -1 when the digest failed. */
int rx_sha_worker_finish(rx_sha_worker *w, unsigned char md[32]);
/* Ends the thread without a digest (an aborted stream) and frees w; NULL is nothing. */
void rx_sha_worker_free(rx_sha_worker *w);

#endif
