/* Internal parts of one call (include/rexec.h has the public API): the streams' sinks and the
 * records a finished call leaves (src/call_record.c). */
#ifndef RX_CALL_H
#define RX_CALL_H

#include <stdint.h>

#include <openssl/evp.h>

#include "audit.h"
#include "buf.h"
#include "evidence.h"
#include "exec.h"
#include "gate.h"
#include "pool.h"
#include "redact.h"
#include "render.h"
#include "rexec.h"
#include "workspace.h"

struct rexec_ctx {
    uv_loop_t *loop;
    rx_ws *ws;
    rx_pool *pool;
    rx_audit *audit; /* opened at the first call that needs it */
    rexec_call *calls; /* calls that have not reported yet */
    size_t calls_alive; /* calls whose memory is not released yet (their handle may be closing) */
    int closing;
    void (*on_closed)(void *ud);
    void *closed_ud;
};

/* One output stream: raw bytes -> redactor -> cap -> (capture, sha256, caller). */
typedef struct call_stream {
    rexec_call *call;
    int id; /* REXEC_STDOUT or REXEC_STDERR */
    rx_redact_stream *rs;
    rx_buf stored;   /* the redacted bytes up to the cap */
    uint64_t total;  /* redacted bytes produced, before the cap */
    int truncated;
    EVP_MD_CTX *sha;
    char sha_hex[65];
} call_stream;

struct rexec_call {
    rexec_ctx *ctx;
    rexec_call *next;
    rexec_callbacks cb;
    char run_id[RX_RUN_ID_LEN];
    char *host_name, *action_name, *grant_id, *rationale, *hypothesis_id;
    rexec_param *given; /* the caller's parameters, copied */
    size_t n_given;
    rexec_param *values; /* resolved onto the action's parameters */
    unsigned char *stdin_data;
    size_t stdin_len;
    double timeout_s;
    int eval_only, capture;
    const rx_host *host;
    const rx_action *action;
    rx_buf rendered;
    rx_decision dec;
    int decided;
    rx_buf *secret_values;
    rx_secret *secrets;
    size_t n_secrets;
    rx_redactor *redactor;
    call_stream out[2];
    char nonce[RX_NONCE_LEN + 1];
    rx_pool_job *job;
    uint64_t t0_ns;
    uint64_t duration_ms;
    int intent_written, executed, cancelled, finished, paused;
    rx_exec_result x;
    int ran;            /* the command started and the wrapper reported its end */
    int exit_code;      /* -1 when there is none */
    int timed_out;
    char signal[32];
    char containment[32];
    rexec_error err; /* err.code != 0: the call ended with this error */
    char *evidence;
    rx_buf shown_error, shown_rendered; /* redacted copies handed to the caller */
    uv_timer_t defer;
};

/* call_record.c: the audit records and evidence of a call, and its public result. */
int rx_call_audit(rexec_call *c, const char *phase, rexec_error *err);
void rx_call_write_evidence(rexec_call *c);
void rx_call_outcome(rexec_call *c);
void rx_call_result(rexec_call *c, rexec_result *res);
const char *rx_verdict_name(rx_verdict v);

/* result_json.c */
cJSON *rx_result_json(const rexec_result *r);
void rx_json_add_bytes(cJSON *o, const char *key, const unsigned char *p, size_t n);
void rx_json_add_str(cJSON *o, const char *key, const char *v); /* null for NULL */
const char *rx_signal_from_status(int rc);

#endif
