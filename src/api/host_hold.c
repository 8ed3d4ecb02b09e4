/* Holding a request's hosts in the pool (host_hold.h). */
#include <stdlib.h>

#include "call.h"
#include "host_hold.h"

const rx_host **rx_ctx_hold_hosts(rexec_ctx *ctx, const char *const *names, size_t n,
                                  size_t *n_held)
{
    const rx_host **held = ctx->pool && !ctx->closing && n ? calloc(n, sizeof(*held)) : NULL;
    *n_held = 0;
    for (size_t i = 0; held && i < n; i++) {
        const rx_host *h = rx_ws_host(ctx->ws, names[i]);
        if (h == NULL)
            continue;
        /* the pool's object for it: the one a reload kept warm (reload.c) */
        held[*n_held] = rx_ctx_pool_host(ctx, h);
        rx_pool_hold(ctx->pool, held[(*n_held)++], 1);
    }
    return held;
}

void rx_ctx_release_hosts(rexec_ctx *ctx, const rx_host **held, size_t n_held)
{
    for (size_t i = 0; ctx->pool && i < n_held; i++)
        rx_pool_hold(ctx->pool, held[i], 0);
    free(held);
}
