/* Internal error helpers: fill a rexec_error whose message names what was wrong. */
#ifndef RX_ERR_H
#define RX_ERR_H

#include "rexec.h"

/* Formats err->msg (truncating safely), sets err->code = code and returns code. err may be NULL.
 * The message must not hold a secret value: callers pass names, never values. */
int rx_fail(rexec_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message: "hosts.lab1: " + old message. Returns err->code. */
int rx_fail_prefix(rexec_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A function that is static in a release build and visible to the unit tests in the test build
 * (after curl's UNITTEST), so the tests exercise the code that runs, not a copy of it. Their
 * declarations sit in the module's header under #ifdef REXEC_UNITTEST. */
#ifdef REXEC_UNITTEST
#define RX_UNITTEST_STATIC
#else
#define RX_UNITTEST_STATIC static
#endif

/* A log sink (rexec_ctx_set_log); modules below the API hold a pointer to the ctx's one. */
typedef struct rx_logger {
    rexec_log_fn fn;
    void *ud;
} rx_logger;

/* 1 when l would take lines of this level (so callers can skip building them). */
int rx_log_on(const rx_logger *l, int level);
/* Formats one line and hands it to l; nothing when l or l->fn is NULL. */
void rx_log(const rx_logger *l, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
