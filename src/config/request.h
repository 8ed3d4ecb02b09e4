/* Run requests: the `--request FILE` document, and the run objects of the `serve` protocol.
 *
 *   {"action": "svc.restart", "params": {"unit": "nginx", "count": 3},
 *    "stdin": "text" | "stdin_base64": "AAEC", "rationale": "...", "hypothesis_id": "H-12",
 *    "host": "lab1", "timeout_s": 30}
 *
 * Strict (see jsonx.h): at most 64 KiB, UTF-8, no duplicate keys, no non-finite numbers, no
 * booleans where numbers are expected, unknown keys refused. Every failure is REXEC_EREQUEST
 * (exit 65) with err->msg naming the JSON path ("request: params.unit: expected a string or an
 * integer, got a boolean"), or REXEC_ENOMEM.
 *
 * Members:
 *   action        string, required: a catalog name (1..128 bytes of printable ASCII, no space)
 *   params        object, optional: name → string, or an integral number within ±2^53 (for int
 *                 parameters; it is kept as its canonical decimal text). Booleans, null, arrays,
 *                 objects and fractions are refused. Names are [A-Za-z0-9_.-]{1,64}. Whether a
 *                 name and a value suit the action is the gate's business (rx_param_validate).
 *   stdin         string: the command's stdin (UTF-8 text), or
 *   stdin_base64  string: the same as standard base64 (RFC 4648 alphabet, '=' padding, no
 *                 whitespace, canonical: unused bits zero). The two are mutually exclusive; an
 *                 empty string is an empty stdin, which differs from none (/dev/null).
 *   rationale     string, optional, at most 4096 bytes: recorded in the audit log
 *   hypothesis_id string, optional, 1..128 bytes of printable ASCII, no space
 *   host          string, optional: an inventory name (same rules as action)
 *   timeout_s     number, optional, 0 < timeout_s <= 604800 (a week) */
#ifndef RX_REQUEST_H
#define RX_REQUEST_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "rexec.h"

#define RX_REQUEST_MAX_LEN REXEC_REQUEST_MAX_BYTES
#define RX_REQUEST_NAME_MAX 128      /* action, host, hypothesis_id */
#define RX_REQUEST_PARAM_NAME_MAX 64
#define RX_REQUEST_RATIONALE_MAX 4096
#define RX_REQUEST_TIMEOUT_MAX 604800.0

typedef struct rx_request_param {
    char *name;
    char *value;     /* NUL-terminated, len bytes (JSON strings never hold NUL: \u0000 is refused) */
    size_t len;
    int from_number; /* the JSON value was a number: only an int parameter should accept it */
} rx_request_param;

/* Everything is owned by the request and released by rx_request_free. */
typedef struct rx_request {
    char *action;
    rx_request_param *params; /* in document order */
    size_t n_params;
    int has_stdin;  /* "stdin" or "stdin_base64" was given, possibly empty */
    rx_buf stdin_data; /* the bytes (any bytes, from base64); wiped on free */
    char *rationale;     /* NULL when absent */
    char *hypothesis_id; /* NULL when absent */
    char *host;          /* NULL when absent */
    double timeout_s;    /* 0 when absent */
    char *traceparent;   /* NULL when absent; a valid W3C traceparent (traceparent.h) */
} rx_request;

/* Parses text (len bytes; need not be NUL-terminated). On success returns 0 and fills *out;
 * on failure returns REXEC_EREQUEST or REXEC_ENOMEM with err->msg prefixed "request: ", and *out
 * is left empty (rx_request_free on it is harmless). */
int rx_request_parse(const char *text, size_t len, rx_request *out, rexec_error *err);

/* The same from an object that was already parsed strictly (by rx_json_parse_strict, e.g. as
 * part of a serve message). path names obj in messages ("" for a whole document). extra_keys
 * (NULL-terminated, may be NULL) are members this parser lets through for its caller, e.g.
 * serve's "op" or "grant_id". No prefix is added to err->msg. */
int rx_request_from_json(const cJSON *obj, const char *path, const char *const extra_keys[],
                         rx_request *out, rexec_error *err);

/* The same for a run or eval line of serve: obj's keys are held against rx_serve_keys for op
 * (serve's own keys pass, any other is refused naming every key op takes); then as above. */
int rx_request_from_serve(const cJSON *obj, const char *op, rx_request *out, rexec_error *err);

/* ---- serve's request keys: the one table ------------------------------------------------------
 * Every key of every op of `rexec serve` (docs/serve-protocol.md), with its type, the ops that
 * take it and what it is. It drives serve's unknown-key refusal (rx_serve_check_keys) and the
 * "unknown op" one; `rexec __interface --serve` prints it (rx_serve_keys_json), and
 * tests/install/t_serve_interface.sh holds docs/serve-protocol.md's key tables and the Python
 * client (python/rexec_client) against it. A new key goes here first. */
enum {
    RX_OP_RUN = 1u << 0,
    RX_OP_EVAL = 1u << 1,
    RX_OP_CHECK = 1u << 2,
    RX_OP_CANCEL = 1u << 3,
    RX_OP_STDIN = 1u << 4,
    RX_OP_PING = 1u << 5,
    RX_OP_HOSTS = 1u << 6,
    RX_OP_ACTIONS = 1u << 7,
    RX_OP_GROUPS = 1u << 8,
    RX_OP_RELOAD = 1u << 9,
    RX_OP_METRICS = 1u << 10,
    RX_OP_ALL = (1u << 11) - 1,
    RX_OP_DOC = 1u << 11, /* also a key of the `rexec run --request FILE` document */
};

typedef struct rx_serve_key {
    const char *name;
    const char *type; /* as docs/serve-protocol.md's tables write it */
    unsigned ops;     /* RX_OP_* bits */
    const char *help; /* one line */
} rx_serve_key;

extern const rx_serve_key rx_serve_keys[];    /* ends with a NULL name */
extern const char *const rx_serve_op_names[]; /* bit i of RX_OP_* is [i]; NULL-terminated */

/* The RX_OP_* bit of op, or 0 for a name that is not an op. */
unsigned rx_serve_op_bit(const char *op);

/* "a, b, c": every op (ops == 0) or every key of op (in table order), into buf. Returns buf. */
const char *rx_serve_keys_list(const char *op, char *buf, size_t cap);

/* 0, or REXEC_EREQUEST naming the first key of obj that op does not take and every key it does
 * ("param: unknown key of \"run\" (expected one of: op, id, targets, ...)"). */
int rx_serve_check_keys(const cJSON *obj, const char *op, rexec_error *err);

/* The table as JSON ({"ops":[...],"keys":[{"name","type","ops":[...],"help"}]}), malloc'd; NULL
 * when out of memory. */
char *rx_serve_keys_json(void);

/* Releases what r holds (wiping stdin) and leaves it empty; r may be NULL. */
void rx_request_free(rx_request *r);

/* Fills pub with borrowed views of r for rexec_call_start: host and action (host may be NULL),
 * params, stdin (NULL when has_stdin is 0), timeout, rationale and hypothesis_id; the other fields
 * are zeroed. *params is a new array the caller frees; pub points into r and *params, so both
 * must outlive every use of pub. Returns 0 or REXEC_ENOMEM. */
int rx_request_view(const rx_request *r, rexec_request *pub, rexec_param **params);

/* Bytes given as a pair of members of obj: KEY (UTF-8 text) or KEY_base64 (canonical standard
 * base64), mutually exclusive, both optional. Appends them to out (whose cap applies) and sets
 * *present when either was there. 0, REXEC_EREQUEST naming the member, or REXEC_ENOMEM. */
int rx_request_bytes(const cJSON *obj, const char *key, const char *path, rx_buf *out,
                     int *present, rexec_error *err);

#endif
