/* The trailer of a put's stream (call_put.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "call.h"
#include "buf.h"
#include "sha_worker.h"
#include "transfer.h"

struct rx_put_state {
    EVP_MD_CTX *sha;                       /* of the file's bytes as they are sent */
    rx_sha_worker *worker;                 /* ... on a thread of its own, when it started */
    unsigned char trailer[RX_PUT_TRAILER_LEN];
    size_t trailer_sent;
    int final;                             /* trailer and hex hold the hash */
    char hex[65];
    struct timespec mtime, ctime;          /* of a --stdin file when it was opened */
    off_t size;
};

static void put_final(struct rx_put_state *p)
{
    unsigned char md[32] = {0};
    unsigned int mdlen = 0;
    if (p->final)
        return;
    if (p->worker != NULL) {
        rx_sha_worker_finish(p->worker, md); /* a failed digest: a trailer the VM refuses */
        p->worker = NULL;
    } else {
        EVP_DigestFinal_ex(p->sha, md, &mdlen);
    }
    rx_hex_encode(md, 32, p->hex);
    memcpy(p->trailer, p->hex, 64);
    p->trailer[64] = '\n';
    p->final = 1;
}

/* An in-memory stdin: hashed whole now, its trailer appended (stdin_len stays the file's). */
static int put_inline(rexec_call *c, struct rx_put_state *p)
{
    unsigned char *d = realloc(c->stdin_data, c->stdin_len + RX_PUT_TRAILER_LEN);
    if (d == NULL)
        return REXEC_ENOMEM;
    c->stdin_data = d;
    EVP_DigestUpdate(p->sha, d, c->stdin_len);
    put_final(p);
    memcpy(d + c->stdin_len, p->trailer, RX_PUT_TRAILER_LEN);
    p->trailer_sent = RX_PUT_TRAILER_LEN; /* it goes with the data */
    return 0;
}

int rx_put_begin(rexec_call *c, rexec_error *err)
{
    struct stat st;
    if (c->action->transfer != RX_XFER_PUT || c->put != NULL)
        return 0;
    struct rx_put_state *p = calloc(1, sizeof(*p));
    if (p == NULL || (p->sha = EVP_MD_CTX_new()) == NULL ||
        !EVP_DigestInit_ex(p->sha, EVP_sha256(), NULL)) {
        if (p)
            EVP_MD_CTX_free(p->sha);
        free(p);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    c->put = p;
    if (c->stdin_path != NULL && !c->stdin_stream && c->stdin_fd >= 0 &&
        fstat(c->stdin_fd, &st) == 0) {
        p->mtime = st.st_mtim;
        p->ctime = st.st_ctim;
        p->size = st.st_size;
    }
    if (c->stdin_path == NULL && c->stdin_data != NULL && put_inline(c, p) != 0)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    /* a streamed file is hashed beside the sending, on another CPU (sha_worker.h); without
     * a thread, on the way as it is sent */
    if (c->stdin_path != NULL)
        p->worker = rx_sha_worker_start();
    return 0;
}

size_t rx_put_wire_extra(const rexec_call *c)
{
    return c->put != NULL ? RX_PUT_TRAILER_LEN : 0;
}

size_t rx_put_file_room(const rexec_call *c, size_t n)
{
    if (c->put == NULL || c->stdin_stream)
        return n;
    uint64_t left = c->stdin_sent < c->stdin_len ? c->stdin_len - c->stdin_sent : 0;
    return left < n ? (size_t)left : n;
}

void rx_put_hashed(rexec_call *c, const unsigned char *buf, size_t got)
{
    if (c->put == NULL || got == 0)
        return;
    if (c->put->worker != NULL)
        rx_sha_worker_add(c->put->worker, buf, got);
    else
        EVP_DigestUpdate(c->put->sha, buf, got);
}

static int ts_eq(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

long rx_put_file_done(rexec_call *c, char *msg, size_t cap)
{
    struct stat st;
    struct rx_put_state *p = c->put;
    if (p == NULL || p->final)
        return 0;
    /* A file written to while it was sent: what went may be a mix of two versions; its end
     * (grown) or a change in place would go unnoticed by the hash, its times do not. Its size
     * must still be the one announced (content_size, stdin_len: taken when it was opened). */
    if (fstat(c->stdin_fd, &st) != 0 || st.st_size != p->size ||
        (uint64_t)st.st_size != (uint64_t)c->stdin_len || !ts_eq(st.st_mtim, p->mtime) ||
        !ts_eq(st.st_ctim, p->ctime)) {
        snprintf(msg, cap, "%s changed %s (its size or modification time moved while it was "
                           "sent): nothing was put", c->stdin_path,
                 c->stdin_sha != NULL ? "since it was approved" : "while it was sent");
        return -1;
    }
    put_final(p);
    return 0;
}

void rx_put_finish(rexec_call *c)
{
    if (c->put != NULL)
        put_final(c->put);
}

size_t rx_put_trailer_next(rexec_call *c, unsigned char *buf, size_t n)
{
    struct rx_put_state *p = c->put;
    if (p == NULL || !p->final)
        return 0;
    size_t k = RX_PUT_TRAILER_LEN - p->trailer_sent;
    if (k > n)
        k = n;
    memcpy(buf, p->trailer + p->trailer_sent, k);
    p->trailer_sent += k;
    return k;
}

const char *rx_put_sent_hex(const rexec_call *c)
{
    return c->put != NULL && c->put->final ? c->put->hex : NULL;
}

void rx_put_free(rexec_call *c)
{
    if (c->put == NULL)
        return;
    rx_sha_worker_free(c->put->worker);
    EVP_MD_CTX_free(c->put->sha);
    free(c->put);
    c->put = NULL;
}
