/* Internal parts of one call (include/rexec.h has the public API): the streams' sinks and the
 * records a finished call leaves (src/call_record.c). */
#ifndef RX_CALL_H
#define RX_CALL_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/evp.h>

#include "audit.h"
#include "buf.h"
#include "evidence.h"
#include "exec.h"
#include "gate.h"
#include "pool.h"
#include "recorder.h"
#include "redact.h"
#include "render.h"
#include "rexec.h"
#include "workspace.h"

/* One object the context's loop owns (a call, a check): rexec_ctx_close cancels each and frees
 * the context only once every one has released its memory (rx_ctx_untrack). */
typedef struct rx_ctx_obj {
    struct rx_ctx_obj *next;
    void (*cancel)(struct rx_ctx_obj *o); /* stop it; it reports and untracks itself later */
} rx_ctx_obj;

struct rexec_ctx {
    uv_loop_t *loop;
    rx_ws *ws;
    rx_pool *pool;
    rx_recorder *rec; /* the audit log and its writer, opened at the first call that needs it */
    /* secrets.c: every secret the workspace resolved at load, and its redactor; the sets of
     * earlier loads (serve reload) stay while calls that started under them are alive: their
     * streams and evidence point into them */
    struct rx_secret_set *sset;
    struct rx_secret_set **old_ssets;
    size_t n_old_ssets;
    rx_logger log;   /* rexec_ctx_set_log; the pool and its sessions point here */
    rx_ctx_obj *objs;   /* the registry: calls and checks whose memory is not released yet */
    size_t objs_alive;
    size_t objs_peak;   /* the most alive at once since they were last all gone (call.c) */
    int closing;
    void (*on_closed)(void *ud);
    void *closed_ud;
    /* reload.c: earlier workspaces (kept until close), the pool's host per ws->hosts[i], and
     * the "hosts" of rexec.json as loaded, to tell unchanged entries at the next reload */
    rx_ws **retired;
    size_t n_retired;
    const rx_host **pool_hosts;
    cJSON *hosts_doc;
    unsigned reloads;
    /* serve: checks a workspace before a reload puts it in place (rx_serve_ws_check), or NULL */
    int (*ws_check)(const rx_ws *nw, rexec_error *err);
    /* fanout.c: the challenge each fan-out request's hosts share, by batch_id */
    struct rx_fanouts *fanouts;
};

typedef struct rx_fanouts rx_fanouts;
/* fanout.c: the shared challenge slot of batch_id (NULL: none free, or no batch_id), held until
 * released; loop thread only. */
rx_gate_fanout *rx_ctx_fanout_take(rexec_ctx *ctx, const char *batch_id);
void rx_ctx_fanout_release(rexec_ctx *ctx, rx_gate_fanout *f);
void rx_ctx_fanouts_free(rexec_ctx *ctx);

/* One output stream: raw bytes -> redactor -> cap -> (evidence file, sha256, caller, and with
 * capture the result buffer). Once the cap is reached the stream is full: later bytes are only
 * counted, not redacted or copied. Nothing here grows with the output beyond the result cap. */
typedef struct call_stream {
    rexec_call *call;
    int id; /* REXEC_STDOUT or REXEC_STDERR */
    rx_redact_stream *rs;
    uint64_t cap;    /* max_output_bytes: kept in evidence and shown */
    uint64_t kept;   /* redacted bytes kept (<= cap) */
    rx_buf result;   /* with capture: the first limits.max_result_bytes of what was kept */
    int result_truncated;
    int full;        /* kept == cap: stop redacting */
    uint64_t total;  /* bytes produced: redacted up to the cap, raw after */
    int truncated;
    EVP_MD_CTX *sha;
    char sha_hex[65];
} call_stream;

/* A call's lifecycle (call.c: call_set checks each transition):
 *   GATE -> INTENT       allowed and rendered: the intent record is being written
 *   INTENT -> ON_HOST    the intent is durable: the pool has the call (c->job)
 *   GATE | INTENT | ON_HOST -> RECORD   it ended (refused, cancelled, failed, or the host
 *                        reported): evidence and the outcome or refusal are being written
 *   RECORD -> REPORTED   on_done was called; the memory goes from the loop
 * A cancel is kept on the call (cancelled) and acted on in whatever state it finds. */
typedef enum rx_call_state { CALL_GATE = 0, CALL_INTENT, CALL_ON_HOST, CALL_RECORD, CALL_REPORTED } rx_call_state;

struct rexec_call {
    rx_ctx_obj obj; /* first: the registry entry */
    rexec_ctx *ctx;
    rexec_callbacks cb;
    char run_id[RX_RUN_ID_LEN];
    char *host_name, *action_name, *grant_id, *rationale, *hypothesis_id, *batch_id;
    char *client_user;   /* serve: the peer who asked (rexec_request.client_user), or NULL */
    char *traceparent;   /* the caller's W3C traceparent (checked), or NULL */
    unsigned client_uid;
    rexec_param *given; /* the caller's parameters, copied */
    size_t n_given;
    rexec_param *values; /* resolved onto the action's parameters */
    unsigned char *stdin_data;
    size_t stdin_len;
    double timeout_s;
    int eval_only, capture;
    const rx_host *host;
    const rx_host *pool_host; /* the host the pool knows its connections by (reload.c) */
    const rx_action *action;
    rx_buf rendered;
    rx_decision dec;
    int decided;
    rx_buf *secret_values;
    rx_secret *secrets;
    size_t n_secrets;
    size_t n_redact_only; /* after n_secrets: redacted but never sent (the key's passphrase) */
    rx_redactor *redactor;
    call_stream out[2];
    struct rx_secret_set *sset; /* the context's set when the call started (kept alive) */
    rx_ws *ws_pin;              /* and its workspace (its catalog kept alive) */
    char nonce[RX_NONCE_LEN + 1];
    rx_pool_job *job;
    uint64_t t0_ns;
    uint64_t duration_ms;
    rx_call_state state;
    int intent_written, script_sent, cancelled, paused; /* script_sent: on the wire */
    int refused_written; /* the refusal record went out before the challenge file */
    rx_exec_result x;
    int ran;            /* the command started and the wrapper reported its end */
    int exit_code;      /* -1 when there is none */
    int timed_out;
    char signal[32];
    char containment[32];
    rexec_error err; /* err.code != 0: the call ended with this error */
    char *evidence;
    rx_evidence *ev; /* open from before the run until the call's end */
    rx_record_job rec_job; /* the record or evidence the recorder is writing for this call */
    int outcome_with_ev;   /* rec_job carries the outcome record behind the evidence */
    rx_buf script, code;   /* the two forms of the call, kept while its intent is written */
    int code_forks;        /* code may run in a fork of the runner's slot (rx_render_runner_forks) */
    int cap_killed;
    char *stdin_path; /* stdin streamed from this regular file (stdin_len is its size) */
    int stdin_fd;    /* stdin_path, open while it streams; -1 */
    uint64_t stdin_sent;
    EVP_MD_CTX *stdin_sha; /* of what was sent, checked against the gate's; NULL when the gate
                            * never hashed stdin_path (nothing binds its content) */
    char stdin_hex[65];    /* the gate's hash of stdin_path, when it asked for one */
    struct rx_put_state *put; /* a put: its stream's hash and trailer (call_put.c); NULL */
    int stdin_piped;       /* the command reads stdin as it arrives (the action's "stdin") */
    int stdin_stream;      /* stdin_path is a pipe (or FIFO, tty): sent in frames as read, its
                            * length unknown until its end (call_stdin.c) */
    int stdin_eof;         /* the stream's end was read */
    double stdin_last;     /* monotonic seconds of the stream's last byte (0: not yet pulled) */
    double stdin_timeout_s; /* the longest pause of the stream */
    atomic_int stdin_stop;  /* cancelled: a spool reading the stream on the gate's thread stops */
    rx_buf xfer_path;      /* a put or get action: the file's path for this call (transfer.c) */
    rx_buf shown_error, shown_rendered; /* redacted copies handed to the caller */
    rx_buf shown_host, shown_action;
    uv_timer_t defer;
    uv_work_t gate_work; /* the gate, off the loop, when it may block (call.c) */
    rx_gate_fanout *fanout; /* its fan-out's shared challenge (fanout.c), or NULL */
    int gate_rc;
    int delaying; /* defer runs on_start_delay: the call waits before its gate (a retry) */
};

/* call_record.c: the audit records and evidence of a call, and its public result.
 * rx_call_audit appends a record now (phase "intent", "outcome" or "refused"); the _submit
 * forms hand the record, or the evidence, to the context's recorder (recorder.h) and call done
 * on the loop once it is durable (c->rec_job; one at a time per call). A nonzero return: nothing
 * was submitted and done will not be called. The evidence job carries the outcome record too
 * (appended once the evidence is in place); rx_call_evidence_done takes the job's outcome into
 * c (the path, or the error when c has none) and returns 1 when the outcome record was part of
 * it (then its append's error, if any, is in c), 0 when the outcome is still to be written. */
int rx_call_audit(rexec_call *c, const char *phase, rexec_error *err);
/* Opens the context's audit log and recorder now if they are not open: before the gate runs on
 * the thread pool, which then only appends through the recorder (thread-safe). */
int rx_call_audit_ready(rexec_call *c, rexec_error *err);
/* The same for a record that is not a call's (serve's approval decisions). */
int rx_ctx_audit_ready(rexec_ctx *ctx, rexec_error *err);
int rx_call_audit_submit(rexec_call *c, const char *phase, void (*done)(rx_record_job *),
                         rexec_error *err);
int rx_call_evidence_submit(rexec_call *c, void (*done)(rx_record_job *), rexec_error *err);
int rx_call_evidence_done(rexec_call *c, rx_record_job *j);
void rx_call_outcome(rexec_call *c);

/* call_stdin.c: a stdin_path that is a pipe, FIFO, socket or character device. */
int rx_call_stdin_is_stream(mode_t mode);
/* The exec's pull for it (rx_exec_stdin_pull, framed): what the pipe has now, up to n bytes. */
long rx_call_stdin_stream_pull(void *ud, unsigned char *buf, size_t n, char *msg, size_t cap);
/* Reads the whole stream into an unlinked 0600 file in the workspace's evidence/ (as serve
 * spools a streamed stdin) and makes that the call's stdin: a regular file of known length and
 * hash, sent as --stdin FILE is. For the gate, when an approval or a grant binds the stdin. */
int rx_call_stdin_spool(rexec_call *c, rexec_error *err);
/* call_put.c: the trailer of a put's stream (docs/remote-contract.md, "Files: put and get").
 * A put action's stdin is the file's bytes, hashed as they are sent, then a trailer: the
 * SHA-256 of exactly those bytes as 64 lowercase hex and a newline. The VM writes the first
 * content_size bytes, hashes them on the way in, and renames the file into place only when the
 * trailer is its own hash (and content_sha256, when given, too). So `rexec put` needs no pass
 * over the file before it sends: the hash is taken on the one pass that sends it. */
#define RX_PUT_TRAILER_LEN 65 /* 64 hex + "\n" */

/* A put call gets its trailer state (c->put; nothing for any other action): the hash of the
 * bytes sent starts; an in-memory stdin is hashed now and gets its trailer appended. 0, or the
 * error. */
int rx_put_begin(rexec_call *c, rexec_error *err);
/* The bytes on the wire after stdin_len: the trailer's for a put, else 0. */
size_t rx_put_wire_extra(const rexec_call *c);
/* The file's bytes due before the trailer, of the n a pull may give (all n when not a put). */
size_t rx_put_file_room(const rexec_call *c, size_t n);
/* got bytes of the file were read into buf: hashed. */
void rx_put_hashed(rexec_call *c, const unsigned char *buf, size_t got);
/* A --stdin file is all read (stdin_sent == stdin_len): the hash is final, unless the file
 * changed while it was sent (its size, mtime or ctime moved since rx_put_begin's fstat):
 * then -1, with msg saying so (the trailer never goes: the VM discards what it got). */
long rx_put_file_done(rexec_call *c, char *msg, size_t cap);
/* The file's end was reached (a pipe's EOF): the hash is final. */
void rx_put_finish(rexec_call *c);
/* Copies the next trailer bytes into buf (at most n): how many, 0 once it is all sent. */
size_t rx_put_trailer_next(rexec_call *c, unsigned char *buf, size_t n);
/* The SHA-256 of the file as sent, once all of it was hashed; else NULL. */
const char *rx_put_sent_hex(const rexec_call *c);
void rx_put_free(rexec_call *c);

void rx_call_result(rexec_call *c, rexec_result *res);
/* Counts the reported call in the metrics (src/base/metrics.h): its decision, how it ended,
 * its duration; an eval by its decision only. */
void rx_call_metrics(const rexec_call *c, const rexec_result *res);
const char *rx_verdict_name(rx_verdict v);

/* call_record.c: a record of the context's own (a fan-out's plan or stop), appended now or
 * queued behind the calls' records. */
int rx_ctx_audit_record(rexec_ctx *ctx, cJSON *o, const char *client_user, unsigned client_uid,
                        int now, rexec_error *err);

/* The registry (call.c): track from creation; when the object goes, untrack it, free it, then
 * rx_ctx_released (a closing context may go then, so nothing of ctx is used after it). */
void rx_ctx_track(rexec_ctx *ctx, rx_ctx_obj *o, void (*cancel)(rx_ctx_obj *o));
void rx_ctx_untrack(rexec_ctx *ctx, rx_ctx_obj *o);
void rx_ctx_released(rexec_ctx *ctx);

/* redact_json.c: a copy of v with every string and every key passed through r (NULL on
 * ENOMEM; a null for a NULL v). */
cJSON *rx_redact_json(const rx_redactor *r, const cJSON *v);

/* reload.c */
void rx_ctx_reload_init(rexec_ctx *ctx);
void rx_ctx_reload_free(rexec_ctx *ctx);
/* The host object to hand the pool for h (of ctx->ws): an unchanged host keeps its connections. */
const rx_host *rx_ctx_pool_host(const rexec_ctx *ctx, const rx_host *h);

/* check.c: a check's result as the object of `check --json` and serve's "check" reply */
cJSON *rx_check_json(const rexec_check_result *r);

/* result_json.c */
cJSON *rx_result_json(const rexec_result *r);
/* The outcome fields (executed, exit_code, signal, timed_out, truncated, the byte counts,
 * stdout_sha256, duration_ms, containment, evidence) of r added to o: the one serialisation the
 * result, the audit record and evidence meta.json share. A NULL string is null. */
void rx_result_json_outcome(cJSON *o, const rexec_result *r);
void rx_json_add_bytes(cJSON *o, const char *key, const unsigned char *p, size_t n);
void rx_json_add_str(cJSON *o, const char *key, const char *v); /* null for NULL */
const char *rx_signal_from_status(int rc);

/* secrets.c: the workspace's redactor, built once per context. */
int rx_ctx_secrets_load(rexec_ctx *ctx, rexec_error *err);
/* A reload: the set of the new workspace nw becomes current; the old one is kept until close. */
int rx_ctx_secrets_reload(rexec_ctx *ctx, const rx_ws *nw, rexec_error *err);
void rx_ctx_secrets_free(rexec_ctx *ctx);
/* A redactor of the call's own when a handed secret's value changed since the load (else the
 * workspace's serves). Returns 0, REXEC_ENOMEM or REXEC_ECONFIG. */
int rx_call_build_redactor(rexec_call *c, rexec_error *err);
/* A call keeps the set it started under alive until it is released (a reload replaces the
 * context's set; the old one goes with its last call). */
void rx_call_secrets_pin(rexec_call *c);
void rx_call_secrets_unpin(rexec_call *c);
/* reload.c: the same for the workspace's catalog (its hosts stay until the context closes). */
void rx_call_ws_pin(rexec_call *c);
void rx_call_ws_unpin(rexec_call *c);
/* The workspace's redactor (every secret resolved at load). */
const rx_redactor *rx_ctx_redactor(const rexec_ctx *ctx);
/* What every output path and record of c goes through: its own redactor or the workspace's. */
const rx_redactor *rx_call_redactor(const rexec_call *c);

#ifdef REXEC_UNITTEST
/* call.c's output path, for tests/unit/test_cap.c: raw bytes of one stream in
 * (on_exec_data), redacted, capped, hashed and kept out. */
int streams_init(rexec_call *c, uint64_t cap);
void streams_finish(rexec_call *c);
void on_exec_data(void *ud, int stream, const unsigned char *data, size_t len);
#endif

#endif
