/* rexec serve's own log (docs/serve-protocol.md, "Logs"): one structured line per request and
 * per call. JSON lines on stderr, or native journald fields when serve runs under systemd with
 * stderr connected to the journal. Every string passes the workspace's redactor first. */
#ifndef RX_SERVE_LOG_H
#define RX_SERVE_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include <cjson/cJSON.h>

#include "rexec.h"

typedef struct rx_serve_log {
    int format; /* REXEC_SERVE_LOG_OFF, _JSON or _JOURNAL (AUTO is resolved by rx_serve_log_init) */
    int fd;     /* the journal's datagram socket, or -1 */
    struct sockaddr_un journal; /* where entries go, resolved once by rx_serve_log_init */
    unsigned long lost; /* journal entries that could not be sent */
} rx_serve_log;

/* Resolves REXEC_SERVE_LOG_AUTO: the journal when $JOURNAL_STREAM names stderr (systemd's
 * sign that stderr goes to the journal), else JSON lines. The journal socket is
 * $REXEC_JOURNAL_SOCKET or /run/systemd/journal/socket. REXEC_EUSAGE for an unknown format. */
int rx_serve_log_init(rx_serve_log *l, int format, rexec_error *err);
void rx_serve_log_close(rx_serve_log *l);

/* Who asked and what, shared by both kinds of line. */
typedef struct rx_serve_log_who {
    long uid;          /* the client's uid, -1 unknown */
    const char *user;  /* its name, or NULL */
    const char *op;    /* NULL when the line had none */
    const cJSON *id;   /* the request's id as the client sent it, or NULL */
    const char *traceparent; /* the request's W3C traceparent, or NULL (then not in the line) */
} rx_serve_log_who;

/* A request has ended: how many hosts it had (0 for ops without any), its exit status, how long
 * it took, and its error (NULL when none). */
void rx_serve_log_request(rx_serve_log *l, const rexec_ctx *ctx, const rx_serve_log_who *w,
                          size_t hosts, int exit_status, uint64_t duration_ms, const char *error);
/* One host's call of a run or eval has ended. */
void rx_serve_log_call(rx_serve_log *l, const rexec_ctx *ctx, const rx_serve_log_who *w,
                       const rexec_result *r);

#endif
