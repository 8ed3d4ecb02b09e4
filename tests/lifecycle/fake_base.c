/* The lifecycle test's base (see fake.h): the seeded PRNG, byte queues, and the fake clock.
 *
 * The fake clock: this executable defines clock_gettime, which the dynamic linker then binds
 * for libuv too (an executable's definitions come first), so libuv's loop time and uv_hrtime
 * read a virtual CLOCK_MONOTONIC that moves only when the test says (lc_clock_advance_ms). Every
 * timer of pool.c, runner.c and exec.c (set-up deadlines, backstops, call timeouts, the idle
 * runner, the pool's back-off) then fires at a virtual instant the scheduler chose, never at a
 * wall-clock one: a seed replays the same interleaving, and the test does not sleep. Other
 * clocks (CLOCK_REALTIME...) are the kernel's. */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fake.h"

/* ---- the clock ------------------------------------------------------------------------------- */

#define LC_CLOCK_START_MS 1000000u
static uint64_t lc_now_ms = LC_CLOCK_START_MS;

void lc_clock_reset(void) { lc_now_ms = LC_CLOCK_START_MS; }
void lc_clock_advance_ms(uint64_t ms) { lc_now_ms += ms; }
uint64_t lc_clock_ms(void) { return lc_now_ms; }

static int virtual_clock(clockid_t id)
{
    return id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_MONOTONIC_RAW ||
           id == CLOCK_BOOTTIME;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (virtual_clock(id)) {
        ts->tv_sec = (time_t)(lc_now_ms / 1000);
        ts->tv_nsec = (long)(lc_now_ms % 1000) * 1000000L;
        return 0;
    }
    return (int)syscall(SYS_clock_gettime, id, ts);
}

int clock_getres(clockid_t id, struct timespec *ts)
{
    if (virtual_clock(id)) {
        if (ts) {
            ts->tv_sec = 0;
            ts->tv_nsec = 1000000L; /* 1 ms: libuv takes the coarse clock for loop time */
        }
        return 0;
    }
    return (int)syscall(SYS_clock_getres, id, ts);
}

/* ---- the PRNG (splitmix64) --------------------------------------------------------------------- */

static uint64_t lc_state;

void lc_rng_seed(uint64_t seed) { lc_state = seed * 0x9E3779B97F4A7C15ull + 0x1234567ull; }

uint64_t lc_rand(void)
{
    uint64_t z = (lc_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

unsigned lc_below(unsigned n) { return n ? (unsigned)(lc_rand() % n) : 0; }
int lc_permille(unsigned p) { return lc_below(1000) < p; }

/* ---- byte queues ------------------------------------------------------------------------------- */

void lc_bytes_add(lc_bytes *b, const void *p, size_t n)
{
    if (n == 0)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (b->p == NULL)
            abort();
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

void lc_bytes_adds(lc_bytes *b, const char *s) { lc_bytes_add(b, s, strlen(s)); }

void lc_bytes_drop(lc_bytes *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

void lc_bytes_free(lc_bytes *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}
