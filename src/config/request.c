/* Run requests, strictly: the document is checked by rx_json_parse_strict, then each member by
 * type, with the JSON path in every message. Nothing here knows the catalog: the gate validates
 * parameters against the action. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "err.h"
#include "jsonx.h"
#include "request.h"
#include "traceparent.h"

#define CODE REXEC_EREQUEST

#define RUN_EVAL (RX_OP_RUN | RX_OP_EVAL)
#define DOC (RUN_EVAL | RX_OP_DOC)

const char *const rx_serve_op_names[] = {"run",     "eval",      "check",   "cancel", "stdin",
                                         "ping",    "hosts",     "actions", "groups", "reload",
                                         "metrics", "approvals", "approve", "deny",   "watch",
                                         NULL};

const rx_serve_key rx_serve_keys[] = {
    {"op", "string", RX_OP_ALL, "the operation; required"},
    {"id", "any JSON value", RX_OP_ALL, "echoed in every reply to this request (null when absent)"},
    {"targets", "string", RUN_EVAL | RX_OP_CHECK, "a host, h1,h2 or @group"},
    {"action", "string", DOC, "the catalog action; required"},
    {"params", "object", DOC, "name -> string, or an integer"},
    {"stdin", "string", DOC, "the command's stdin as UTF-8 text"},
    {"stdin_base64", "string", DOC, "the command's stdin as canonical standard base64"},
    {"rationale", "string", DOC, "why, recorded in the audit log"},
    {"hypothesis_id", "string", DOC, "an id recorded in the audit log"},
    {"host", "string", DOC, "one host, when targets is absent"},
    {"timeout_s", "number", DOC, "shortens the action's timeout"},
    {"stdin_stream", "boolean", RUN_EVAL, "the stdin follows in stdin lines"},
    {"grant_id", "string", RUN_EVAL, "a grant from rexec approve"},
    {"stream", "boolean", RUN_EVAL, "send output lines as the output arrives"},
    {"parallel", "integer 1–4096", RUN_EVAL, "hosts of this request at once"},
    {"traceparent", "string", DOC, "a W3C traceparent, recorded with the call"},
    {"batch", "integer or string", RX_OP_RUN,
     "hosts per batch, N or \"P%\"; a batch starts when the one before has ended"},
    {"canary", "integer 0–1000000", RX_OP_RUN, "the first N hosts run first, as a batch of their own"},
    {"max_failures", "integer or string", RX_OP_RUN,
     "N or \"P%\": once more hosts than that have failed, no new host starts"},
    {"retry_unavailable", "integer 0–10", RX_OP_RUN,
     "tries again, up to N times, a host whose call provably never reached it"},
    {"wait_approval_s", "number", RUN_EVAL, "run: hold hosts that need approval until a decision"},
    {"challenge_id", "string", RX_OP_APPROVALS | RX_OP_APPROVE | RX_OP_DENY,
     "a challenge (ch- and 16 hex digits)"},
    {"comment", "string", RX_OP_APPROVE, "recorded with the approval"},
    {"reason", "string", RX_OP_DENY, "why it is denied: recorded, and told to the caller"},
    {"via", "string", RX_OP_APPROVE | RX_OP_DENY,
     "\"web\": decided on the approvers' web page (default \"socket\")"},
    {"target", "any JSON value", RX_OP_CANCEL | RX_OP_STDIN,
     "the id of the request this line is about; required"},
    {"data", "string", RX_OP_STDIN, "the next piece as UTF-8 text"},
    {"data_base64", "string", RX_OP_STDIN, "the next piece as canonical standard base64"},
    {"bytes", "integer 1–1048576", RX_OP_STDIN, "the next piece is this many raw bytes after the line"},
    {"eof", "boolean", RX_OP_STDIN, "this was the last piece"},
    {NULL, NULL, 0, NULL},
};

unsigned rx_serve_op_bit(const char *op)
{
    for (unsigned i = 0; op != NULL && rx_serve_op_names[i] != NULL; i++)
        if (strcmp(rx_serve_op_names[i], op) == 0)
            return 1u << i;
    return 0;
}

/* The keys whose ops meet mask, and extra, as "a, b, c". */
static const char *keys_list(unsigned mask, const char *const extra[], char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (const rx_serve_key *k = rx_serve_keys; k->name != NULL && at < cap; k++)
        if (k->ops & mask)
            at += (size_t)snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", k->name);
    for (size_t i = 0; extra != NULL && extra[i] != NULL && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", extra[i]);
    return buf;
}

const char *rx_serve_keys_list(const char *op, char *buf, size_t cap)
{
    size_t at = 0;
    if (cap == 0)
        return buf;
    if (op != NULL)
        return keys_list(rx_serve_op_bit(op), NULL, buf, cap);
    buf[0] = 0;
    for (size_t i = 0; rx_serve_op_names[i] != NULL && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", rx_serve_op_names[i]);
    return buf;
}

static int key_in(unsigned mask, const char *const extra[], const char *key)
{
    for (const rx_serve_key *k = rx_serve_keys; k->name != NULL; k++)
        if ((k->ops & mask) && strcmp(k->name, key) == 0)
            return 1;
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
        if (strcmp(extra[i], key) == 0)
            return 1;
    return 0;
}

/* The first key of obj not in mask's keys or extra: an error naming every allowed key. */
static int check_keys_of(const cJSON *obj, const char *path, unsigned mask,
                         const char *const extra[], const char *op, rexec_error *err)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, obj) {
        const char *key = c->string ? c->string : "";
        if (key_in(mask, extra, key))
            continue;
        char kp[RX_JSON_PATH_MAX], list[512], of[48] = "";
        if (op != NULL)
            snprintf(of, sizeof(of), " of \"%s\"", op);
        return rx_json_fail(err, CODE, rx_json_path_key(kp, sizeof(kp), path, key),
                            "unknown key%s (expected one of: %s)", of,
                            keys_list(mask, extra, list, sizeof(list)));
    }
    return 0;
}

int rx_serve_check_keys(const cJSON *obj, const char *op, rexec_error *err)
{
    unsigned bit = rx_serve_op_bit(op);
    int r = rx_json_want(obj, "", cJSON_Object, CODE, err);
    if (r == 0 && bit == 0)
        return rx_fail(err, CODE, "op: \"%s\" is not an op of serve's table", op ? op : "");
    return r != 0 ? r : check_keys_of(obj, "", bit, NULL, op, err);
}

char *rx_serve_keys_json(void)
{
    cJSON *root = cJSON_CreateObject(), *ops = cJSON_CreateArray(), *keys = cJSON_CreateArray();
    char *text = NULL;
    if (root == NULL || ops == NULL || keys == NULL) {
        cJSON_Delete(root);
        cJSON_Delete(ops);
        cJSON_Delete(keys);
        return NULL;
    }
    cJSON_AddItemToObject(root, "ops", ops);
    cJSON_AddItemToObject(root, "keys", keys);
    for (size_t i = 0; rx_serve_op_names[i] != NULL; i++)
        cJSON_AddItemToArray(ops, cJSON_CreateString(rx_serve_op_names[i]));
    for (const rx_serve_key *k = rx_serve_keys; k->name != NULL; k++) {
        cJSON *j = cJSON_CreateObject(), *in = cJSON_CreateArray();
        cJSON_AddItemToArray(keys, j);
        cJSON_AddStringToObject(j, "name", k->name);
        cJSON_AddStringToObject(j, "type", k->type);
        cJSON_AddItemToObject(j, "ops", in);
        for (size_t i = 0; rx_serve_op_names[i] != NULL; i++)
            if (k->ops & (1u << i))
                cJSON_AddItemToArray(in, cJSON_CreateString(rx_serve_op_names[i]));
        cJSON_AddBoolToObject(j, "request_file", (k->ops & RX_OP_DOC) != 0);
        cJSON_AddStringToObject(j, "help", k->help);
    }
    text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

static int dup_or_nomem(char **dst, const char *s, rexec_error *err)
{
    if ((*dst = strdup(s)) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    return 0;
}

/* A name (action, host, hypothesis id): printable ASCII without spaces, so it is safe to show
 * and to log, and cannot look like two words. */
static int get_name(const cJSON *obj, const char *key, const char *path, int required,
                    char **out, rexec_error *err)
{
    const char *s = NULL;
    char kp[RX_JSON_PATH_MAX];
    int r = rx_json_get_string(obj, key, path, required, &s, CODE, err);
    if (r != 0 || s == NULL)
        return r;
    rx_json_path_key(kp, sizeof(kp), path, key);
    size_t len = strlen(s);
    if (len == 0 || len > RX_REQUEST_NAME_MAX)
        return rx_json_fail(err, CODE, kp, "must be 1 to %d bytes", RX_REQUEST_NAME_MAX);
    for (size_t i = 0; i < len; i++)
        if (s[i] <= 0x20 || s[i] >= 0x7f)
            return rx_json_fail(err, CODE, kp, "only printable ASCII without spaces is allowed");
    return dup_or_nomem(out, s, err);
}

static int check_param_name(const char *name, const char *ppath, rexec_error *err)
{
    size_t len = strlen(name);
    if (len == 0 || len > RX_REQUEST_PARAM_NAME_MAX ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != len)
        return rx_json_fail(err, CODE, ppath, "parameter names are [A-Za-z0-9_.-]{1,%d}",
                            RX_REQUEST_PARAM_NAME_MAX);
    return 0;
}

/* A number is only for int parameters: it must be integral and exact in a double, and becomes
 * its canonical decimal text, the form rx_param_validate accepts. */
static int number_text(const cJSON *item, const char *ppath, char *buf, size_t cap,
                       rexec_error *err)
{
    double v = item->valuedouble;
    if (!isfinite(v) || v != floor(v))
        return rx_json_fail(err, CODE, ppath, "a number must be an integer (send other values as "
                                              "strings)");
    if (fabs(v) > (double)RX_JSON_MAX_SAFE_INT)
        return rx_json_fail(err, CODE, ppath, "integer beyond 2^53-1 (send it as a string)");
    snprintf(buf, cap, "%lld", (long long)v);
    return 0;
}

static int parse_param(const cJSON *item, const char *path, rx_request_param *p,
                       rexec_error *err)
{
    char pp[RX_JSON_PATH_MAX], num[32];
    const char *val;
    int r;
    rx_json_path_key(pp, sizeof(pp), path, item->string ? item->string : "");
    if ((r = check_param_name(item->string ? item->string : "", pp, err)) != 0)
        return r;
    if (cJSON_IsString(item)) {
        val = item->valuestring;
    } else if (cJSON_IsNumber(item)) {
        if ((r = number_text(item, pp, num, sizeof(num), err)) != 0)
            return r;
        val = num;
        p->from_number = 1;
    } else {
        return rx_json_fail(err, CODE, pp, "expected a string or an integer, got %s",
                            rx_json_type_name(item));
    }
    if ((r = dup_or_nomem(&p->name, item->string, err)) != 0)
        return r;
    p->len = strlen(val);
    return dup_or_nomem(&p->value, val, err);
}

static int parse_params(const cJSON *obj, const char *path, rx_request *r, rexec_error *err)
{
    const cJSON *po = NULL, *c;
    char pp[RX_JSON_PATH_MAX];
    int rc = rx_json_get_object(obj, "params", path, 0, &po, CODE, err);
    if (rc != 0 || po == NULL)
        return rc;
    int n = cJSON_GetArraySize(po);
    if (n == 0)
        return 0;
    if ((r->params = calloc((size_t)n, sizeof(*r->params))) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    rx_json_path_key(pp, sizeof(pp), path, "params");
    cJSON_ArrayForEach(c, po) {
        /* counted before parsing so that rx_request_free releases a half-filled entry */
        rx_request_param *p = &r->params[r->n_params++];
        if ((rc = parse_param(c, pp, p, err)) != 0)
            return rc;
    }
    return 0;
}

/* Standard base64, canonical only: the alphabet, '=' only as the final one or two bytes, a
 * length that is a multiple of 4, and zero unused bits (checked by re-encoding). */
static int b64_shape(const char *s, size_t len, const char *kp, rexec_error *err)
{
    size_t body = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
    size_t pad = strspn(s + body, "=");
    if (body + pad != len)
        return rx_json_fail(err, CODE, kp, "invalid base64 character at offset %zu", body + pad);
    if (len % 4 != 0 || pad > 2)
        return rx_json_fail(err, CODE, kp, "invalid base64 length or padding");
    return 0;
}

static int b64_decode(const char *s, rx_buf *out, const char *kp, rexec_error *err)
{
    size_t len = strlen(s), pad = 0;
    unsigned char *dec = NULL, *enc = NULL;
    int r = b64_shape(s, len, kp, err);
    if (r != 0 || len == 0)
        return r;
    while (pad < len && s[len - 1 - pad] == '=')
        pad++;
    dec = malloc(len / 4 * 3 + 1);
    enc = malloc(len + 1);
    if (dec == NULL || enc == NULL) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
        goto out;
    }
    int n = EVP_DecodeBlock(dec, (const unsigned char *)s, (int)len);
    if (n < 0 || (size_t)n < pad) {
        r = rx_json_fail(err, CODE, kp, "invalid base64");
        goto out;
    }
    n -= (int)pad; /* EVP_DecodeBlock counts the padding as zero bytes */
    if (EVP_EncodeBlock(enc, dec, n) != (int)len || memcmp(enc, s, len) != 0) {
        r = rx_json_fail(err, CODE, kp, "non-canonical base64 (unused bits must be zero)");
        goto out;
    }
    r = rx_buf_add(out, dec, (size_t)n);
    if (r != 0)
        r = rx_fail(err, r, "out of memory");
out:
    if (dec != NULL)
        OPENSSL_cleanse(dec, len / 4 * 3 + 1);
    free(dec);
    free(enc);
    return r;
}

int rx_request_bytes(const cJSON *obj, const char *key, const char *path, rx_buf *out,
                     int *present, rexec_error *err)
{
    const char *text = NULL, *b64 = NULL;
    char kp[RX_JSON_PATH_MAX], k64[RX_JSON_PATH_MAX];
    int rc;
    snprintf(k64, sizeof(k64), "%s_base64", key);
    *present = 0;
    if ((rc = rx_json_get_string(obj, key, path, 0, &text, CODE, err)) != 0 ||
        (rc = rx_json_get_string(obj, k64, path, 0, &b64, CODE, err)) != 0)
        return rc;
    if (text != NULL && b64 != NULL)
        return rx_json_fail(err, CODE, rx_json_path_key(kp, sizeof(kp), path, k64),
                            "%s and %s are mutually exclusive", key, k64);
    if (text == NULL && b64 == NULL)
        return 0;
    *present = 1;
    if (b64 != NULL)
        return b64_decode(b64, out, rx_json_path_key(kp, sizeof(kp), path, k64), err);
    int rc2 = rx_buf_adds(out, text);
    if (rc2 == REXEC_EREQUEST) /* the buffer's cap, not memory */
        return rx_json_fail(err, CODE, rx_json_path_key(kp, sizeof(kp), path, key),
                            "longer than %zu bytes", out->max);
    if (rc2 != 0)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    return 0;
}

static int parse_stdin(const cJSON *obj, const char *path, rx_request *r, rexec_error *err)
{
    return rx_request_bytes(obj, "stdin", path, &r->stdin_data, &r->has_stdin, err);
}

static int parse_traceparent(const cJSON *obj, const char *path, rx_request *r,
                             rexec_error *err)
{
    const char *tp = NULL;
    char kp[RX_JSON_PATH_MAX];
    int rc = rx_json_get_string(obj, "traceparent", path, 0, &tp, CODE, err);
    if (rc != 0 || tp == NULL)
        return rc;
    if (rx_traceparent_check(tp, rx_json_path_key(kp, sizeof(kp), path, "traceparent"), err))
        return CODE;
    return dup_or_nomem(&r->traceparent, tp, err);
}

static int parse_extras(const cJSON *obj, const char *path, rx_request *r, rexec_error *err)
{
    const char *rat = NULL;
    char kp[RX_JSON_PATH_MAX];
    int rc;
    if ((rc = get_name(obj, "hypothesis_id", path, 0, &r->hypothesis_id, err)) != 0 ||
        (rc = get_name(obj, "host", path, 0, &r->host, err)) != 0 ||
        (rc = rx_json_get_string(obj, "rationale", path, 0, &rat, CODE, err)) != 0)
        return rc;
    if (rat != NULL && strlen(rat) > RX_REQUEST_RATIONALE_MAX)
        return rx_json_fail(err, CODE, rx_json_path_key(kp, sizeof(kp), path, "rationale"),
                            "longer than %d bytes", RX_REQUEST_RATIONALE_MAX);
    if (rat != NULL && (rc = dup_or_nomem(&r->rationale, rat, err)) != 0)
        return rc;
    if ((rc = parse_traceparent(obj, path, r, err)) != 0)
        return rc;
    if ((rc = rx_json_get_number(obj, "timeout_s", path, 0, &r->timeout_s, CODE, err)) != 0)
        return rc;
    if (cJSON_GetObjectItemCaseSensitive(obj, "timeout_s") != NULL &&
        !(r->timeout_s > 0 && r->timeout_s <= RX_REQUEST_TIMEOUT_MAX))
        return rx_json_fail(err, CODE, rx_json_path_key(kp, sizeof(kp), path, "timeout_s"),
                            "must be greater than 0 and at most %.0f", RX_REQUEST_TIMEOUT_MAX);
    return 0;
}

/* Every member but the keys, which the caller checked. */
static int parse_members(const cJSON *obj, const char *path, rx_request *out, rexec_error *err)
{
    int r;
    if ((r = get_name(obj, "action", path, 1, &out->action, err)) != 0 ||
        (r = parse_params(obj, path, out, err)) != 0 ||
        (r = parse_stdin(obj, path, out, err)) != 0 ||
        (r = parse_extras(obj, path, out, err)) != 0)
        rx_request_free(out);
    return r;
}

int rx_request_from_json(const cJSON *obj, const char *path, const char *const extra_keys[],
                         rx_request *out, rexec_error *err)
{
    int r;
    path = path ? path : "";
    memset(out, 0, sizeof(*out));
    rx_buf_init(&out->stdin_data, RX_REQUEST_MAX_LEN);
    if ((r = rx_json_want(obj, path, cJSON_Object, CODE, err)) != 0 ||
        (r = check_keys_of(obj, path, RX_OP_DOC, extra_keys, NULL, err)) != 0)
        return r;
    return parse_members(obj, path, out, err);
}

int rx_request_from_serve(const cJSON *obj, const char *op, rx_request *out, rexec_error *err)
{
    int r;
    memset(out, 0, sizeof(*out));
    rx_buf_init(&out->stdin_data, RX_REQUEST_MAX_LEN);
    if ((r = rx_serve_check_keys(obj, op, err)) != 0)
        return r;
    return parse_members(obj, "", out, err);
}

int rx_request_parse(const char *text, size_t len, rx_request *out, rexec_error *err)
{
    cJSON *root = NULL;
    int r;
    memset(out, 0, sizeof(*out));
    rx_buf_init(&out->stdin_data, RX_REQUEST_MAX_LEN);
    if ((r = rx_json_parse_strict(text, len, RX_REQUEST_MAX_LEN, CODE, &root, err)) == 0)
        r = rx_request_from_json(root, "", NULL, out, err);
    if (r != 0)
        rx_fail_prefix(err, "request: ");
    if (root != NULL) {
        /* stdin text may be sensitive: wipe the tree's copy too */
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "stdin");
        if (cJSON_IsString(s))
            OPENSSL_cleanse(s->valuestring, strlen(s->valuestring));
        cJSON_Delete(root);
    }
    return r;
}

void rx_request_free(rx_request *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_params; i++) {
        free(r->params[i].name);
        free(r->params[i].value);
    }
    free(r->params);
    free(r->action);
    free(r->rationale);
    free(r->hypothesis_id);
    free(r->traceparent);
    free(r->host);
    rx_buf_free(&r->stdin_data);
    memset(r, 0, sizeof(*r));
    rx_buf_init(&r->stdin_data, RX_REQUEST_MAX_LEN);
}

int rx_request_view(const rx_request *r, rexec_request *pub, rexec_param **params)
{
    memset(pub, 0, sizeof(*pub));
    *params = NULL;
    if (r->n_params > 0 && (*params = calloc(r->n_params, sizeof(**params))) == NULL)
        return REXEC_ENOMEM;
    for (size_t i = 0; i < r->n_params; i++)
        (*params)[i] = (rexec_param){r->params[i].name, r->params[i].value, r->params[i].len};
    pub->host = r->host;
    pub->action = r->action;
    pub->params = *params;
    pub->n_params = r->n_params;
    if (r->has_stdin) {
        /* an empty stdin is still stdin, not /dev/null: point at the (empty) string */
        pub->stdin_data = r->stdin_data.data ? r->stdin_data.data : (const unsigned char *)"";
        pub->stdin_len = r->stdin_data.len;
    }
    pub->timeout_s = r->timeout_s;
    pub->rationale = r->rationale;
    pub->hypothesis_id = r->hypothesis_id;
    pub->traceparent = r->traceparent;
    return 0;
}
