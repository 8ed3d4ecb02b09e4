/* A fan-out's controls (docs/cli.md, "Batches, canary, failure threshold"): rolling batches, a
 * canary batch, a failure threshold and retries of hosts a call provably never reached. Pure
 * logic, no I/O: the front ends (cmd_run.c, serve.c) ask it which host may start and tell it how
 * each ended; fanout_record.c writes its plan and its stop to the audit log. The public side is
 * rexec_fanout_* in include/rexec.h. */
#ifndef RX_FANOUT_PLAN_H
#define RX_FANOUT_PLAN_H

#include <stddef.h>

#include "rexec.h"

/* Upper bounds, so that a typo cannot plan something absurd. */
#define RX_FANOUT_MAX_COUNT 1000000L
#define RX_FANOUT_MAX_RETRIES 10

/* "N" or "P%" as given: percent is 0/1, value N or P. */
typedef struct rx_count {
    long value;
    int percent;
} rx_count;

/* Parses "N" (decimal digits, min..RX_FANOUT_MAX_COUNT) or "P%" (an integer min..100). what
 * names the option in the message ("--batch"). 0, or REXEC_EUSAGE. */
int rx_count_parse(const char *what, const char *text, long min, rx_count *out, rexec_error *err);

/* The count for n hosts: N itself, or P% of n, rounded up (round_up) or down. */
size_t rx_count_of(const rx_count *c, size_t n, int round_up);

struct rexec_fanout {
    size_t n;            /* hosts */
    size_t *ends;        /* batch k holds the hosts [ends[k-1], ends[k]) (ends[-1] = 0) */
    size_t n_batches;
    size_t batch;        /* the current batch, 0-based */
    size_t canary;       /* hosts in the canary batch (0: none) */
    size_t batch_size;   /* hosts per batch after the canary (0: the rest at once) */
    long max_failures;   /* stop once failed > max_failures; -1: never */
    unsigned retries;    /* retries of a host whose call provably did not start */
    unsigned char *state; /* per host: RX_HOST_* */
    unsigned char *tries; /* per host: calls started */
    size_t done, failed, skipped;
    int stopped;
    size_t stop_batch;   /* the batch (0-based) in which the threshold was crossed */
    char why[256];       /* the stop, for a skipped host's error */
    char msg[512];       /* the last skipped host's error: "HOST: why" */
};

enum { RX_HOST_PENDING = 0, RX_HOST_STARTED, RX_HOST_DONE, RX_HOST_FAILED, RX_HOST_SKIPPED };

#endif
