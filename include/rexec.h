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
 *
 * Threads: a rexec_ctx belongs to the thread that runs its uv_loop_t. Every function taking a
 * ctx, a call, a server or a check, and every callback, runs on that thread; none may be called
 * from another thread (use a uv_async_t to hand work over). Independent contexts on separate
 * loops and threads do not share state. The pure helpers (rexec_strerror, rexec_err_name,
 * rexec_err_exit_code, rexec_version, rexec_result_to_json, rexec_result_not_started,
 * rexec_request_doc_parse/free) are safe from any thread. Internally a context appends its audit
 * records and commits its evidence on libuv's thread pool (uv_queue_work on its loop), so that
 * an fsync never stalls the loop; what that work reports comes back on the loop thread, and no
 * callback of this API ever runs elsewhere.
 *
 * Lifetimes:
 * - rexec_ctx: from rexec_ctx_new until rexec_ctx_close; memory is released from the loop,
 *   after every call's on_done and the optional on_closed. Closing from inside on_done is safe.
 * - rexec_call: from a successful rexec_call_start until on_done returns. rexec_call_cancel may
 *   be called on it until then (also from inside on_done, where it does nothing); after on_done
 *   has returned the handle is gone and must not be used.
 * - rexec_result and every string in it: valid during on_done only; copy what you keep.
 * - rexec_server: until its on_stopped callback; rexec_server_stop before rexec_ctx_close.
 */
#ifndef REXEC_H
#define REXEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <uv.h>

#include <rexec/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* REXEC_API marks what librexec.so exports: the library is built with -fvisibility=hidden, so
 * only what this header declares is visible (internal rx_* names are not). The pragma below makes
 * every declaration in this header visible too, so a function added without REXEC_API is still
 * exported; tests/install/t_install.sh checks that each one is. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define REXEC_API __attribute__((visibility("default")))
#pragma GCC visibility push(default)
#define REXEC_VISIBILITY_PUSHED_
#else
#define REXEC_API
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
    X(CANCELLED, 130, "cancelled")                                          \
    X(STOPPED, 76, "not started: the fan-out stopped at its failure threshold")

typedef enum rexec_err {
    REXEC_OK = 0,
#define REXEC_ERR_ENUM_(name, code, msg) REXEC_E##name,
    /* Far below -errno (libuv's UV_E* are -errno, down to UV_EOF = -4095), so a rexec_err and a
     * libuv or errno code can never be mistaken for each other. */
    REXEC_ERR_FIRST_ = -30000,
    REXEC_ERR_MAP(REXEC_ERR_ENUM_)
#undef REXEC_ERR_ENUM_
    REXEC_ERR_LAST_
} rexec_err;

/* A static string for an error ("host unavailable"); "unknown error" for values not in the map. */
REXEC_API const char *rexec_strerror(int err);
/* The error's name without prefix ("HOST", "CONFIG"); "UNKNOWN" otherwise. */
REXEC_API const char *rexec_err_name(int err);
/* The process exit code docs/exit-codes.md documents for an error (0 for REXEC_OK). */
REXEC_API int rexec_err_exit_code(int err);

/* An error with a message that names the host, action, parameter or JSON path at fault.
 * Messages never hold a secret value: everything that reaches msg passed the redactor. */
typedef struct rexec_error {
    int code; /* a rexec_err */
    char msg[1024];
} rexec_error;

/* Standard base64 (RFC 4648, with "=" padding), as serve's *_base64 fields carry bytes that are
 * not UTF-8 text. encode: n bytes into out (4 * ((n + 2) / 3) + 1 bytes, NUL added), returns the
 * characters written; decode: n characters (padded, no whitespace) into out (n / 4 * 3 bytes),
 * returns the bytes written, or -1 when in is not such base64. */
REXEC_API size_t rexec_base64_encode(char *out, const void *in, size_t n);
REXEC_API long rexec_base64_decode(void *out, const char *in, size_t n);

/* rexec's version at run time, "0.1.0"; REXEC_VERSION_STRING is the one compiled against. */
REXEC_API const char *rexec_version(void);
/* The versions of the libraries in use at run time, one "name version" per line:
 * "libssh2 1.10.0\nlibuv 1.44.2\nOpenSSL 3.0.15 3 Sep 2024\ncJSON 1.7.15" (static text). */
REXEC_API const char *rexec_dependency_versions(void);

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
    int capture;           /* keep the redacted streams in the result (for --json / serve), up to
                            * limits.max_result_bytes each */
    /* Instead of stdin_data: a regular file streamed into the command's stdin as the channel
     * takes it (flat memory whatever its size; the gate hashes it first). Or a pipe, FIFO or
     * character device ("/dev/stdin"): sent in frames as it is read, its length known only at
     * its end; spooled first (an unlinked 0600 file) only when an approval or grant binds its
     * sha256. docs/cli.md, "--stdin". */
    const char *stdin_path;
    /* Shared by the calls of one fan-out (rexec_batch_id_new), recorded in their audit records,
     * evidence and results; NULL for a call on its own. */
    const char *batch_id;
    /* Who asked, when it is not the process itself (serve: the peer's user name and uid), recorded
     * in the audit records as "client"; NULL for a local caller. */
    const char *client_user;
    unsigned client_uid;
    /* A stdin_path that is a pipe: the longest it may send nothing before its end (0: 60 s); a
     * longer pause ends the call (REXEC_EREQUEST; staged stdin: nothing ran). */
    double stdin_timeout_s;
    /* The caller's W3C traceparent ("00-<32 hex>-<16 hex>-<2 hex>"), recorded in the audit
     * records, the evidence's meta.json and the result; NULL for none. An invalid one ends the
     * call before anything (REXEC_EREQUEST, exit 65); rexec_traceparent_check tells first. */
    const char *traceparent;
    /* Wait this long before the call starts (a fan-out's retry, rexec_fanout_delay_ms); a cancel
     * during the wait ends it at once, as cancelled before it started. 0: start now. */
    unsigned start_delay_ms;
} rexec_request;

/* 0 when value is a valid W3C traceparent, else REXEC_EREQUEST with err->msg saying what is
 * wrong, prefixed with what ("--traceparent: the trace id must be ..."). */
REXEC_API int rexec_traceparent_check(const char *value, const char *what, rexec_error *err);

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
    uint64_t stdout_bytes;   /* bytes produced: redacted up to the cap, then counted raw */
    uint64_t stderr_bytes;
    const char *stdout_sha256; /* of the stored (redacted, capped) stdout */
    uint64_t duration_ms;
    const char *containment; /* "pid-namespace", "process-group", ... or NULL when not run */
    const char *evidence;    /* the evidence directory, or NULL */
    const char *challenge_id;/* set when decision is REQUIRES_APPROVAL */
    const char *rendered;    /* the rendered command, secrets by name only (eval) */
    int err;                 /* REXEC_OK or the rexec_err that ended the call */
    const char *error;       /* message for err, or NULL */
    int exit_status;         /* what a CLI should exit with for this call (docs/exit-codes.md) */
    const unsigned char *stdout_data; /* with capture: the stored stdout */
    size_t stdout_len;
    const unsigned char *stderr_data;
    size_t stderr_len;
    /* with capture: stdout_data/stderr_data hold less than the stream produced (the evidence
     * keeps up to max_output_bytes; the result at most limits.max_result_bytes) */
    int stdout_truncated_in_result, stderr_truncated_in_result;
    int cap_killed; /* the action's on_cap "kill" stopped the command when output passed the cap */
    const char *batch_id; /* the request's batch_id, or NULL */
    const char *traceparent; /* the request's traceparent, or NULL */
    /* Nothing of the call reached the host, so it provably did not start: the connection, the
     * host key check, the authentication or the channel's opening failed before the script was
     * sent (err is HOST, HOSTKEY, AUTH, TIMEDOUT or CONNLOST). Such a call may be tried again
     * (rexec_fanout_retry); any other may not. */
    int nothing_sent;
    /* Calls made for this host, retries included, when the front end counts them (a fan-out with
     * retries); 0: not counted. In the JSON as "tries" when not 0. */
    unsigned tries;
    /* A put (a file action's upload): the SHA-256 of the file as it was sent, once all of it
     * went (docs/remote-contract.md, "Files: put and get"); else NULL. In the JSON as
     * "put_sha256" when set (and in the audit record's transfer). */
    const char *put_sha256;
} rexec_result;

enum { REXEC_STDOUT = 1, REXEC_STDERR = 2 };

typedef struct rexec_callbacks {
    /* Redacted output as it arrives (may be NULL). */
    void (*on_output)(void *ud, int stream, const void *data, size_t len);
    /* Called once when the call is over, whatever happened. */
    void (*on_done)(void *ud, const rexec_result *result);
    void *ud;
    /* Called once the gate has decided, before the command starts or the call ends (may be
     * NULL): reason is the gate's code ("ALLOW_LEVEL", "REQUIRES_APPROVAL", ...) or NULL when the
     * call ended before a decision (an unknown action, a bad parameter); challenge_id is the
     * pending challenge of a REQUIRES_APPROVAL, else NULL. serve uses it to present a fan-out's
     * one challenge once every host's gate has decided. */
    void (*on_gate)(void *ud, const char *reason, const char *challenge_id);
} rexec_callbacks;

/* Loads the workspace (rexec.json) and prepares a pool on loop. Returns 0 or a rexec_err with
 * err->msg naming the field at fault. The caller owns *out and releases it with rexec_ctx_close. */
REXEC_API int rexec_ctx_new(rexec_ctx **out, uv_loop_t *loop, const char *workspace_dir, rexec_error *err);

/* Loads the workspace's rexec.json again. On success the new configuration serves every call
 * started from now on; calls in flight finish on the one they started with; hosts whose entry is
 * unchanged keep their warm connections (*kept_warm, may be NULL, says how many). On failure
 * (REXEC_ECONFIG naming the field) nothing changes. */
REXEC_API int rexec_ctx_reload(rexec_ctx *ctx, size_t *kept_warm, rexec_error *err);

/* Cancels what is running, closes connections, then frees ctx; on_closed (may be NULL) runs
 * from the loop once everything is released. */
REXEC_API void rexec_ctx_close(rexec_ctx *ctx, void (*on_closed)(void *ud), void *ud);

/* The workspace secrets that could not be resolved when ctx was created, one "secret NAME: why"
 * line each (names and sources, never values), or NULL when all were. Every resolved secret is
 * redacted from every call's output and records; an unresolved one cannot be. */
const char *rexec_ctx_unresolved_secrets(const rexec_ctx *ctx);

/* Starts a call. On success returns 0, stores the call in *out (may be NULL) and will call
 * cb->on_done exactly once. On failure returns a rexec_err, fills err and calls nothing: this
 * happens only for errors that precede any decision (NOMEM, an unusable request pointer). */
REXEC_API int rexec_call_start(rexec_ctx *ctx, const rexec_request *req, const rexec_callbacks *cb,
                     rexec_call **out, rexec_error *err);

/* Asks a call to stop: the remote process tree is killed per the remote contract, then on_done
 * reports what happened. Safe to call more than once, and on a call that is already finishing,
 * up to and inside its on_done; never after on_done has returned (see Lifetimes above). A
 * paused call is resumed by the cancel. */
REXEC_API void rexec_call_cancel(rexec_call *call);

/* A fresh batch id (32 random hex characters and a NUL) for the calls of one fan-out. 0, or -1
 * when no randomness is available. */
#define REXEC_BATCH_ID_SIZE 33
REXEC_API int rexec_batch_id_new(char out[REXEC_BATCH_ID_SIZE]);

/* The result of a call that never started on host: rexec_call_start failed (err from it), or a
 * fan-out or a client ended before it reached this host (REXEC_ECANCELLED). executed is 0,
 * exit_code -1, exit_status the error's. host, action and msg are borrowed, not copied. The one
 * way front ends build such a result, so it looks the same everywhere. */
REXEC_API rexec_result rexec_result_not_started(const char *host, const char *action, int err,
                                      const char *msg);

/* ---- Fan-out controls (docs/cli.md, "Batches, canary, failure threshold") --------------------- */

/* What `rexec run --batch/--canary/--max-failures/--retry-unavailable` and serve's "batch",
 * "canary", "max_failures", "retry_unavailable" ask for. NULL / 0 fields ask for nothing. */
typedef struct rexec_fanout_spec {
    const char *batch;        /* "N" or "P%" hosts per batch (P% of the hosts, rounded up) */
    long canary;              /* the first N hosts run first, as a batch of their own */
    const char *max_failures; /* "N" or "P%" (rounded down): once more hosts than that have
                               * failed, no new host starts */
    long retry_unavailable;   /* 0-10 more tries of a host whose call provably did not start */
} rexec_fanout_spec;

/* The plan of one fan-out and its progress. Pure state: it starts nothing, it answers. */
typedef struct rexec_fanout rexec_fanout;

/* Whether spec asks for anything (else a front end needs no rexec_fanout). */
REXEC_API int rexec_fanout_wanted(const rexec_fanout_spec *spec);
/* The plan for n hosts in their order. 0, or REXEC_EUSAGE naming the field (`--batch 0`, `0%`,
 * `101%`, a negative or malformed count, a canary larger than the host list), or REXEC_ENOMEM.
 * field_style 1 names the CLI's options (--max-failures), 0 serve's keys (max_failures). */
REXEC_API int rexec_fanout_new(const rexec_fanout_spec *spec, size_t n, int field_style,
                               rexec_fanout **out, rexec_error *err);
REXEC_API void rexec_fanout_free(rexec_fanout *f); /* NULL is fine */

enum { REXEC_FANOUT_START = 0, REXEC_FANOUT_WAIT = 1, REXEC_FANOUT_SKIP = 2 };
/* May host i (the next one in order) start? START (counted as started: tell rexec_fanout_done
 * how it ended), WAIT (it is in a later batch: ask again when a host is done), or SKIP (the
 * threshold was crossed: report rexec_fanout_skipped for it). f NULL: START. */
REXEC_API int rexec_fanout_next(rexec_fanout *f, size_t i);
/* Host i's call ended with res: 1 when it must be tried again (res->nothing_sent and tries
 * left, and the fan-out has not stopped): start the same call again, do not report res. */
REXEC_API int rexec_fanout_retry(rexec_fanout *f, size_t i, const rexec_result *res);
/* Host i is over with res (its last try). Returns 1 when this made the fan-out stop (the failed
 * hosts are now more than max_failures): the caller records the stop
 * (rexec_fanout_record_stop). */
REXEC_API int rexec_fanout_done(rexec_fanout *f, size_t i, const rexec_result *res);
/* How long host i's next call waits before it starts: 0 for its first, then 500 ms doubling
 * per retry up to 8 s (a host that is restarting gets time to come back). */
REXEC_API unsigned rexec_fanout_delay_ms(const rexec_fanout *f, size_t i);
/* The calls started for host i; 0 when f is NULL or asks for no retries (nobody counts then). */
REXEC_API unsigned rexec_fanout_tries(const rexec_fanout *f, size_t i);
/* The result of host i, not started because the fan-out stopped: executed 0, reason
 * STOPPED_FAILURE_THRESHOLD, err REXEC_ESTOPPED, exit_status 76. Its error is kept in f until
 * the next call. */
REXEC_API rexec_result rexec_fanout_skipped(rexec_fanout *f, size_t i, const char *host,
                                            const char *action);
typedef struct rexec_fanout_progress {
    size_t hosts, batch, batches, done, failed, skipped; /* batch: 1-based */
    int stopped;
} rexec_fanout_progress;
REXEC_API void rexec_fanout_get_progress(const rexec_fanout *f, rexec_fanout_progress *p);
/* The status of the whole fan-out: 76 when it stopped at its threshold (unless worst is 130:
 * interrupted), else worst (the largest of the hosts'). */
REXEC_API int rexec_fanout_exit_status(const rexec_fanout *f, int worst);

/* The audit records of a fan-out (docs/audit.md, "Fan-out records"), under batch_id: its plan
 * ("batch_plan": the hosts of each batch, the threshold, the retries), appended before any of
 * its calls (an error, REXEC_EAUDIT, means nothing may start); and its stop ("batch_stop": the
 * failed hosts, those never started), queued behind the calls' records. hosts: the n names in
 * order; action: the request's; client_user NULL for the process itself. */
REXEC_API int rexec_fanout_record_plan(rexec_ctx *ctx, const rexec_fanout *f,
                                       const char *const *hosts, const char *action,
                                       const char *batch_id, const char *client_user,
                                       unsigned client_uid, rexec_error *err);
REXEC_API int rexec_fanout_record_stop(rexec_ctx *ctx, const rexec_fanout *f,
                                       const char *const *hosts, const char *action,
                                       const char *batch_id, const char *client_user,
                                       unsigned client_uid, rexec_error *err);

/* Flow control for a consumer of on_output that cannot keep up (serve's slow client): while a
 * call is paused, rexec stops reading its output from the host, so the SSH channel's window
 * fills and the command on the VM waits in its write(). Nothing is dropped; on_output resumes
 * where it stopped. The call's own timeout still runs on the VM; rexec's backstop and keepalive
 * do not count the paused time against the connection. Same validity rule as cancel. */
REXEC_API void rexec_call_pause(rexec_call *call);
REXEC_API void rexec_call_resume(rexec_call *call);

/* The result as one JSON object (the fields of `rexec run --json`); stdout/stderr that are not
 * UTF-8 text come as stdout_base64/stderr_base64. malloc'd text, or NULL on ENOMEM. */
REXEC_API char *rexec_result_to_json(const rexec_result *r);

/* ---- Logging ------------------------------------------------------------------------------- */

/* Where ctx's diagnostic lines go (after curl's CURLOPT_DEBUGFUNCTION): connection and channel
 * state transitions at REXEC_LOG_DEBUG, conditions worth an operator's eye at REXEC_LOG_WARN.
 * msg is one line without a newline, valid during the call; it never holds a secret value.
 * The library itself never reads the environment to decide this and never writes to stderr.
 * fn NULL (the default) discards everything. Set it before starting calls; called from the
 * loop thread only. */
enum { REXEC_LOG_DEBUG = 0, REXEC_LOG_INFO = 1, REXEC_LOG_WARN = 2 };
typedef void (*rexec_log_fn)(void *ud, int level, const char *msg);
REXEC_API void rexec_ctx_set_log(rexec_ctx *ctx, rexec_log_fn fn, void *ud);

/* ---- Request documents --------------------------------------------------------------------- */

/* The largest request document (`--request FILE`, a serve run object) in bytes. */
#define REXEC_REQUEST_MAX_BYTES (64 * 1024)

/* A `--request FILE` document (or a serve run object), parsed strictly: at most 64 KiB, UTF-8, no
 * duplicate or unknown keys, no non-finite numbers, no booleans where numbers are expected.
 * On success *view borrows from *doc (free the doc after the last use of view). Errors are
 * REXEC_EREQUEST with err->msg naming the JSON path. */
typedef struct rexec_request_doc rexec_request_doc;
REXEC_API int rexec_request_doc_parse(const char *text, size_t len, rexec_request_doc **doc,
                            rexec_request *view, rexec_error *err);
REXEC_API void rexec_request_doc_free(rexec_request_doc *doc);

/* ---- The workspace, for listings ------------------------------------------------------------ */

/* The inventory (what = "hosts"), the catalog ("actions") or the groups ("groups") as a JSON
 * array text (malloc'd, caller frees), for `rexec hosts`, `rexec actions` and serve. Never holds
 * a secret value: secrets appear by name. NULL on ENOMEM or an unknown what. */
REXEC_API char *rexec_ctx_list_json(const rexec_ctx *ctx, const char *what);

/* `rexec hosts import-ssh-config [PATTERN]`: inventory entries ({"ssh_alias": NAME}) for the
 * concrete Host names of the ssh config ($REXEC_SSH_CONFIG, else ~/.ssh/config) matching the
 * glob PATTERN (NULL: all), each resolved by `ssh -G`. *text: JSON members to paste under
 * "hosts"; *notes: names skipped and why. Both malloc'd. Returns 0 or REXEC_ECONFIG. */
int rexec_ssh_config_import(const char *pattern, char **text, char **notes, rexec_error *err);

/* Expands TARGETS ("h1", "h1,h2", "@group") into host names. *hosts is a malloc'd array of
 * borrowed strings (valid while ctx lives); the caller frees the array. Unknown names are
 * REXEC_ECONFIG naming the host or group, redacted (TARGETS may hold anything). */
REXEC_API int rexec_ctx_targets(const rexec_ctx *ctx, const char *targets, const char ***hosts, size_t *n,
                      rexec_error *err);

/* ---- Redacting a front end's own text ------------------------------------------------------ */

/* What a front end prints that did not come out of the library already redacted (an argument it
 * echoes in a message, a field of a serve reply it shows) goes through one of these first
 * (docs/redaction.md, "Messages"). Each returns text (len bytes) with every secret the workspace
 * resolved, in every form docs/redaction.md lists, and every secret shape replaced by its marker:
 * malloc'd, NUL-terminated, *out_len (may be NULL) its length without the NUL; NULL on ENOMEM. */

/* With ctx's redactor (the secrets resolved when ctx was created or last reloaded); ctx NULL:
 * the secret shapes only. */
REXEC_API char *rexec_ctx_redact(const rexec_ctx *ctx, const char *text, size_t len,
                                 size_t *out_len);

/* The same without a context (before one is created, or for commands that need none): loads
 * workspace_dir's rexec.json and every secret that resolves, opens nothing else. 0, or the
 * loader's REXEC_ECONFIG (the workspace does not load: no secret is known then) / REXEC_ENOMEM.
 * workspace_dir NULL: a redactor of the shapes only. rexec_redact with r NULL redacts the shapes
 * only too, building them for that one call. */
typedef struct rexec_redactor rexec_redactor;
REXEC_API int rexec_redactor_open(const char *workspace_dir, rexec_redactor **out,
                                  rexec_error *err);
REXEC_API char *rexec_redact(const rexec_redactor *r, const char *text, size_t len,
                             size_t *out_len);
REXEC_API void rexec_redactor_close(rexec_redactor *r); /* wipes the values; NULL is fine */

/* `rexec actions --lint`: reads workspace_dir's rexec.json and checks every action's command
 * template as the loader does (docs/workspace.md, "Where a placeholder may stand"), going on past
 * the first problem. *json (malloc'd): {"actions": how many were read, "loads": true|false,
 * "error": the loader's message or null, "problems": [{"action", "line", "column" (1-based; null when the template could be read
 * but a {name} names no parameter), "why", "error" (the loader's message for it)}, ...]}. Reads
 * no secret. 0, or REXEC_ENOMEM. */
REXEC_API int rexec_catalog_lint(const char *workspace_dir, char **json, rexec_error *err);

/* ---- Approvals ------------------------------------------------------------------------------ */

/* Shows an operator, at the controlling terminal (/dev/tty, never stdin), what a pending
 * challenge will run and asks for its confirmation code; on success the challenge becomes a
 * single-use grant. Blocks. Returns 0, or REXEC_EDENIED (no terminal, wrong code, unknown,
 * used or expired challenge) or REXEC_EAUDIT (approvals/ unusable), with
 * err->msg. */
REXEC_API int rexec_approve_tty(rexec_ctx *ctx, const char *challenge_id, rexec_error *err);

/* The operator's side without a context: these load workspace_dir/rexec.json (REXEC_ECONFIG when
 * it is invalid) but read no secret and open no connection, so an operator can approve and list
 * while a secret of the workspace is missing. */

/* One challenge or grant in approvals/, as `rexec approvals` lists it. Every string belongs to
 * the list it came in (rexec_approvals_free). Times are UTC, "2026-12-02T10:15:00Z", NULL when not
 * set; strings read from approvals/ are as stored (a terminal printer must escape them). */
typedef struct rexec_approval {
    const char *id;
    const char *state; /* "pending", "approved", "used", or "expired" (pending or approved, past) */
    const char *host, *action, *risk;
    const char *created, *expires, *approved_at, *used_at;
    const char *approved_by; /* NULL until approved */
    const char *request_hash;
} rexec_approval;

/* Pending challenges and unused grants (expired ones included), and used grants too when
 * include_used, oldest first. 0 with *out (free with rexec_approvals_free; NULL when *n is 0),
 * REXEC_ECONFIG, REXEC_EAUDIT (approvals/ unreadable) or REXEC_ENOMEM. */
REXEC_API int rexec_approvals_list(const char *workspace_dir, int include_used,
                                   rexec_approval **out, size_t *n, rexec_error *err);
/* One approval by id: 0 with *out (a list of one), REXEC_EDENIED when the id is malformed or
 * names nothing, REXEC_ECONFIG, REXEC_EAUDIT. */
REXEC_API int rexec_approvals_get(const char *workspace_dir, const char *id, rexec_approval **out,
                                  rexec_error *err);
REXEC_API void rexec_approvals_free(rexec_approval *list, size_t n); /* NULL is fine */
/* Removes expired challenges and grants, and used grants older than the grant TTL; *removed (may
 * be NULL) is how many. 0, REXEC_ECONFIG or REXEC_EAUDIT. */
REXEC_API int rexec_approvals_prune(const char *workspace_dir, size_t *removed, rexec_error *err);
/* rexec_approve_tty for the workspace at workspace_dir. */
REXEC_API int rexec_approve_tty_at(const char *workspace_dir, const char *challenge_id,
                                   rexec_error *err);
/* Denies pending challenge_id for the operator running this process (`rexec deny`): it can
 * never be approved or used; reason (may be NULL) is recorded in the challenge and the audit
 * log and told to a caller waiting on it through serve. 0, REXEC_EDENIED (unknown, expired,
 * used, already decided), REXEC_ECONFIG, REXEC_EAUDIT. */
REXEC_API int rexec_approvals_deny(const char *workspace_dir, const char *challenge_id,
                                   const char *reason, rexec_error *err);

/* ---- The audit log, for `rexec audit` and other readers (docs/audit.md) ----------------- */

/* rexec_audit_verify's statuses (also `rexec audit verify`'s exit codes). */
enum {
    REXEC_AUDIT_INTACT = 0,     /* every line whole, hashed and chained; every intent closed */
    REXEC_AUDIT_TAMPERED = 1,   /* an edited, removed, reordered, truncated or foreign line */
    REXEC_AUDIT_INCOMPLETE = 2, /* the chain is intact but an intent has no outcome */
};
#define REXEC_AUDIT_REPORT_JSON 1 /* flags: the report is one JSON object instead of text */

/* Checks the workspace's audit files (rotated ones oldest first, then audit.log) as one chain,
 * keyed with key_file when it is not NULL. Writes what it finds to report (may be NULL).
 * Returns a REXEC_AUDIT_* status, or a negative rexec_err (REXEC_EAUDIT: a file cannot be read;
 * REXEC_ECONFIG: the key is refused) with err->msg. Does not block writers for long. */
int rexec_audit_verify(const char *workspace_dir, const char *key_file, int flags, FILE *report,
                       rexec_error *err);

/* The same, and the chain must still hold head_json (a head `rexec audit head` printed and that
 * was kept elsewhere): a log cut after it, a removed current or newest rotated file, or an
 * older copy put back make it REXEC_AUDIT_TAMPERED. REXEC_EUSAGE when head_json is not a head.
 * head_json NULL is rexec_audit_verify. */
int rexec_audit_verify_head(const char *workspace_dir, const char *key_file,
                            const char *head_json, int flags, FILE *report, rexec_error *err);

/* The audit log's head, {"seq","hash","ts","keyed","mac"} on one line (malloc'd in *out), to
 * ship elsewhere: audit/head.json, after checking it against the log's end and (with
 * key_file) its mac. reset first rewrites head.json from the log's end and chains a
 * "head_reset" record, for after an operator has seen why they disagreed. 0 or REXEC_EAUDIT
 * (they disagree, saying how) / REXEC_ECONFIG (the key). */
int rexec_audit_head(const char *workspace_dir, const char *key_file, int reset, char **out,
                     rexec_error *err);

/* The HMAC key file rexec.json names ("audit": {"key_file": "/abs/path"}), read on its own so
 * that verifying works whatever else the file holds. *key_file is malloc'd (caller frees) or
 * NULL when there is none. Returns 0 or REXEC_ECONFIG / REXEC_ENOMEM. */
int rexec_audit_key_file(const char *workspace_dir, char **key_file, rexec_error *err);

/* What rexec_audit_show selects. */
typedef struct rexec_audit_query {
    const char *run_id; /* only this run's records, or NULL */
    time_t since;       /* only records at or after this time, when has_since */
    int has_since;
    int json;           /* print the stored JSON lines unchanged instead of a table */
    const char *host;   /* only records of this host, or NULL */
    const char *action; /* only records of this action, or NULL */
} rexec_audit_query;

/* Prints the records q selects, oldest first, to out. Does not verify. Returns 0 or
 * REXEC_EAUDIT naming the file that cannot be read. */
int rexec_audit_show(const char *workspace_dir, const rexec_audit_query *q, FILE *out,
                     rexec_error *err);

/* Parses a TIME: ISO-8601 ("2026-12-02T10:00:00Z", "2026-12-02T10:00:00+01:00", "2026-12-02")
 * or an age before now ("90s", "30m", "1h", "2d", "1w"). Returns 0 or -1. */
int rexec_audit_parse_time(const char *s, time_t now, time_t *out);

/* Retention (docs/audit.md, "Retention"). rexec_audit_prune removes the rotated audit files
 * older than before (whole files, oldest first, never audit.log, never an intent without its
 * outcome) after chaining a "prune" record and writing audit/anchor.json, from which
 * rexec_audit_verify checks the rest. *files / *records (may be NULL) say what went. */
int rexec_audit_prune(const char *workspace_dir, const char *key_file, time_t before,
                      size_t *files, size_t *records, rexec_error *err);
/* `rexec audit recover` (docs/audit.md, "Recovering after a crash"): an "abandoned" record for
 * each intent whose writer process is gone; with REXEC_AUDIT_RECOVER_UNREGISTERED also for
 * intents that name no writer. Reports each to report. Returns 0 (none left open), 2 (some
 * kept: their writer runs), 1 (the log does not verify; err says so) or a negative rexec_err. */
#define REXEC_AUDIT_RECOVER_UNREGISTERED 2 /* with REXEC_AUDIT_REPORT_JSON */
int rexec_audit_recover(const char *workspace_dir, const char *key_file, int flags,
                        FILE *report, rexec_error *err);
/* Removes evidence/<run_id>/ of runs older than before, except the newest keep. */
int rexec_evidence_prune(const char *workspace_dir, time_t before, size_t keep, size_t *removed,
                         size_t *kept, uint64_t *bytes_freed, rexec_error *err);

/* ---- serve ---------------------------------------------------------------------------------- */

/* A controller on a Unix socket speaking newline-delimited JSON (docs/serve-protocol.md), on
 * ctx's loop. The socket is created 0600 unless rexec.json's serve.clients admits other users
 * or groups (serve.socket_mode / socket_group); every peer is checked by uid (SO_PEERCRED).
 * Started by systemd socket activation (LISTEN_PID / LISTEN_FDS), it takes the socket it is
 * passed instead, and socket_path may be NULL. */
typedef struct rexec_server rexec_server;
/* serve's own log: one structured line per request and per call (docs/serve-protocol.md,
 * "Logs"). AUTO: the journal when stderr is systemd's journal stream, else JSON lines. */
enum {
    REXEC_SERVE_LOG_AUTO = 0,
    REXEC_SERVE_LOG_OFF = 1,
    REXEC_SERVE_LOG_JSON = 2,    /* one JSON object a line on stderr */
    REXEC_SERVE_LOG_JOURNAL = 3, /* native journald fields (REXEC_*) */
};
typedef struct rexec_server_opts {
    const char *socket_path;
    double idle_timeout_s; /* close a client idle this long with nothing running; 0 = never */
    int log;               /* REXEC_SERVE_LOG_* */
    double stdin_timeout_s; /* the longest pause in a streamed stdin ("stdin_stream"); 0 = 60 */
    /* Prometheus text (docs/metrics.md) written to this file every metrics_interval_s (0 = 15)
     * and when serve stops, replaced whole (node_exporter's textfile collector); NULL: none. */
    const char *metrics_file;
    double metrics_interval_s;
} rexec_server_opts;

REXEC_API int rexec_server_start(rexec_ctx *ctx, const rexec_server_opts *opts, rexec_server **out,
                       rexec_error *err);
/* Stops accepting (the socket file goes at once), cancels calls in flight, sends their results,
 * closes the clients; on_stopped runs from the loop when all is released. */
REXEC_API void rexec_server_stop(rexec_server *s, void (*on_stopped)(void *ud), void *ud);
/* serve's request keys per op, the table its unknown-key refusal is made from, as JSON:
 * {"ops":[...],"keys":[{"name","type","ops":[...],"request_file","help"}]} (`rexec __interface
 * --serve`). malloc'd (free it); NULL when out of memory. */
REXEC_API char *rexec_serve_keys_json(void);

/* The workspace's fan-out default (limits.parallel). */
REXEC_API int rexec_ctx_parallel(const rexec_ctx *ctx);

/* ---- Checks --------------------------------------------------------------------------------- */

/* What `rexec check HOST` learns: the connection (host key, auth) works and the VM has what the
 * remote contract needs. Strings are valid during the callback only. */
typedef struct rexec_check_result {
    const char *host;
    int ok;                  /* connected, verified, and bash + timeout are present */
    int err;                 /* REXEC_OK or why not */
    const char *error;
    const char *facts;       /* "key=value" lines from the VM (bash, timeout, unshare, ...) */
    const char *containment; /* the strongest containment the VM offers, NULL when unknown */
    uint64_t duration_ms;
    int exit_status;         /* 0, 255 (unavailable) or 78 (unknown host) */
    const char *warning;     /* e.g. the evidence volume is nearly full; NULL when none */
} rexec_check_result;

/* The result as one JSON object (`rexec check --json`, serve's "check" reply): host ok
 * containment facts (an object) duration_ms warning error exit_status. malloc'd, NULL on ENOMEM. */
REXEC_API char *rexec_check_result_to_json(const rexec_check_result *r);

/* Checks host; on_done is called once from the loop. Returns 0 or ENOMEM (then calls nothing). */
REXEC_API int rexec_check_start(rexec_ctx *ctx, const char *host,
                      void (*on_done)(void *ud, const rexec_check_result *r), void *ud,
                      rexec_error *err);

#ifdef REXEC_VISIBILITY_PUSHED_
#pragma GCC visibility pop
#undef REXEC_VISIBILITY_PUSHED_
#endif

#ifdef __cplusplus
}
#endif
#endif /* REXEC_H */
