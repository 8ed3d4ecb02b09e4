/* serve's approvals (docs/serve-protocol.md, "Approvers on serve"): the approvals, approve, deny
 * and watch ops, the watchers' events, the requests waiting for a decision (wait_approval_s),
 * and the notify program. Private to src/api/ (serve.c).
 *
 * serve.c owns its clients; the hub knows them only as opaque pointers and reaches them through
 * a port (send a line, how much is queued, drop one that fell behind). */
#ifndef RX_SERVE_APPROVALS_H
#define RX_SERVE_APPROVALS_H

#include <cjson/cJSON.h>

#include "call.h"
#include "serve_peer.h"

#define RX_WATCH_QUEUE_MAX ((size_t)1 << 20) /* bytes unread by a watcher before it is dropped */

typedef struct rx_hub rx_hub;

typedef struct rx_hub_port {
    int (*send)(void *cl, cJSON *o);          /* one line to the client; -1 when it is gone */
    size_t (*queued)(void *cl);               /* bytes queued to it, not yet written */
    void (*drop)(void *cl, const char *why);  /* an error line, then the connection closes */
} rx_hub_port;

/* How a waiting request's challenge ended: approved (1) or not (0: denied, withdrawn, expired,
 * no decision in time), and why, for its hosts' results. */
typedef void (*rx_hub_decided_fn)(void *ud, int approved, const char *why);

rx_hub *rx_hub_new(rexec_ctx *ctx, const rx_hub_port *port);

/* Handles op (approvals, approve, deny, watch) for client cl, whose peer is p. 0 when it
 * answered, else an error for serve's error line (65 malformed, 77 refused, 74 approvals/). */
int rx_hub_op(rx_hub *h, void *cl, const rx_peer *p, const cJSON *root, const char *op,
              rexec_error *err);

/* A challenge serve's calls made (every host of its request decided): approval_pending to the
 * watchers and the notify program, once per challenge. */
void rx_hub_pending(rx_hub *h, const char *id);

/* Holds a request until challenge id is decided, for at most wait_s seconds; fn is called once
 * (never from within this call), unless rx_hub_unwait comes first. 0, or -1 (no memory). */
int rx_hub_wait(rx_hub *h, const char *id, double wait_s, rx_hub_decided_fn fn, void *ud);
void rx_hub_unwait(rx_hub *h, void *ud);

/* The caller stopped waiting (it left, or cancelled): the challenge can no longer be approved. */
void rx_hub_withdraw(rx_hub *h, const char *id, const char *why);

/* cl is leaving: it watches no more. 1 when cl is a watcher (the idle timeout spares it). */
void rx_hub_forget(rx_hub *h, void *cl);
int rx_hub_watching(const rx_hub *h, const void *cl);

/* Stops: closes its timer and the notify programs; then on_closed(ud). */
void rx_hub_close(rx_hub *h, void (*on_closed)(void *ud), void *ud);

#endif
