#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "buf.h"
#include "rexec.h"

void rx_buf_init(rx_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

/* Grows to hold need bytes plus the terminating NUL; old memory is wiped, not just freed. */
static int buf_reserve(rx_buf *b, size_t need)
{
    if (need + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need + 1)
        cap = cap > SIZE_MAX / 2 ? need + 1 : cap * 2;
    unsigned char *p = malloc(cap);
    if (p == NULL)
        return REXEC_ENOMEM;
    if (b->data) {
        memcpy(p, b->data, b->len);
        OPENSSL_cleanse(b->data, b->cap);
        free(b->data);
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

int rx_buf_add(rx_buf *b, const void *p, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return REXEC_EREQUEST;
    int r = buf_reserve(b, b->len + n);
    if (r != 0)
        return r;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

size_t rx_buf_add_capped(rx_buf *b, const void *p, size_t n)
{
    size_t room = b->max - b->len, keep = n < room ? n : room;
    return keep && rx_buf_add(b, p, keep) != 0 ? 0 : keep;
}

int rx_buf_adds(rx_buf *b, const char *s)
{
    return rx_buf_add(b, s, strlen(s));
}

int rx_buf_addc(rx_buf *b, unsigned char c)
{
    return rx_buf_add(b, &c, 1);
}

int rx_buf_addf(rx_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return REXEC_EINTERNAL;
    if ((size_t)n > b->max || b->len > b->max - (size_t)n)
        return REXEC_EREQUEST;
    int r = buf_reserve(b, b->len + (size_t)n);
    if (r != 0)
        return r;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void rx_buf_reset(rx_buf *b)
{
    if (b->data) {
        OPENSSL_cleanse(b->data, b->cap);
        b->data[0] = 0;
    }
    b->len = 0;
}

void rx_buf_free(rx_buf *b)
{
    if (b == NULL)
        return;
    if (b->data) {
        OPENSSL_cleanse(b->data, b->cap);
        free(b->data);
    }
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

unsigned char *rx_buf_steal(rx_buf *b, size_t *len)
{
    unsigned char *p = b->data;
    if (p == NULL && buf_reserve(b, 0) == 0) {
        p = b->data;
        p[0] = 0;
    }
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

void rx_hex_encode(const void *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = 0;
}

int rx_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    out[0] = 0;
    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32)
        return -1;
    rx_hex_encode(md, 32, out);
    return 0;
}

#define SHA_FD_CHUNK (256 * 1024)

int rx_sha256_fd(int fd, uint64_t max, char out[65], uint64_t *got)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    ssize_t n = 0;
    int e = 0;
    out[0] = 0;
    *got = 0;
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    unsigned char *buf = malloc(SHA_FD_CHUNK);
    if (h == NULL || buf == NULL || !EVP_DigestInit_ex(h, EVP_sha256(), NULL))
        e = ENOMEM;
    while (e == 0 && *got < max) {
        size_t want = max - *got < SHA_FD_CHUNK ? (size_t)(max - *got) : SHA_FD_CHUNK;
        n = pread(fd, buf, want, (off_t)*got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            e = errno;
        else if (n == 0)
            break;
        else if (!EVP_DigestUpdate(h, buf, (size_t)n))
            e = ENOMEM;
        else
            *got += (uint64_t)n;
    }
    if (e == 0 && (!EVP_DigestFinal_ex(h, md, &mdlen) || mdlen != 32))
        e = ENOMEM;
    EVP_MD_CTX_free(h);
    free(buf);
    if (e != 0) {
        errno = e;
        return -1;
    }
    rx_hex_encode(md, 32, out);
    return 0;
}
