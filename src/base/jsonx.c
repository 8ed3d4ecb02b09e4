/* Strict JSON: a lexical pass refuses what cJSON would accept but JSON does not, cJSON builds
 * the tree, then a walk refuses duplicate keys and non-finite numbers with their path. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "jsonx.h"
#include "utf8.h"

#define KEY_SHOW_MAX 64

/* ---- Text helpers ------------------------------------------------------------------------- */


const char *rx_msg_quote(char *dst, size_t cap, const void *v, size_t len, size_t max_show)
{
    const unsigned char *s = v;
    int ok = len <= max_show;
    for (size_t i = 0; ok && i < len; i++)
        ok = s[i] >= 0x20 && s[i] < 0x7f;
    if (ok)
        snprintf(dst, cap, "\"%.*s\"", (int)len, (const char *)s);
    else
        snprintf(dst, cap, "(%zu bytes)", len);
    return dst;
}

/* ---- Paths and messages -------------------------------------------------------------------- */

/* Appends src[0..n) to dst (holding *at bytes), '?' for unprintable bytes; marks a cut with "...". */
static void path_append(char *dst, size_t cap, size_t *at, const char *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (*at + 4 >= cap) {
            memcpy(dst + cap - 4, "...", 4);
            *at = cap - 1;
            return;
        }
        unsigned char c = (unsigned char)src[i];
        dst[(*at)++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    dst[*at] = 0;
}

/* Starts dst with parent; dst may be parent itself (a path extended in place). */
static size_t path_start(char *dst, size_t cap, const char *parent)
{
    size_t at = 0;
    if (parent == dst)
        return strlen(dst);
    dst[0] = 0;
    if (parent != NULL)
        path_append(dst, cap, &at, parent, strlen(parent));
    return at;
}

char *rx_json_path_key(char *dst, size_t cap, const char *parent, const char *key)
{
    size_t at = path_start(dst, cap, parent);
    size_t klen = strlen(key);
    if (at > 0)
        path_append(dst, cap, &at, ".", 1);
    if (klen == 0)
        path_append(dst, cap, &at, "\"\"", 2);
    path_append(dst, cap, &at, key, klen > KEY_SHOW_MAX ? KEY_SHOW_MAX : klen);
    if (klen > KEY_SHOW_MAX)
        path_append(dst, cap, &at, "...", 3);
    return dst;
}

char *rx_json_path_index(char *dst, size_t cap, const char *parent, size_t i)
{
    char idx[32];
    size_t at = path_start(dst, cap, parent);
    int n = snprintf(idx, sizeof(idx), "[%zu]", i);
    path_append(dst, cap, &at, idx, (size_t)n);
    return dst;
}

const char *rx_json_type_name(const cJSON *item)
{
    if (item == NULL)
        return "nothing";
    switch (item->type & 0xff) {
    case cJSON_String: return "a string";
    case cJSON_Number: return "a number";
    case cJSON_True:
    case cJSON_False: return "a boolean";
    case cJSON_NULL: return "null";
    case cJSON_Object: return "an object";
    case cJSON_Array: return "an array";
    default: return "an invalid value";
    }
}

int rx_json_fail(rexec_error *err, int code, const char *path, const char *fmt, ...)
{
    char reason[sizeof(err->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    if (path == NULL || path[0] == 0)
        return rx_fail(err, code, "%s", reason);
    return rx_fail(err, code, "%s: %s", path, reason);
}

/* ---- Lexical pass ------------------------------------------------------------------------- */

/* The lexer only refuses what cJSON would let through; cJSON reports the rest. */
typedef struct lexer {
    const unsigned char *p;
    size_t len, i;
    int depth;
    const char *why; /* set on failure; i is then the offending offset */
} lexer;

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int is_alnum(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int lex_fail(lexer *lx, const char *why)
{
    lx->why = why;
    return -1;
}

/* One escape after the backslash at lx->i. "\u0000" is refused: it would cut a C string short. */
static int lex_escape(lexer *lx)
{
    size_t at = lx->i + 1;
    if (at >= lx->len)
        return lex_fail(lx, "unterminated string");
    if (strchr("\"\\/bfnrt", lx->p[at]) != NULL && lx->p[at] != 0) {
        lx->i += 2;
        return 0;
    }
    if (lx->p[at] != 'u')
        return lex_fail(lx, "invalid escape in a string");
    for (size_t k = 1; k <= 4; k++)
        if (at + k >= lx->len || !is_hex(lx->p[at + k]))
            return lex_fail(lx, "invalid \\u escape in a string");
    if (memcmp(lx->p + at + 1, "0000", 4) == 0)
        return lex_fail(lx, "\\u0000 is not allowed in a string");
    lx->i += 6;
    return 0;
}

static int lex_string(lexer *lx)
{
    lx->i++; /* the opening quote */
    while (lx->i < lx->len) {
        unsigned char c = lx->p[lx->i];
        if (c == '"') {
            lx->i++;
            return 0;
        }
        if (c < 0x20)
            return lex_fail(lx, "control character in a string (it must be escaped)");
        if (c == '\\') {
            if (lex_escape(lx) != 0)
                return -1;
        } else {
            lx->i++;
        }
    }
    return lex_fail(lx, "unterminated string");
}

static size_t lex_digits(lexer *lx)
{
    size_t n = 0;
    while (lx->i < lx->len && is_digit(lx->p[lx->i])) {
        lx->i++;
        n++;
    }
    return n;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?, and nothing number-like right after. */
static int lex_number(lexer *lx)
{
    if (lx->p[lx->i] == '-')
        lx->i++;
    if (lx->i < lx->len && lx->p[lx->i] == '0') {
        lx->i++;
        if (lx->i < lx->len && is_digit(lx->p[lx->i]))
            return lex_fail(lx, "leading zeros are not allowed in a number");
    } else if (lex_digits(lx) == 0) {
        return lex_fail(lx, "invalid number");
    }
    if (lx->i < lx->len && lx->p[lx->i] == '.') {
        lx->i++;
        if (lex_digits(lx) == 0)
            return lex_fail(lx, "digits are required after '.' in a number");
    }
    if (lx->i < lx->len && (lx->p[lx->i] == 'e' || lx->p[lx->i] == 'E')) {
        lx->i++;
        if (lx->i < lx->len && (lx->p[lx->i] == '+' || lx->p[lx->i] == '-'))
            lx->i++;
        if (lex_digits(lx) == 0)
            return lex_fail(lx, "digits are required in a number's exponent");
    }
    if (lx->i < lx->len && (strchr(".+-_", lx->p[lx->i]) != NULL || is_alnum(lx->p[lx->i])))
        return lex_fail(lx, "invalid number");
    return 0;
}

/* Structural bytes, whitespace and literal letters; everything else outside strings is refused. */
static int lex_other(lexer *lx)
{
    unsigned char c = lx->p[lx->i];
    if (c == '{' || c == '[') {
        if (++lx->depth > RX_JSON_MAX_DEPTH)
            return lex_fail(lx, "nested deeper than 64 levels");
    } else if (c == '}' || c == ']') {
        lx->depth--;
    } else if (c >= 'a' && c <= 'z') {
        while (lx->i + 1 < lx->len && lx->p[lx->i + 1] >= 'a' && lx->p[lx->i + 1] <= 'z')
            lx->i++; /* true/false/null: cJSON checks the spelling */
    } else if (strchr(" \t\r\n,:", c) == NULL || c == 0) {
        if (lx->i == 0 && c == 0xEF)
            return lex_fail(lx, "a byte order mark is not allowed");
        return lex_fail(lx, c < 0x20 || c == 0x7f ? "control character outside a string"
                                                  : "unexpected character");
    }
    lx->i++;
    return 0;
}

static int lex_all(lexer *lx)
{
    while (lx->i < lx->len) {
        unsigned char c = lx->p[lx->i];
        int r;
        if (c == '"')
            r = lex_string(lx);
        else if (c == '-' || is_digit(c))
            r = lex_number(lx);
        else
            r = lex_other(lx);
        if (r != 0)
            return r;
    }
    return 0;
}

/* "JSON syntax error at byte N (line L, column C): why". */
static int syntax_fail(rexec_error *err, int code, const char *text, size_t off, const char *why)
{
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return rx_fail(err, code, "JSON syntax error at byte %zu (line %zu, column %zu): %s", off,
                   line, col, why);
}

/* Size, NUL and UTF-8 first: the lexer and cJSON then only ever see well-formed text. */
static int check_bytes(const char *text, size_t len, size_t max_len, int code, rexec_error *err)
{
    size_t bad;
    if (len > max_len)
        return rx_fail(err, code, "JSON document too large: %zu bytes (at most %zu)", len, max_len);
    const char *nul = memchr(text, 0, len);
    if (nul != NULL)
        return syntax_fail(err, code, text, (size_t)(nul - text), "NUL byte");
    if (rx_utf8_check(text, len, &bad) != 0)
        return syntax_fail(err, code, text, bad, "invalid UTF-8");
    return 0;
}

static size_t skip_ws(const char *text, size_t len, size_t i)
{
    while (i < len && strchr(" \t\r\n", text[i]) != NULL)
        i++;
    return i;
}

/* ---- Tree walk ---------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorting the keys finds duplicates in n log n, so a 64 KiB object of keys stays cheap. */
static int check_dup_keys(const cJSON *obj, const char *path, int code, rexec_error *err)
{
    size_t n = 0, k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, obj)
        n++;
    if (n < 2)
        return 0;
    const char **keys = malloc(n * sizeof(*keys));
    if (keys == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    cJSON_ArrayForEach(c, obj)
        keys[k++] = c->string ? c->string : "";
    qsort(keys, n, sizeof(*keys), cmp_str);
    int r = 0;
    for (k = 1; k < n && r == 0; k++) {
        if (strcmp(keys[k - 1], keys[k]) == 0) {
            char p[RX_JSON_PATH_MAX];
            r = rx_json_fail(err, code, rx_json_path_key(p, sizeof(p), path, keys[k]),
                             "duplicate key");
        }
    }
    free(keys);
    return r;
}

static int walk(const cJSON *item, const char *path, int depth, int code, rexec_error *err)
{
    char p[RX_JSON_PATH_MAX];
    size_t i = 0;
    const cJSON *c;
    int r;
    if (cJSON_IsNumber(item) && !isfinite(item->valuedouble))
        return rx_json_fail(err, code, path, "number out of range (it must be finite)");
    if (!cJSON_IsObject(item) && !cJSON_IsArray(item))
        return 0;
    if (depth >= RX_JSON_MAX_DEPTH)
        return rx_json_fail(err, code, path, "nested deeper than %d levels", RX_JSON_MAX_DEPTH);
    if (cJSON_IsObject(item) && (r = check_dup_keys(item, path, code, err)) != 0)
        return r;
    cJSON_ArrayForEach(c, item) {
        if (cJSON_IsObject(item))
            rx_json_path_key(p, sizeof(p), path, c->string ? c->string : "");
        else
            rx_json_path_index(p, sizeof(p), path, i++);
        if ((r = walk(c, p, depth + 1, code, err)) != 0)
            return r;
    }
    return 0;
}

int rx_json_check_tree(const cJSON *item, const char *path, int code, rexec_error *err)
{
    return walk(item, path ? path : "", 0, code, err);
}

int rx_json_parse_strict(const char *text, size_t len, size_t max_len, int err_code, cJSON **out,
                         rexec_error *err)
{
    lexer lx = {.p = (const unsigned char *)text, .len = len};
    const char *end = NULL;
    cJSON *root = NULL;
    int r;
    if ((r = check_bytes(text, len, max_len, err_code, err)) != 0)
        return r;
    if (skip_ws(text, len, 0) == len)
        return syntax_fail(err, err_code, text, len, "empty document");
    if (lex_all(&lx) != 0)
        return syntax_fail(err, err_code, text, lx.i, lx.why);
    root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (root == NULL) {
        size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        return syntax_fail(err, err_code, text, off, "unexpected token");
    }
    size_t at = skip_ws(text, len, (size_t)(end - text));
    if (at != len)
        r = syntax_fail(err, err_code, text, at, "unexpected data after the JSON value");
    else
        r = rx_json_check_tree(root, "", err_code, err);
    if (r != 0) {
        cJSON_Delete(root);
        return r;
    }
    *out = root;
    return 0;
}

/* ---- Typed access ------------------------------------------------------------------------- */

int rx_json_want(const cJSON *item, const char *path, int type, int code, rexec_error *err)
{
    static const char *const names[] = {"a boolean", "a boolean", "null",   "a number",
                                        "a string",  "an array",  "an object"};
    int t = item ? (item->type & 0xff) : 0;
    if (item != NULL && (t & type) != 0)
        return 0;
    const char *want = "a value";
    for (int bit = 0; bit < 7; bit++)
        if (type & (1 << bit)) {
            want = names[bit];
            break;
        }
    return rx_json_fail(err, code, path, "expected %s, got %s", want, rx_json_type_name(item));
}

/* Finds obj.key: 1 found (in *item), 0 absent and optional, or a failure code. */
static int get_member(const cJSON *obj, const char *key, const char *path, int required,
                      const cJSON **item, char *kpath, int code, rexec_error *err)
{
    rx_json_path_key(kpath, RX_JSON_PATH_MAX, path, key);
    if (rx_json_want(obj, path, cJSON_Object, code, err) != 0)
        return code;
    *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (*item != NULL)
        return 1;
    return required ? rx_json_fail(err, code, kpath, "missing") : 0;
}

/* The common shape of the getters: 1 = found and of the right type, 0 = absent, else a code. */
static int get_typed(const cJSON *obj, const char *key, const char *path, int required,
                     int type, const cJSON **item, char *kpath, int code, rexec_error *err)
{
    int r = get_member(obj, key, path, required, item, kpath, code, err);
    if (r != 1)
        return r;
    if (rx_json_want(*item, kpath, type, code, err) != 0)
        return code;
    return 1;
}

int rx_json_get_string(const cJSON *obj, const char *key, const char *path, int required,
                       const char **out, int code, rexec_error *err)
{
    char kp[RX_JSON_PATH_MAX];
    const cJSON *it;
    int r = get_typed(obj, key, path, required, cJSON_String, &it, kp, code, err);
    if (r == 1)
        *out = it->valuestring;
    return r == 1 ? 0 : r;
}

int rx_json_get_bool(const cJSON *obj, const char *key, const char *path, int required, int *out,
                     int code, rexec_error *err)
{
    char kp[RX_JSON_PATH_MAX];
    const cJSON *it;
    int r = get_typed(obj, key, path, required, cJSON_True | cJSON_False, &it, kp, code, err);
    if (r == 1)
        *out = cJSON_IsTrue(it) ? 1 : 0;
    return r == 1 ? 0 : r;
}

int rx_json_get_number(const cJSON *obj, const char *key, const char *path, int required,
                       double *out, int code, rexec_error *err)
{
    char kp[RX_JSON_PATH_MAX];
    const cJSON *it;
    int r = get_typed(obj, key, path, required, cJSON_Number, &it, kp, code, err);
    if (r != 1)
        return r;
    if (!isfinite(it->valuedouble))
        return rx_json_fail(err, code, kp, "number out of range (it must be finite)");
    *out = it->valuedouble;
    return 0;
}

int rx_json_get_int(const cJSON *obj, const char *key, const char *path, int required,
                    long long min, long long max, long long *out, int code, rexec_error *err)
{
    char kp[RX_JSON_PATH_MAX];
    const cJSON *it;
    int r = get_typed(obj, key, path, required, cJSON_Number, &it, kp, code, err);
    if (r != 1)
        return r;
    double v = it->valuedouble;
    if (!isfinite(v) || v != floor(v))
        return rx_json_fail(err, code, kp, "expected an integer");
    if (v > (double)RX_JSON_MAX_SAFE_INT || v < -(double)RX_JSON_MAX_SAFE_INT ||
        (long long)v < min || (long long)v > max)
        return rx_json_fail(err, code, kp, "out of range (%lld..%lld)", min, max);
    *out = (long long)v;
    return 0;
}

int rx_json_get_object(const cJSON *obj, const char *key, const char *path, int required,
                       const cJSON **out, int code, rexec_error *err)
{
    char kp[RX_JSON_PATH_MAX];
    const cJSON *it;
    int r = get_typed(obj, key, path, required, cJSON_Object, &it, kp, code, err);
    if (r == 1)
        *out = it;
    return r == 1 ? 0 : r;
}

int rx_json_get_array(const cJSON *obj, const char *key, const char *path, int required,
                      const cJSON **out, int code, rexec_error *err)
{
    char kp[RX_JSON_PATH_MAX];
    const cJSON *it;
    int r = get_typed(obj, key, path, required, cJSON_Array, &it, kp, code, err);
    if (r == 1)
        *out = it;
    return r == 1 ? 0 : r;
}

static int key_allowed(const char *const allowed[], const char *key)
{
    for (size_t i = 0; allowed[i] != NULL; i++)
        if (strcmp(allowed[i], key) == 0)
            return 1;
    return 0;
}

int rx_json_check_keys(const cJSON *obj, const char *path, const char *const allowed[], int code,
                       rexec_error *err)
{
    const cJSON *c;
    if (rx_json_want(obj, path, cJSON_Object, code, err) != 0)
        return code;
    cJSON_ArrayForEach(c, obj) {
        const char *key = c->string ? c->string : "";
        if (key_allowed(allowed, key))
            continue;
        char kp[RX_JSON_PATH_MAX], list[512];
        size_t at = 0;
        list[0] = 0;
        for (size_t i = 0; allowed[i] != NULL && at < sizeof(list); i++)
            at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", i ? ", " : "",
                                   allowed[i]);
        return rx_json_fail(err, code, rx_json_path_key(kp, sizeof(kp), path, key),
                            "unknown key (expected one of: %s)", list);
    }
    return 0;
}

void rx_json_add_str_or_null(cJSON *o, const char *key, const char *v)
{
    if (v != NULL)
        cJSON_AddStringToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

void rx_json_add_id_or_null(cJSON *o, const char *key, long id)
{
    if (id >= 0)
        cJSON_AddNumberToObject(o, key, (double)id);
    else
        cJSON_AddNullToObject(o, key);
}
