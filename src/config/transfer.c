/* File actions: "put": {"path", "mode", "owner"} and "get": {"path"} in the catalog. The loader
 * turns each into an action like any other (gate, approvals, audit, evidence are unchanged): a
 * fixed command that calls the function of remote/put.sh or remote/get.sh (which the renderer
 * puts before it), with the path template's placeholders bound as data like every parameter.
 * The operator's path template may hold only plain path characters, so its literal text means
 * nothing to the shell inside "...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "jsonx.h"
#include "template.h"
#include "transfer.h"

#define C REXEC_ECONFIG
#define XFER_PATH_MAX 4096

const char *rx_transfer_name(rx_transfer t)
{
    return t == RX_XFER_PUT ? "put" : t == RX_XFER_GET ? "get" : NULL;
}

int rx_ws_is_transfer(const cJSON *o)
{
    return cJSON_IsObject(o) && (cJSON_GetObjectItemCaseSensitive(o, "put") != NULL ||
                                 cJSON_GetObjectItemCaseSensitive(o, "get") != NULL);
}

static int path_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("._/@%+=:,~-", c) != NULL;
}

struct tmpl_check {
    const rx_action *a;
    int bad_char, unknown;
    size_t n_text;
};

static int tmpl_text(void *ctx, const char *text, size_t n)
{
    struct tmpl_check *t = ctx;
    for (size_t i = 0; i < n; i++)
        if (!path_char_ok((unsigned char)text[i]))
            t->bad_char = 1;
    t->n_text += n;
    return 0;
}

static int tmpl_param(void *ctx, const char *name, size_t n)
{
    struct tmpl_check *t = ctx;
    if (rx_ws_param_index(t->a, name, n) < 0)
        t->unknown = 1;
    return 0;
}

/* The path template: absolute, plain path characters around {placeholders} of declared
 * parameters. */
static int check_path_template(const rx_action *a, const char *tp, const char *p,
                               rexec_error *err)
{
    struct tmpl_check t = {a, 0, 0, 0};
    if (tp[0] != '/')
        return rx_json_fail(err, C, p, "must be an absolute path (start with /)");
    rx_template_walk(tp, tmpl_text, tmpl_param, &t);
    if (t.bad_char)
        return rx_json_fail(err, C, p, "a path template holds only [A-Za-z0-9._/@%%+=:,~-] "
                                       "around its {placeholders}");
    if (t.unknown)
        return rx_json_fail(err, C, p, "a {placeholder} names no declared parameter");
    if (strlen(tp) > XFER_PATH_MAX)
        return rx_json_fail(err, C, p, "longer than %d bytes", XFER_PATH_MAX);
    return 0;
}

static int mode_ok(const char *s)
{
    size_t n = strlen(s), i = n == 4 && s[0] == '0' ? 1 : 0;
    if (n - i != 3)
        return 0;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '7')
            return 0;
    return 1;
}

static int user_ok(const char *s, size_t n)
{
    if (n == 0 || n > 32 || !(s[0] == '_' || ((s[0] | 32) >= 'a' && (s[0] | 32) <= 'z')))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || s[i] == '.' || s[i] == '-' || (s[i] >= '0' && s[i] <= '9') ||
              ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z')))
            return 0;
    return 1;
}

/* "user" or "user:group", names as useradd takes them. */
static int owner_ok(const char *s)
{
    const char *colon = strchr(s, ':');
    if (colon == NULL)
        return user_ok(s, strlen(s));
    return user_ok(s, (size_t)(colon - s)) && user_ok(colon + 1, strlen(colon + 1));
}

/* A put's two content parameters: the controller's sha256 (64 lowercase hex) and size. */
static int add_content_params(const char *path, rx_action *a, rexec_error *err)
{
    if (rx_ws_param_index(a, RX_PUT_SHA_PARAM, strlen(RX_PUT_SHA_PARAM)) >= 0 ||
        rx_ws_param_index(a, RX_PUT_SIZE_PARAM, strlen(RX_PUT_SIZE_PARAM)) >= 0)
        return rx_json_fail(err, C, path, "a put action may not declare the parameters "
                                          RX_PUT_SHA_PARAM " or " RX_PUT_SIZE_PARAM
                                          " (rexec sets them)");
    if (a->params == NULL && (a->params = calloc(3, sizeof(rx_param_spec))) == NULL)
        return REXEC_ENOMEM;
    rx_param_spec *sha = &a->params[a->n_params++];
    rx_param_spec *size = &a->params[a->n_params++];
    /* content_sha256 is optional: rexec put hashes the file as it sends it and the stream's
     * trailer carries the hash (call_put.c); a caller that has it may bind it beforehand */
    *sha = (rx_param_spec){.type = RX_P_STRING, .required = 0, .max_len = 64};
    *size = (rx_param_spec){.type = RX_P_INT, .required = 1, .has_min = 1, .min = 0,
                            .has_max = 1, .max = (1LL << 53) - 1};
    if ((sha->name = strdup(RX_PUT_SHA_PARAM)) == NULL ||
        (sha->pattern = strdup("^([0-9a-f]{64})?$")) == NULL ||
        (size->name = strdup(RX_PUT_SIZE_PARAM)) == NULL)
        return REXEC_ENOMEM;
    if (regcomp(&sha->re, sha->pattern, REG_EXTENDED | REG_NOSUB) != 0)
        return rx_fail(err, REXEC_EINTERNAL, "cannot compile the content_sha256 pattern");
    sha->has_re = 1;
    sha->description = strdup("the file's SHA-256, when bound beforehand (optional)");
    size->description = strdup("the file's size in bytes (set by rexec put)");
    return sha->description && size->description ? 0 : REXEC_ENOMEM;
}

static int set_command(rx_action *a, const char *mode, const char *owner)
{
    rx_buf b;
    rx_buf_init(&b, 16384);
    int r = a->transfer == RX_XFER_PUT
                ? rx_buf_addf(&b, "__rx_put \"%s\" {" RX_PUT_SHA_PARAM "} {" RX_PUT_SIZE_PARAM
                                  "} '%s' '%s'",
                              a->xfer_path, mode ? mode : "", owner ? owner : "")
                : rx_buf_addf(&b, "__rx_get \"%s\"", a->xfer_path);
    if (r == 0 && (a->command = strdup((const char *)b.data)) == NULL)
        r = REXEC_ENOMEM;
    rx_buf_free(&b);
    return r;
}

static int load_spec(const cJSON *spec, const char *p, rx_action *a, rexec_error *err)
{
    static const char *const put_keys[] = {"path", "mode", "owner", "max_bytes", NULL};
    static const char *const get_keys[] = {"path", NULL};
    const char *tp = NULL, *mode = NULL, *owner = NULL;
    char pp[RX_JSON_PATH_MAX];
    long long max = RX_PUT_DEFAULT_MAX;
    int r;
    if ((r = rx_json_want(spec, p, cJSON_Object, C, err)) != 0 ||
        (r = rx_json_check_keys(spec, p, a->transfer == RX_XFER_PUT ? put_keys : get_keys, C,
                                err)) != 0 ||
        (r = rx_json_get_string(spec, "path", p, 1, &tp, C, err)) != 0 ||
        (r = rx_json_get_string(spec, "mode", p, 0, &mode, C, err)) != 0 ||
        (r = rx_json_get_string(spec, "owner", p, 0, &owner, C, err)) != 0 ||
        (r = rx_json_get_int(spec, "max_bytes", p, 0, 0, 1LL << 40, &max, C, err)) != 0)
        return r;
    a->xfer_max_bytes = (uint64_t)max;
    if ((r = check_path_template(a, tp, rx_json_path_key(pp, sizeof(pp), p, "path"), err)) != 0)
        return r;
    if (mode && !mode_ok(mode))
        return rx_json_fail(err, C, rx_json_path_key(pp, sizeof(pp), p, "mode"),
                            "expected an octal mode like \"0640\" (no setuid, setgid or sticky "
                            "bit)");
    if (owner && !owner_ok(owner))
        return rx_json_fail(err, C, rx_json_path_key(pp, sizeof(pp), p, "owner"),
                            "expected \"user\" or \"user:group\" (names of [A-Za-z0-9._-])");
    if ((a->xfer_path = strdup(tp)) == NULL)
        return REXEC_ENOMEM;
    return set_command(a, mode, owner);
}

/* binary and keep_bytes: a download's options. A binary download skips the redactor, so it may
 * not hand out a secret the redactor would have caught. */
static int load_get_options(const cJSON *o, const char *path, rx_action *a, rexec_error *err)
{
    char p[RX_JSON_PATH_MAX];
    int r;
    if ((r = rx_json_get_bool(o, "binary", path, 0, &a->binary, C, err)) != 0 ||
        (r = rx_json_get_bool(o, "keep_bytes", path, 0, &a->keep_bytes, C, err)) != 0)
        return r;
    if (a->transfer != RX_XFER_GET && (a->binary || a->keep_bytes))
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path,
                                                     a->binary ? "binary" : "keep_bytes"),
                            "only a \"get\" action has this option");
    if (a->binary && a->n_secrets > 0)
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, "binary"),
                            "a binary download is not redacted, so the action may hand out no "
                            "secret (it lists %zu)", a->n_secrets);
    return 0;
}

int rx_ws_load_transfer(const cJSON *o, const char *path, rx_action *a, rexec_error *err)
{
    const cJSON *put = cJSON_GetObjectItemCaseSensitive(o, "put");
    const cJSON *get = cJSON_GetObjectItemCaseSensitive(o, "get");
    char p[RX_JSON_PATH_MAX];
    int r;
    if (put && get)
        return rx_json_fail(err, C, path, "give one of \"put\" or \"get\", not both");
    if ((put || get) && a->command != NULL)
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, "command"),
                            "a \"%s\" action has no command (rexec runs remote/%s.sh)",
                            put ? "put" : "get", put ? "put" : "get");
    a->transfer = put ? RX_XFER_PUT : get ? RX_XFER_GET : RX_XFER_NONE;
    if (a->transfer == RX_XFER_NONE)
        return load_get_options(o, path, a, err);
    rx_json_path_key(p, sizeof(p), path, put ? "put" : "get");
    if ((r = load_get_options(o, path, a, err)) != 0 ||
        (put && (r = add_content_params(path, a, err)) != 0) ||
        (r = load_spec(put ? put : get, p, a, err)) != 0)
        return r;
    if (put) {
        /* the file streams into put.sh as it arrives; a put changes state unless the operator
         * says it does not */
        if (cJSON_GetObjectItemCaseSensitive(o, "stdin") == NULL)
            a->stdin_piped = 1;
        if (cJSON_GetObjectItemCaseSensitive(o, "state_changing") == NULL)
            a->state_changing = 1;
    }
    return 0;
}

/* ---- the path of one call ------------------------------------------------------------------- */

struct path_ctx {
    const rx_action *a;
    const rexec_param *values;
    rx_buf *out;
};

static int path_text(void *ctx, const char *text, size_t n)
{
    return rx_buf_add(((struct path_ctx *)ctx)->out, text, n);
}

static int path_param(void *ctx, const char *name, size_t n)
{
    struct path_ctx *c = ctx;
    int i = rx_ws_param_index(c->a, name, n);
    if (i < 0 || c->values[i].value == NULL)
        return REXEC_EINTERNAL;
    return rx_buf_add(c->out, c->values[i].value, c->values[i].value_len);
}

/* What the VM's script refuses too: the controller says it first, with the path. */
static const char *path_problem(const unsigned char *s, size_t n)
{
    if (n == 0 || s[0] != '/')
        return "is not absolute";
    if (n > XFER_PATH_MAX)
        return "is longer than 4096 bytes";
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] == 0x7f)
            return "holds a control character";
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '/')
            continue;
        size_t k = i + 1;
        while (k < n && s[k] != '/')
            k++;
        size_t len = k - i - 1;
        if ((len == 1 && s[i + 1] == '.') || (len == 2 && s[i + 1] == '.' && s[i + 2] == '.'))
            return "has a '.' or '..' component";
        if (len == 0 && k < n)
            return "has an empty component (//)";
    }
    if (s[n - 1] == '/')
        return "ends in / (names a directory)";
    return NULL;
}

int rx_transfer_path(const rx_action *a, const rexec_param *values, rx_buf *out,
                     rexec_error *err)
{
    struct path_ctx c = {a, values, out};
    const char *why;
    char shown[96];
    int r = rx_template_walk(a->xfer_path, path_text, path_param, &c);
    if (r != 0)
        return rx_fail(err, r == REXEC_EINTERNAL ? r : REXEC_EREQUEST,
                       "action \"%s\": cannot make the file's path", a->name);
    if ((why = path_problem(out->data, out->len)) != NULL)
        return rx_fail(err, REXEC_EREQUEST, "action \"%s\": the %s path %s %s", a->name,
                       rx_transfer_name(a->transfer),
                       rx_msg_quote(shown, sizeof(shown), out->data, out->len, 80), why);
    return 0;
}
