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

#endif
