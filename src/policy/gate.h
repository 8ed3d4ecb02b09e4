/* The risk gate: typed parameters, scope, effective risk against the host's limits, and
 * single-use approvals. Nothing runs without ALLOW. */
#ifndef RX_GATE_H
#define RX_GATE_H

#include <pthread.h>
#include <stddef.h>

#include "redact.h"
#include "rexec.h"
#include "workspace.h"

typedef enum rx_verdict { RX_ALLOW = 0, RX_DENY, RX_REQUIRES_APPROVAL } rx_verdict;

/* Stable reason codes (documented in docs/gate.md):
 *   ALLOW_LEVEL        effective risk <= host allow
 *   ALLOW_GRANT        a valid single-use grant was consumed
 *   DENY_SCOPE         a target parameter is outside the workspace scope
 *   DENY_LEVEL         effective risk above the host's approve limit
 *   DENY_CONTAINMENT   the host cannot offer the containment the action requires
 *   REQUIRES_APPROVAL  needs a grant: a pending challenge was written
 *   GRANT_UNKNOWN      --grant names no grant
 *   GRANT_MISMATCH     the request drifted from what was approved
 *   GRANT_EXPIRED      the grant's time ran out
 *   GRANT_USED         the grant was already consumed
 *   GRANT_NOT_APPROVED the challenge exists but no operator approved it yet */
typedef struct rx_decision {
    rx_verdict verdict;
    const char *reason;          /* a static reason code from the list above */
    rx_risk effective_risk;
    char challenge_id[64];       /* REQUIRES_APPROVAL: the pending challenge */
    char message[512];           /* for people: why, naming host/action/parameter */
} rx_decision;

/* The hosts of one fan-out request share one challenge (docs/gate.md, "One decision for a
 * fan-out"): the first host that needs approval makes it, the others are added to it. Shared by
 * the request's calls, whose gates may run on several threads at once: mu orders them. */
typedef struct rx_gate_fanout {
    pthread_mutex_t mu;
    char id[64]; /* the request's challenge so far, or "" */
} rx_gate_fanout;

/* A call's request after parameter resolution. */
typedef struct rx_gate_input {
    const rx_ws *ws;
    const rx_host *host;
    const rx_action *action;
    const rexec_param *values;   /* resolved: one per action->params[i], same order */
    const char *rendered;        /* the rendered command (secrets by name only) */
    const unsigned char *stdin_data; /* NULL: none */
    size_t stdin_len;
    const char *stdin_hex;       /* or, for stdin streamed from a file: its SHA-256, hashed by the
                                  * caller (stdin_data NULL, stdin_len its size) */
    /* or, for a file: hashes it into hex (64 digits) only when the decision needs the digest (an
     * approval or a grant binds it); most calls never read the file twice. 0 or an error. */
    int (*stdin_hash)(void *ud, char hex[65], rexec_error *err);
    const char *grant_id;        /* NULL: none */
    int eval_only;               /* decide, but write no challenge and consume no grant */
    const rx_redactor *redactor; /* what the challenge file holds goes through it (may be NULL) */
    /* Called once a challenge is decided (d filled: REQUIRES_APPROVAL, its id and message) and
     * before its file is written: an error leaves no file and is returned. May be NULL. */
    int (*on_challenge)(void *ud, const rx_decision *d, rexec_error *err);
    /* Asked before a grant is taken: sets *used when the audit log shows a call that ran on it
     * (created: the grant's creation, Unix seconds). An error is returned. May be NULL. */
    /* host: the host whose use is asked about (a fan-out grant serves each of its hosts once),
     * or NULL: any use. */
    int (*grant_used)(void *ud, const char *id, const char *host, int64_t created, int *used,
                      rexec_error *err);
    void *ud;
    rx_gate_fanout *fanout;     /* NULL: the challenge is this call's alone */
    long requester_uid;         /* recorded in the challenge: the serve client, or -1 */
    const char *requester_user;
    const char *request_id;     /* the batch_id or the run_id */
} rx_gate_input;

/* Maps the caller's parameters onto the action's: unknown names, missing required parameters and
 * duplicates are REXEC_EREQUEST naming the parameter; omitted ones take their default. Each value
 * is validated (rx_param_validate): REXEC_EREQUEST (65), or REXEC_EDENIED (77) for an out-of-scope
 * target, in which case out_decision (if not NULL) is filled with DENY_SCOPE.
 * On success *values is a new array of action->n_params entries (borrowing the strings of
 * given/defaults), which the caller frees. */
int rx_gate_resolve_params(const rx_ws *ws, const rx_action *action, const rexec_param *given,
                           size_t n_given, rexec_param **values, rx_decision *out_decision,
                           rexec_error *err);

/* Decides. Returns 0 with *out filled (ALLOW / DENY / REQUIRES_APPROVAL), or an error code
 * (REXEC_EAUDIT when the approvals directory cannot be written, REXEC_ENOMEM ...). With a grant:
 * consumes it atomically when it matches (two racing callers: exactly one gets ALLOW_GRANT).
 * Without one, at the approve level and not eval_only: writes a pending challenge bound to the
 * request hash and returns REQUIRES_APPROVAL with its id. */
int rx_gate_decide(const rx_gate_input *in, rx_decision *out, rexec_error *err);

/* SHA-256 (hex) binding a request: host, action, every parameter, the stdin digest, and the
 * names of the action's secrets. The stdin comes from stdin_data or stdin_hex (stdin_hash is
 * for rx_gate_decide only). */
void rx_gate_request_hash(const rx_gate_input *in, char out[65]);

#endif
