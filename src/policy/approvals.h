/* Approvals: pending challenges and single-use grants in <workspace>/approvals/ (dir 0700,
 * files 0600 whatever the umask, symlinks refused).
 *
 * A challenge is written when a call needs approval (the gate does it). An operator confirms it
 * at a terminal (`rexec approve ID`): it becomes a grant. A caller then names the grant
 * (`--grant ID`) and the gate consumes it, once, by renaming <id>.json to <id>.used: of N racing
 * callers exactly one rename succeeds. File format, states and expiry: docs/gate.md.
 *
 * Errors: REXEC_EDENIED (77) for an unknown, malformed, expired or used id and a refused
 * confirmation; REXEC_EAUDIT (74) when approvals/ cannot be read or written or holds a file that
 * is not a valid challenge; REXEC_ENOMEM. Messages name the id, never a secret. */
#ifndef RX_APPROVALS_H
#define RX_APPROVALS_H

#include <stddef.h>
#include <stdint.h>

#include "redact.h"
#include "rexec.h"
#include "workspace.h"

#define RX_APPROVALS_DIR "approvals"
#define RX_APPROVAL_ID_LEN 19  /* "ch-" + 16 lowercase hex digits */
#define RX_APPROVAL_CODE_LEN 7 /* "K7Q-2MX": 6 Crockford base32 characters around a dash */
#define RX_APPROVAL_MAX_FILE (8u << 20) /* a challenge file larger than this is refused */

typedef enum rx_approval_state {
    RX_AP_PENDING = 0, /* written by the gate, waiting for an operator */
    RX_AP_APPROVED,    /* a grant: an operator confirmed it, not used yet */
    RX_AP_USED,        /* consumed by a call (<id>.used); a fan-out grant: by its last host */
    RX_AP_DENIED,      /* an operator refused it: never approved, never used */
    RX_AP_WITHDRAWN    /* its caller stopped waiting (serve): never approved, never used */
} rx_approval_state;

/* One host of a fan-out challenge: one approval, each host runs once (docs/gate.md, "One
 * decision for a fan-out"). */
typedef struct rx_challenge_target {
    const char *host;
    const char *request_hash;
    const char *rendered; /* NULL: the challenge's */
    int used;             /* this host ran on the grant */
} rx_challenge_target;

/* What the gate records about a call that needs approval. Everything is borrowed. */
typedef struct rx_challenge_in {
    const char *host;
    const char *action;
    rx_risk risk;               /* effective */
    rx_risk declared_risk;
    const char *risk_why;       /* "state_changing", "raised from L1: shell parameter", ... */
    const char *request_hash;   /* rx_gate_request_hash: 64 hex digits */
    const char *rendered;       /* the rendered command, secrets by name only (may be NULL) */
    const rexec_param *params;  /* resolved parameters (values are not secrets) */
    size_t n_params;
    int has_stdin;
    const char *stdin_sha256;   /* 64 hex digits when has_stdin */
    uint64_t stdin_len;
    char *const *secrets;       /* the action's secret NAMES */
    size_t n_secrets;
    const rx_redactor *redactor; /* rendered and parameter values are written through it */
    long requester_uid;         /* the serve client that asked, or -1 (the rexec process) */
    const char *requester_user; /* its user name (NULL with -1) */
    const char *request_id;     /* the fan-out's batch_id, or the call's run_id (may be NULL) */
    /* Called with the new id before the file is written; an error means no file is written
     * (the caller's audit record of the challenge comes first). May be NULL. */
    int (*before_write)(void *ud, const char *id, rexec_error *err);
    void *ud;
} rx_challenge_in;

/* A challenge or grant as loaded from its file. Strings point into `tree` (rx_challenge_free
 * releases everything); optional ones are NULL when absent. Times are Unix seconds. */
typedef struct rx_challenge {
    char id[RX_APPROVAL_ID_LEN + 1];
    rx_approval_state state;
    int64_t created, expires;   /* expires: the current deadline (of the challenge, then grant) */
    int64_t approved_at, used_at; /* 0 when not (yet) */
    const char *host, *action;
    const char *risk, *declared_risk, *risk_why;
    const char *request_hash;
    const char *rendered;
    const char **param_names, **param_values; /* n_params each (arrays owned, strings not) */
    size_t n_params;
    int has_stdin;
    const char *stdin_sha256;
    uint64_t stdin_len;
    const char **secrets;       /* names (array owned, strings not) */
    size_t n_secrets;
    const char *code;           /* the confirmation code the operator types back */
    const char *approved_by, *approved_tty;
    long approved_uid;          /* -1: not recorded */
    const char *approved_via;   /* "tty", "socket", "web" (NULL in older files) */
    const char *comment;        /* the approver's, or NULL */
    int64_t denied_at;          /* DENIED / WITHDRAWN: when */
    const char *denied_by, *denied_via, *deny_reason;
    long denied_uid;            /* -1: not recorded (serve withdrew it) */
    long requester_uid;         /* -1: none recorded */
    const char *requester_user, *request_id;
    rx_challenge_target *targets; /* a fan-out's hosts (array owned, strings not); n_targets 0:
                                   * the one host above */
    size_t n_targets;
    void *tree;                 /* the parsed document (cJSON), owned */
} rx_challenge;

/* 1 when id has the exact shape of an approval id ("ch-" + 16 lowercase hex), else 0. Ids are
 * checked before they become file names, so "../x" can never name a file. */
int rx_approval_id_ok(const char *id);

/* "pending", "approved", "used". */
const char *rx_approval_state_name(rx_approval_state s);

/* Formats Unix seconds as "2024-12-02T10:15:00Z" (the form the files hold). */
void rx_approval_time_str(int64_t t, char out[32]);

/* The clock approvals use (Unix seconds). Tests may replace it; NULL restores time(). */
int64_t rx_approvals_now(void);
void rx_approvals_set_clock(int64_t (*now)(void));

/* Writes a new pending challenge for `in` with a random id and confirmation code, created now
 * and expiring after ws->limits.approval_ttl_s (900 s when 0). Creates approvals/ when missing.
 * Returns 0 with the id in id_out, or REXEC_EAUDIT / REXEC_ENOMEM. */
int rx_approvals_create(const rx_ws *ws, const rx_challenge_in *in,
                        char id_out[RX_APPROVAL_ID_LEN + 1], rexec_error *err);

/* Loads a challenge or grant: <id>.json (pending or approved), else <id>.used (state USED).
 * Returns 0 with *out filled (free with rx_challenge_free), REXEC_EDENIED when the id is
 * malformed or names nothing, REXEC_EAUDIT when a file cannot be read or is invalid. */
int rx_approvals_load(const rx_ws *ws, const char *id, rx_challenge *out, rexec_error *err);

/* Releases what rx_approvals_load put in c (c itself is the caller's); c may be NULL. */
void rx_challenge_free(rx_challenge *c);

/* 1 when c is pending or approved and its deadline has passed. */
int rx_challenge_expired(const rx_challenge *c, int64_t now);

/* Marks a pending challenge approved: state "approved", approved_at = now, approved_by = user,
 * and a new deadline (now + TTL: the caller gets the whole TTL to use the grant). This is the
 * step behind the terminal flow, without the terminal (tests, and the terminal flow).
 * Returns 0 (also when it is already approved: nothing changes), REXEC_EDENIED when it is
 * unknown, used or expired, REXEC_EAUDIT when it cannot be rewritten. */
int rx_approvals_approve(const rx_ws *ws, const char *id, const char *user, rexec_error *err);

/* Consumes an approved grant atomically: renames <id>.json to <id>.used. Exactly one of any
 * number of concurrent callers gets 0; the others get REXEC_EDENIED ("already used"). The
 * caller checks state, expiry and request hash first (the gate does): this is only the step
 * that makes use single. REXEC_EAUDIT when the rename fails otherwise. */
int rx_approvals_consume(const rx_ws *ws, const char *id, rexec_error *err);

/* The steps behind the operator's confirmation at a terminal (src/api/approve_tty.c):
 * rx_approvals_approvable: 0 when c may be approved now, 1 when it already is, REXEC_EDENIED
 * (used, expired, or, with expect_hash, changed since it was shown) otherwise.
 * rx_approvals_approve_as: rx_approvals_approve that also records the terminal (tty, may be
 * NULL) and refuses a challenge whose request hash is no longer expect_hash (may be NULL).
 * rx_approvals_ttl: how long a grant stays usable once approved, in seconds. */
int rx_approvals_approvable(const rx_challenge *c, const char *expect_hash, rexec_error *err);
int rx_approvals_approve_as(const rx_ws *ws, const char *id, const char *user, const char *tty,
                            const char *expect_hash, rexec_error *err);
int64_t rx_approvals_ttl(const rx_ws *ws);

/* A decision on a pending challenge, by someone (docs/gate.md, "Approvers on serve"). */
typedef struct rx_approval_decision {
    int approve;             /* 1 approve, 0 deny (or withdraw: via "serve") */
    const char *user;        /* who decided (recorded as approved_by / denied_by) */
    long uid;                /* the decider's uid, or -1 */
    const char *via;         /* "tty", "socket", "web", "serve" (a withdrawal) */
    const char *tty;         /* the terminal (via tty), or NULL */
    const char *note;        /* approve: comment; deny: reason (may be NULL) */
    const char *expect_hash; /* refuse when the request hash is no longer this (may be NULL) */
    int withdraw;            /* deny as "withdrawn" (the caller stopped waiting) */
    int not_self;            /* refuse an approval when uid is the requester's (serve) */
} rx_approval_decision;

/* Decides challenge id under the directory's lock. With not_self, an approval is refused when
 * the decider's uid is the requester's (REXEC_EDENIED: "cannot approve its own request"),
 * whatever the configuration says. Returns 0 with the challenge as it is now in *after (may be NULL; free
 * with rx_challenge_free); 1 when it was approved already and d approves (nothing changes);
 * REXEC_EDENIED when it is unknown, expired, used, denied or withdrawn, or already approved and
 * d denies; REXEC_EAUDIT when approvals/ cannot be used. */
int rx_approvals_decide(const rx_ws *ws, const char *id, const rx_approval_decision *d,
                        rx_challenge *after, rexec_error *err);

/* Adds a host to pending challenge id (a fan-out: one approval for every host of a request).
 * Returns 0, 1 when the challenge is no longer pending (the caller makes a new one), or
 * REXEC_EAUDIT / REXEC_ENOMEM. */
int rx_approvals_add_target(const rx_ws *ws, const char *id, const char *host,
                            const char *request_hash, const char *rendered,
                            const rx_redactor *redactor, rexec_error *err);

/* The target of c for host (NULL when c is not a fan-out or does not list host). */
const rx_challenge_target *rx_challenge_target_of(const rx_challenge *c, const char *host);

/* Consumes host's use of a fan-out grant (the last host's use renames the file to .used).
 * Exactly one of racing callers for one host gets 0; the others REXEC_EDENIED ("already
 * used"). A grant that is not a fan-out: rx_approvals_consume. */
int rx_approvals_consume_host(const rx_ws *ws, const char *id, const char *host,
                              rexec_error *err);

/* "lab1,lab2" (or the one host) into out. */
const char *rx_challenge_hosts_str(const rx_challenge *c, char *out, size_t cap);

/* Lists approvals/: pending challenges and unused grants (expired ones included; check with
 * rx_challenge_expired), and used grants too when include_used. Sorted by creation time.
 * Returns 0 with a new array in *out (free with rx_challenges_free), REXEC_EAUDIT, or
 * REXEC_ENOMEM. A missing approvals/ is an empty list. */
int rx_approvals_list(const rx_ws *ws, int include_used, rx_challenge **out, size_t *n,
                      rexec_error *err);
void rx_challenges_free(rx_challenge *list, size_t n);

/* Removes expired challenges and grants, and used grants older than the TTL. Returns 0 with
 * the number removed in *removed (may be NULL), or REXEC_EAUDIT. */
int rx_approvals_prune(const rx_ws *ws, size_t *removed, rexec_error *err);

#endif
