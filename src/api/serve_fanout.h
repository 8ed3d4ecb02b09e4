/* serve's fan-out keys ("batch", "canary", "max_failures", "retry_unavailable",
 * docs/serve-protocol.md): read from a run request into the request's rexec_fanout, its plan
 * recorded before any call starts. Private to src/api. */
#ifndef RX_SERVE_FANOUT_H
#define RX_SERVE_FANOUT_H

#include <cjson/cJSON.h>

#include "rexec.h"

/* The batch's who and what, for the plan and stop records. */
typedef struct rx_fanout_who {
    const char *const *hosts;
    size_t n;
    const char *action, *batch_id, *client_user;
    unsigned client_uid;
} rx_fanout_who;

/* *out: NULL when root asks for no control. Errors: REXEC_EREQUEST for a key of the wrong type
 * (true, 1.5, an object), REXEC_EUSAGE for a value out of range (batch 0, "0%", "101%",
 * max_failures -1, a canary larger than the host list), REXEC_EAUDIT when the plan cannot be
 * recorded: then nothing may start. */
int rx_serve_fanout_new(rexec_ctx *ctx, const cJSON *root, const rx_fanout_who *who,
                        rexec_fanout **out, rexec_error *err);

#endif
