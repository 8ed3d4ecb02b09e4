/* SHA-256 on a thread of its own (sha_worker.h). One producer, one consumer, a ring of pieces:
 * the producer fills the piece at head and moves head on, the hash takes the piece at tail and
 * moves tail on; each piece is touched by one side at a time (the counters under the mutex). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "sha_worker.h"

struct rx_sha_worker {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned char *ring;                /* RX_SHA_WORKER_SLOTS pieces */
    size_t len[RX_SHA_WORKER_SLOTS];
    uint64_t head, tail;                /* pieces filled, pieces hashed */
    int closing;                        /* no more pieces: the thread ends once tail == head */
    EVP_MD_CTX *sha;
    int failed;
};

static void *sha_worker_main(void *arg)
{
    rx_sha_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->tail == w->head && !w->closing)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->tail == w->head)
            break;
        size_t k = (size_t)(w->tail % RX_SHA_WORKER_SLOTS);
        pthread_mutex_unlock(&w->mu);
        if (!EVP_DigestUpdate(w->sha, w->ring + k * RX_SHA_WORKER_SLOT, w->len[k]))
            w->failed = 1;
        pthread_mutex_lock(&w->mu);
        w->tail++;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

rx_sha_worker *rx_sha_worker_start(void)
{
    rx_sha_worker *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->ring = malloc((size_t)RX_SHA_WORKER_SLOTS * RX_SHA_WORKER_SLOT);
    w->sha = EVP_MD_CTX_new();
    int mu_ok = pthread_mutex_init(&w->mu, NULL) == 0;
    int cv_ok = mu_ok && pthread_cond_init(&w->cv, NULL) == 0;
    if (w->ring != NULL && w->sha != NULL && EVP_DigestInit_ex(w->sha, EVP_sha256(), NULL) &&
        cv_ok && pthread_create(&w->th, NULL, sha_worker_main, w) == 0)
        return w;
    if (cv_ok)
        pthread_cond_destroy(&w->cv);
    if (mu_ok)
        pthread_mutex_destroy(&w->mu);
    EVP_MD_CTX_free(w->sha);
    free(w->ring);
    free(w);
    return NULL;
}

void rx_sha_worker_add(rx_sha_worker *w, const void *data, size_t n)
{
    const unsigned char *p = data;
    while (n > 0) {
        size_t piece = n < RX_SHA_WORKER_SLOT ? n : RX_SHA_WORKER_SLOT;
        pthread_mutex_lock(&w->mu);
        while (w->head - w->tail == RX_SHA_WORKER_SLOTS)
            pthread_cond_wait(&w->cv, &w->mu);
        size_t k = (size_t)(w->head % RX_SHA_WORKER_SLOTS);
        pthread_mutex_unlock(&w->mu);
        memcpy(w->ring + k * RX_SHA_WORKER_SLOT, p, piece); /* the hash is not at this piece */
        w->len[k] = piece;
        pthread_mutex_lock(&w->mu);
        w->head++;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        p += piece;
        n -= piece;
    }
}

static void sha_worker_end(rx_sha_worker *w)
{
    pthread_mutex_lock(&w->mu);
    w->closing = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
}

static void sha_worker_release(rx_sha_worker *w)
{
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    EVP_MD_CTX_free(w->sha);
    /* the ring held the stream's bytes: a put's file may be secret */
    OPENSSL_cleanse(w->ring, (size_t)RX_SHA_WORKER_SLOTS * RX_SHA_WORKER_SLOT);
    free(w->ring);
    free(w);
}

int rx_sha_worker_finish(rx_sha_worker *w, unsigned char md[32])
{
    unsigned int mdlen = 0;
    sha_worker_end(w);
    int ok = !w->failed && EVP_DigestFinal_ex(w->sha, md, &mdlen) && mdlen == 32;
    sha_worker_release(w);
    return ok ? 0 : -1;
}

void rx_sha_worker_free(rx_sha_worker *w)
{
    if (w == NULL)
        return;
    sha_worker_end(w);
    sha_worker_release(w);
}
