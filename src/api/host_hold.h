/* The hosts of an open serve request, held in the pool (rx_pool_hold): a host's idle runners stay
 * while a request that includes it runs, and count their idle time from its end. */
#ifndef RX_HOST_HOLD_H
#define RX_HOST_HOLD_H

#include <stddef.h>

#include "rexec.h"
#include "workspace.h"

/* Holds the pool hosts of names (hosts of ctx's workspace; unknown names are skipped) and
 * returns them, *n_held of them, for rx_ctx_release_hosts. NULL (and nothing held) when there
 * is nothing to hold or no memory: a hold only spares runners, a call never depends on it. */
const rx_host **rx_ctx_hold_hosts(rexec_ctx *ctx, const char *const *names, size_t n,
                                  size_t *n_held);
/* Ends the hold of rx_ctx_hold_hosts and frees held (NULL is nothing). */
void rx_ctx_release_hosts(rexec_ctx *ctx, const rx_host **held, size_t n_held);

#endif
