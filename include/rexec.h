/*
 * rexec — run operator-approved actions on tool VMs over SSH.
 *
 * The one public header. The CLI and `rexec serve` use only what is declared here, and a C
 * orchestrator can embed rexec on its own libuv loop the same way:
 *
 *     rexec_ctx *ctx;
 *     rexec_error e;
 *     if (rexec_ctx_new(&ctx, loop, "/path/to/workspace", &e) != 0) { puts(e.msg); ... }
 *     rexec_request req = { .host = "lab1", .action = "sys.uname" };
 *     rexec_callbacks cb = { .on_output = print_it, .on_done = finished, .ud = me };
 *     rexec_call_start(ctx, &req, &cb, NULL, &e);
 *     uv_run(loop, UV_RUN_DEFAULT);
 *
 * Conventions (after libuv): functions return 0 or a negative rexec_err; a function that takes a
 * callback and fails never calls it; a call's on_done is called exactly once otherwise.
 */
#ifndef REXEC_H
#define REXEC_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, exit code, message): one table gives the error enum, its exit codes and its strings. */
#define REXEC_ERR_MAP(X)                                                      \
    X(USAGE, 64, "usage error")                                               \
    X(REQUEST, 65, "invalid request or parameter")                            \
    X(INTERNAL, 70, "internal error")                                         \
    X(NOMEM, 71, "out of memory")                                             \
    X(AUDIT, 74, "audit record could not be written")                         \
    X(PENDING, 75, "approval required")                                       \
    X(DENIED, 77, "denied by policy")                                         \
    X(CONFIG, 78, "configuration error")                                      \
    X(HOST, 255, "host unavailable")                                          \
    X(HOSTKEY, 255, "host key verification failed")                           \
    X(AUTH, 255, "authentication failed")                                     \
    X(TIMEDOUT, 255, "connection timed out")                                  \
    X(CONNLOST, 255, "connection lost")                                       \
    X(CANCELLED, 130, "cancelled")

typedef enum rexec_err {
    REXEC_OK = 0,
#define REXEC_ERR_ENUM_(name, code, msg) REXEC_E##name,
    REXEC_ERR_FIRST_ = -100,
    REXEC_ERR_MAP(REXEC_ERR_ENUM_)
#undef REXEC_ERR_ENUM_
    REXEC_ERR_LAST_
} rexec_err;

/* A static string for an error ("host unavailable"); "unknown error" for values not in the map. */
const char *rexec_strerror(int err);
/* The error's name without prefix ("HOST", "CONFIG"); "UNKNOWN" otherwise. */
const char *rexec_err_name(int err);
/* The process exit code SPEC.md documents for an error (0 for REXEC_OK). */
int rexec_err_exit_code(int err);

/* An error with a message that names the host, action, parameter or JSON path at fault.
 * Messages never hold a secret value: everything that reaches msg passed the redactor. */
typedef struct rexec_error {
    int code; /* a rexec_err */
    char msg[1024];
} rexec_error;

const char *rexec_version(void);

/* ---- Calls ---------------------------------------------------------------------------------- */

typedef struct rexec_ctx rexec_ctx;   /* a workspace, its pool of warm connections, its audit */
typedef struct rexec_call rexec_call; /* one action on one host */

typedef struct rexec_param {
    const char *name;
    const char *value; /* bytes; NUL inside is refused by validation */
    size_t value_len;
} rexec_param;

typedef struct rexec_request {
    const char *host;   /* an inventory name, never an address */
    const char *action; /* a catalog name */
    const rexec_param *params;
    size_t n_params;
    const unsigned char *stdin_data; /* NULL: the command's stdin is /dev/null */
    size_t stdin_len;
    const char *grant_id;  /* a grant from `rexec approve`, or NULL */
    double timeout_s;      /* 0: the action's or the workspace's default */
    const char *rationale; /* recorded in the audit log */
    const char *hypothesis_id;
    int eval_only;         /* the gate's decision only: nothing runs, no audit intent */
    int capture;           /* keep the redacted streams in the result (for --json / serve) */
} rexec_request;

/* What a call did. Strings are owned by the call and valid during on_done only. */
typedef struct rexec_result {
    const char *run_id;
    const char *host;
    const char *action;
    const char *decision;    /* "ALLOW", "DENY" or "REQUIRES_APPROVAL" */
    const char *reason;      /* a stable reason code, e.g. "ALLOW_LEVEL", "DENY_SCOPE" */
    const char *effective_risk; /* "L0".."L3" */
    int executed;            /* the command was started on the host */
    int exit_code;           /* the remote status (255 shown as 254); -1 when there is none */
    const char *signal;      /* "KILL", "TERM", ... when the command died of a signal, else NULL */
    int timed_out;           /* the action's timeout really fired */
    int truncated;           /* some redacted output went past max_output_bytes */
    uint64_t stdout_bytes;   /* redacted bytes produced (before the cap) */
    uint64_t stderr_bytes;
    const char *stdout_sha256; /* of the stored (redacted, capped) stdout */
    uint64_t duration_ms;
    const char *containment; /* "pid-namespace", "process-group", ... or NULL when not run */
    const char *evidence;    /* the evidence directory, or NULL */
    const char *challenge_id;/* set when decision is REQUIRES_APPROVAL */
    const char *rendered;    /* the rendered command, secrets by name only (eval) */
    int err;                 /* REXEC_OK or the rexec_err that ended the call */
    const char *error;       /* message for err, or NULL */
    int exit_status;         /* what a CLI should exit with for this call, per SPEC.md */
    const unsigned char *stdout_data; /* with capture: the stored stdout */
    size_t stdout_len;
    const unsigned char *stderr_data;
    size_t stderr_len;
} rexec_result;

enum { REXEC_STDOUT = 1, REXEC_STDERR = 2 };

typedef struct rexec_callbacks {
    /* Redacted output as it arrives (may be NULL). */
    void (*on_output)(void *ud, int stream, const void *data, size_t len);
    /* Called once when the call is over, whatever happened. */
    void (*on_done)(void *ud, const rexec_result *result);
    void *ud;
} rexec_callbacks;

/* Loads the workspace (rexec.json) and prepares a pool on loop. Returns 0 or a rexec_err with
 * err->msg naming the field at fault. The caller owns *out and releases it with rexec_ctx_close. */
int rexec_ctx_new(rexec_ctx **out, uv_loop_t *loop, const char *workspace_dir, rexec_error *err);

/* Cancels what is running, closes connections, then frees ctx; on_closed (may be NULL) runs
 * from the loop once everything is released. */
void rexec_ctx_close(rexec_ctx *ctx, void (*on_closed)(void *ud), void *ud);

/* Starts a call. On success returns 0, stores the call in *out (may be NULL) and will call
 * cb->on_done exactly once. On failure returns a rexec_err, fills err and calls nothing: this
 * happens only for errors that precede any decision (NOMEM, an unusable request pointer). */
int rexec_call_start(rexec_ctx *ctx, const rexec_request *req, const rexec_callbacks *cb,
                     rexec_call **out, rexec_error *err);

/* Asks a call to stop: the remote process tree is killed per the remote contract, then on_done
 * reports what happened. Safe to call more than once, and on a call that is already finishing,
 * up to its on_done: once on_done has returned the call is freed (from the loop), so forget the
 * pointer there (a later cancel is a use-after-free). A paused call is resumed by the cancel. */
void rexec_call_cancel(rexec_call *call);

/* Flow control for a consumer of on_output that cannot keep up (serve's slow client): while a
 * call is paused, rexec stops reading its output from the host, so the SSH channel's window
 * fills and the command on the VM waits in its write(). Nothing is dropped; on_output resumes
 * where it stopped. The call's own timeout still runs on the VM; rexec's backstop and keepalive
 * do not count the paused time against the connection. Same validity rule as cancel. */
void rexec_call_pause(rexec_call *call);
void rexec_call_resume(rexec_call *call);

/* The result as one JSON object (the fields of `rexec run --json`); stdout/stderr that are not
 * UTF-8 text come as stdout_base64/stderr_base64. malloc'd text, or NULL on ENOMEM. */
char *rexec_result_to_json(const rexec_result *r);

/* ---- Request documents --------------------------------------------------------------------- */

/* A `--request FILE` document (or a serve run object), parsed strictly: at most 64 KiB, UTF-8, no
 * duplicate or unknown keys, no non-finite numbers, no booleans where numbers are expected.
 * On success *view borrows from *doc (free the doc after the last use of view). Errors are
 * REXEC_EREQUEST with err->msg naming the JSON path. */
typedef struct rexec_request_doc rexec_request_doc;
int rexec_request_doc_parse(const char *text, size_t len, rexec_request_doc **doc,
                            rexec_request *view, rexec_error *err);
void rexec_request_doc_free(rexec_request_doc *doc);

/* ---- The workspace, for listings ------------------------------------------------------------ */

/* The inventory (what = "hosts"), the catalog ("actions") or the groups ("groups") as a JSON
 * array text (malloc'd, caller frees), for `rexec hosts`, `rexec actions` and serve. Never holds
 * a secret value: secrets appear by name. NULL on ENOMEM or an unknown what. */
char *rexec_ctx_list_json(const rexec_ctx *ctx, const char *what);

/* Expands TARGETS ("h1", "h1,h2", "@group") into host names. *hosts is a malloc'd array of
 * borrowed strings (valid while ctx lives); the caller frees the array. Unknown names are
 * REXEC_ECONFIG naming the host or group. */
int rexec_ctx_targets(const rexec_ctx *ctx, const char *targets, const char ***hosts, size_t *n,
                      rexec_error *err);

/* ---- Approvals ------------------------------------------------------------------------------ */

/* Shows an operator, at the controlling terminal (/dev/tty, never stdin), what a pending
 * challenge will run and asks for its confirmation code; on success the challenge becomes a
 * single-use grant. Blocks. Returns 0, or REXEC_EDENIED (no terminal, wrong code, unknown,
 * used or expired challenge) or REXEC_EAUDIT (approvals/ unusable), with
 * err->msg. */
int rexec_approve_tty(rexec_ctx *ctx, const char *challenge_id, rexec_error *err);

/* ---- serve ---------------------------------------------------------------------------------- */

/* A controller on a Unix socket speaking newline-delimited JSON (docs/serve-protocol.md), on
 * ctx's loop. The socket is created 0600; peers must be the same user (SO_PEERCRED). */
typedef struct rexec_server rexec_server;
typedef struct rexec_server_opts {
    const char *socket_path;
    double idle_timeout_s; /* close a client idle this long with nothing running; 0 = never */
} rexec_server_opts;

int rexec_server_start(rexec_ctx *ctx, const rexec_server_opts *opts, rexec_server **out,
                       rexec_error *err);
/* Stops accepting (the socket file goes at once), cancels calls in flight, sends their results,
 * closes the clients; on_stopped runs from the loop when all is released. */
void rexec_server_stop(rexec_server *s, void (*on_stopped)(void *ud), void *ud);

/* The workspace's fan-out default (limits.parallel). */
int rexec_ctx_parallel(const rexec_ctx *ctx);

/* ---- Checks --------------------------------------------------------------------------------- */

/* What `rexec check HOST` learns: the connection (host key, auth) works and the VM has what the
 * remote contract needs. Strings are valid during the callback only. */
typedef struct rexec_check_result {
    const char *host;
    int ok;                  /* connected, verified, and bash + timeout are present */
    int err;                 /* REXEC_OK or why not */
    const char *error;
    const char *facts;       /* "key=value" lines from the VM (bash, timeout, unshare, ...) */
    const char *containment; /* the strongest containment the VM offers */
    uint64_t duration_ms;
    int exit_status;         /* 0, 255 (unavailable) or 78 (unknown host) */
} rexec_check_result;

/* Checks host; on_done is called once from the loop. Returns 0 or ENOMEM (then calls nothing). */
int rexec_check_start(rexec_ctx *ctx, const char *host,
                      void (*on_done)(void *ud, const rexec_check_result *r), void *ud,
                      rexec_error *err);

#ifdef __cplusplus
}
#endif
#endif /* REXEC_H */
