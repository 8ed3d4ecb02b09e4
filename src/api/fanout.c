/* The challenge a fan-out request's hosts share (gate.h, rx_gate_fanout; docs/gate.md, "One
 * decision for a fan-out"), found by the request's batch_id. A context holds a fixed number of
 * slots: taken and released on the loop thread only (call start, call free); the gates use a
 * slot's mutex and id from the thread pool while a call holds it. A slot is reused once no call
 * holds it, oldest first, so that a fan-out whose hosts start one after another (parallel 1)
 * still finds the challenge of its first host. When every slot is held, a call gets none and its
 * challenge is its own, as before fan-outs shared one. */
#include <stdlib.h>
#include <string.h>

#include "call.h"

#define FANOUT_SLOTS 64

typedef struct fanout_slot {
    char batch[REXEC_BATCH_ID_SIZE];
    rx_gate_fanout f;
    unsigned refs;
    unsigned long stamp; /* when it was last taken: the oldest free slot is reused */
} fanout_slot;

struct rx_fanouts {
    fanout_slot slot[FANOUT_SLOTS];
    unsigned long clock;
};

static rx_fanouts *fanouts_of(rexec_ctx *ctx)
{
    if (ctx->fanouts == NULL && (ctx->fanouts = calloc(1, sizeof(*ctx->fanouts))) != NULL)
        for (int i = 0; i < FANOUT_SLOTS; i++)
            pthread_mutex_init(&ctx->fanouts->slot[i].f.mu, NULL);
    return ctx->fanouts;
}

rx_gate_fanout *rx_ctx_fanout_take(rexec_ctx *ctx, const char *batch_id)
{
    rx_fanouts *t = batch_id ? fanouts_of(ctx) : NULL;
    fanout_slot *free_slot = NULL;
    if (t == NULL)
        return NULL;
    for (int i = 0; i < FANOUT_SLOTS; i++) {
        fanout_slot *s = &t->slot[i];
        if (strcmp(s->batch, batch_id) == 0) {
            s->refs++;
            s->stamp = ++t->clock;
            return &s->f;
        }
        if (s->refs == 0 && (free_slot == NULL || s->stamp < free_slot->stamp))
            free_slot = s;
    }
    if (free_slot == NULL)
        return NULL;
    snprintf(free_slot->batch, sizeof(free_slot->batch), "%s", batch_id);
    free_slot->f.id[0] = 0;
    free_slot->refs = 1;
    free_slot->stamp = ++t->clock;
    return &free_slot->f;
}

void rx_ctx_fanout_release(rexec_ctx *ctx, rx_gate_fanout *f)
{
    if (f == NULL || ctx->fanouts == NULL)
        return;
    fanout_slot *s = (fanout_slot *)((char *)f - offsetof(fanout_slot, f));
    if (s->refs > 0)
        s->refs--;
}

void rx_ctx_fanouts_free(rexec_ctx *ctx)
{
    if (ctx->fanouts == NULL)
        return;
    for (int i = 0; i < FANOUT_SLOTS; i++)
        pthread_mutex_destroy(&ctx->fanouts->slot[i].f.mu);
    free(ctx->fanouts);
    ctx->fanouts = NULL;
}
