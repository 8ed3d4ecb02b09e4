/* Redactor throughput: ~256 MiB of log-like mixed text (and of random bytes), fed in 16 KiB
 * chunks to one stream, with 1, 100 and 1,000 handed-out secrets and every encoding on.
 * A benchmark, not a test: scripts/bench-redact builds and runs it; docs/PERFORMANCE.md records
 * the figures. Usage: bench_redact [MiB] [rounds] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redact.h"

#define CHUNK (16 * 1024)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static const char *words[] = {
    "the", "request", "completed", "in", "user", "session", "started", "connection", "closed",
    "from", "worker", "error", "warning", "retrying", "after", "timeout", "cache", "miss", "hit",
    "GET", "POST", "PUT", "status", "bytes", "sent", "received", "handler", "upstream", "proxy",
    "database", "query", "took", "rows", "returned", "listening", "on", "port", "config",
    "loaded", "file", "not", "found", "permission", "denied", "process", "exited", "with", "code",
    "kernel", "eth0", "link", "is", "up", "systemd", "Starting", "Stopped", "service", "unit",
    "apt", "install", "package", "version", "upgrade", "compiling", "linking", "test", "passed",
    "failed", "skipping", "because", "token", "refresh", "scheduled", "job", "queue", "empty",
    "memory", "usage", "cpu", "load", "average", "disk", "space", "available", "mounted",
};
#define NWORDS (sizeof(words) / sizeof(words[0]))

static size_t put_word(char *p)
{
    const char *w = words[rnd() % NWORDS];
    size_t n = strlen(w);
    memcpy(p, w, n);
    return n;
}

/* One log-like line: a timestamp, a level, a component, words, numbers, and now and then a
 * path, an IP address, a hex id, a JSON fragment or a short base64 blob. */
static size_t put_line(char *p)
{
    static const char *lv[] = {"INFO ", "DEBUG", "WARN ", "ERROR"};
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint64_t t = rnd();
    size_t n = (size_t)sprintf(p, "2026-12-02T%02u:%02u:%02u.%03uZ %s [%s-%u] ", (unsigned)(t % 24),
                               (unsigned)(t >> 8) % 60, (unsigned)(t >> 16) % 60,
                               (unsigned)(t >> 24) % 1000, lv[(t >> 34) % 4],
                               words[(t >> 36) % NWORDS], (unsigned)(t >> 44) % 16);
    unsigned nw = 4 + (unsigned)(rnd() % 12);
    for (unsigned i = 0; i < nw; i++) {
        uint64_t k = rnd() % 20;
        if (k == 0)
            n += (size_t)sprintf(p + n, "/var/lib/%s/%s.conf ", words[rnd() % NWORDS],
                                 words[rnd() % NWORDS]);
        else if (k == 1)
            n += (size_t)sprintf(p + n, "10.%u.%u.%u:%u ", (unsigned)(rnd() % 256),
                                 (unsigned)(rnd() % 256), (unsigned)(rnd() % 256),
                                 (unsigned)(rnd() % 65536));
        else if (k == 2)
            n += (size_t)sprintf(p + n, "id=%016llx ", (unsigned long long)rnd());
        else if (k == 3)
            n += (size_t)sprintf(p + n, "{\"level\":\"info\",\"ms\":%u} ", (unsigned)(rnd() % 1000));
        else if (k == 4) {
            for (int j = 0; j < 24; j++)
                p[n++] = b64[rnd() % 64];
            p[n++] = ' ';
        } else if (k < 8)
            n += (size_t)sprintf(p + n, "%u ", (unsigned)(rnd() % 100000));
        else {
            n += put_word(p + n);
            p[n++] = ' ';
        }
    }
    p[n - 1] = '\n';
    return n;
}

static unsigned char *make_text(size_t size, const rx_secret *plant, size_t nplant)
{
    unsigned char *buf = malloc(size + 4096);
    size_t n = 0, lines = 0;
    while (n < size) {
        n += put_line((char *)buf + n);
        if (nplant && ++lines % 20000 == 0) { /* a secret every ~2 MB: the match path runs too */
            const rx_secret *s = &plant[rnd() % nplant];
            n += (size_t)sprintf((char *)buf + n, "password=%.*s\n", (int)s->len, (const char *)s->value);
        }
    }
    return buf;
}

static unsigned char *make_random(size_t size)
{
    unsigned char *buf = malloc(size + 8);
    for (size_t i = 0; i < size; i += 8) {
        uint64_t x = rnd();
        memcpy(buf + i, &x, 8);
    }
    return buf;
}

static rx_secret *make_secrets(size_t n)
{
    static const char cs[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-.!";
    rx_secret *s = calloc(n, sizeof(*s));
    for (size_t i = 0; i < n; i++) {
        size_t len = 16 + rnd() % 33;
        unsigned char *v = malloc(len);
        char *name = malloc(32);
        for (size_t j = 0; j < len; j++)
            v[j] = (unsigned char)cs[rnd() % (sizeof(cs) - 1)];
        snprintf(name, 32, "SECRET_%zu", i);
        s[i] = (rx_secret){name, v, len};
    }
    return s;
}

static void count(void *ctx, const unsigned char *data, size_t len)
{
    (void)data;
    *(size_t *)ctx += len;
}

/* CPU time of this thread: the target is per core, and the figure should not depend on what
 * else the machine runs (wall time on a busy box counts time spent descheduled). */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Best of `rounds` runs, in MB/s (10^6 bytes of input per CPU second). */
static double run(const rx_redactor *r, const unsigned char *buf, size_t size, int rounds,
                  size_t *out_len)
{
    double best = 0;
    for (int k = 0; k < rounds; k++) {
        size_t out = 0;
        double t0 = now();
        rx_redact_stream *s = rx_redact_stream_new(r, count, &out);
        for (size_t i = 0; i < size; i += CHUNK)
            rx_redact_feed(s, buf + i, size - i < CHUNK ? size - i : CHUNK);
        rx_redact_finish(s);
        rx_redact_stream_free(s);
        double mbs = (double)size / (now() - t0) / 1e6;
        best = mbs > best ? mbs : best;
        *out_len = out;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    size_t size = mib << 20, counts[] = {1, 100, 1000};
    rx_secret *all = make_secrets(1000);
    unsigned char *text = make_text(size, all, 1000), *random = make_random(size);
    printf("input: %zu MiB, %d KiB chunks, best of %d\n", mib, CHUNK / 1024, rounds);
    printf("%-8s %12s %12s %8s\n", "secrets", "text MB/s", "random MB/s", "hold");
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        rx_redactor *r;
        rexec_error e;
        double t0 = now();
        if (rx_redactor_new(&r, all, counts[i], &e) != 0) {
            fprintf(stderr, "bench: %s\n", e.msg);
            return 1;
        }
        double build_ms = (now() - t0) * 1e3;
        size_t out_text, out_rand;
        double mt = run(r, text, size, rounds, &out_text);
        double mr = run(r, random, size, rounds, &out_rand);
        printf("%-8zu %12.0f %12.0f %8zu   (build %.1f ms)\n", counts[i], mt, mr,
               rx_redactor_max_hold(r), build_ms);
        rx_redactor_free(r);
    }
    return 0;
}
