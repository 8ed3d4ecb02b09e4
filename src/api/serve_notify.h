/* approvals.notify: the program serve runs for each new challenge (docs/workspace.md,
 * "approvals"), with the challenge's JSON on its stdin. Private to src/api/ (serve_approvals.c).
 *
 * Nothing waits for it: it is started with uv_spawn (no shell), its stdout is read and thrown
 * away, and it is killed at its timeout or once it has written more than RX_NOTIFY_OUT_MAX.
 * A program that is missing, crashes, exits non-zero, hangs or floods is logged on serve's
 * stderr and counted (rx_notifier_failures); the call that made the challenge never knows. At
 * most RX_NOTIFY_RUNNING run at once: a notification beyond them is dropped, logged and
 * counted. Its environment is PATH and HOME only: serve's may hold secret values. */
#ifndef RX_SERVE_NOTIFY_H
#define RX_SERVE_NOTIFY_H

#include <uv.h>

#define RX_NOTIFY_RUNNING 16
#define RX_NOTIFY_OUT_MAX ((size_t)1 << 20)

typedef struct rx_notifier rx_notifier;

/* A notifier on loop. NULL when out of memory. */
rx_notifier *rx_notifier_new(uv_loop_t *loop);

/* Starts argv (argv[0] an absolute path) with json and a newline on its stdin; what it is
 * about (a challenge id) names it in the log. */
void rx_notify_start(rx_notifier *n, char *const argv[], double timeout_s, const char *json,
                     const char *about);

/* Notifications that failed so far (not started, crashed, non-zero, timed out, flooded). */
unsigned long rx_notifier_failures(const rx_notifier *n);

/* Kills what still runs and frees n once every handle has closed; then on_closed(ud). */
void rx_notifier_close(rx_notifier *n, void (*on_closed)(void *ud), void *ud);

#endif
