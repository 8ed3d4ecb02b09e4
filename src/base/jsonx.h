/* Strict JSON on top of cJSON, and the typed getters the request parser and the workspace loader
 * share.
 *
 * cJSON alone is lenient: it keeps duplicate keys, turns 1e999 into inf, accepts leading zeros
 * and "1.", treats every byte below 0x21 as whitespace, accepts raw control characters in strings
 * and nests 1000 deep. rx_json_parse_strict refuses all of that before anyone looks at a value,
 * so that two readers of the same text can never disagree about what it says.
 *
 * JSON paths in messages. Every message about a value names where it is, in one style:
 *   - object members are joined with '.', without a leading "$": "params.unit",
 *     "actions.svc.restart.params.unit.pattern" (a key holding '.' is written as it is);
 *   - array elements are written "[i]", 0-based: "groups.labs[1]";
 *   - the document itself is the empty path "", and messages about it carry no path part;
 *   - a key's bytes outside printable ASCII are shown as '?', a key is cut at 64 bytes ("..."),
 *     and the empty key is written "" (`params.""`).
 * A message is "<path>: <reason>", e.g. "params.unit: expected a string, got a boolean".
 * Syntax errors have no path (the tree does not exist yet): they name the 0-based byte offset,
 * with line and column (1-based) for humans: "JSON syntax error at byte 17 (line 2, column 5): ...".
 * Callers add their own prefix ("request: ", "rexec.json: ") with rx_fail_prefix.
 *
 * Every function that takes an `int code` fails with that rexec_err: REXEC_EREQUEST for requests
 * (exit 65), REXEC_ECONFIG for rexec.json (exit 78). Failures leave *out untouched. */
#ifndef RX_JSONX_H
#define RX_JSONX_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "rexec.h"
#include "utf8.h"

#define RX_JSON_MAX_DEPTH 64  /* arrays and objects nested deeper are refused */
#define RX_JSON_PATH_MAX 256  /* a path longer than this is cut, ending in "..." */
#define RX_JSON_MAX_SAFE_INT 9007199254740991LL /* 2^53-1: beyond it a double is not exact */

/* Parses text (len bytes, need not be NUL-terminated) as one strict JSON value (RFC 8259).
 * Refuses: more than max_len bytes, a NUL byte, invalid UTF-8, a byte order mark, whitespace
 * other than space/tab/CR/LF, raw control characters in strings, "\u0000", invalid escapes,
 * numbers outside the JSON grammar (leading '+' or zeros, "1.", ".5", NaN, Infinity), numbers
 * that do not fit a double (1e999), nesting deeper than RX_JSON_MAX_DEPTH, duplicate object keys
 * (case-sensitive, as JSON compares them), and anything after the value.
 * Returns 0 and the tree in *out (the caller frees it with cJSON_Delete), err_code with err->msg,
 * or REXEC_ENOMEM. */
int rx_json_parse_strict(const char *text, size_t len, size_t max_len, int err_code, cJSON **out,
                         rexec_error *err);

/* Checks an already-built tree (e.g. one that reached serve in a larger document parsed by
 * rx_json_parse_strict, or a tree built in memory) for duplicate keys, non-finite numbers and depth.
 * path names item. Returns 0, code, or REXEC_ENOMEM. */
int rx_json_check_tree(const cJSON *item, const char *path, int code, rexec_error *err);

/* ---- Paths and messages -------------------------------------------------------------------- */

/* Writes parent + "." + key (or just key when parent is "") into dst (cap bytes, always
 * NUL-terminated, cut with "..." when too long). Returns dst. */
char *rx_json_path_key(char *dst, size_t cap, const char *parent, const char *key);
/* Writes parent + "[i]" into dst. Returns dst. */
char *rx_json_path_index(char *dst, size_t cap, const char *parent, size_t i);

/* "a string", "a number", "a boolean", "null", "an object", "an array" ("nothing" for NULL). */
const char *rx_json_type_name(const cJSON *item);

/* o[key] = v, or null when v is NULL. */
void rx_json_add_str_or_null(cJSON *o, const char *key, const char *v);
/* o[key] = id (a uid, a count), or null when id is negative (unknown). */
void rx_json_add_id_or_null(cJSON *o, const char *key, long id);

/* Formats "<path>: <reason>" (or just the reason when path is ""), sets err->code = code and
 * returns code. */
int rx_json_fail(rexec_error *err, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- Typed access ---------------------------------------------------------------------------
 * obj is the object, path its path, key the member. When the member is absent: required → code
 * ("<path>.<key>: missing"), else return 0 with *out untouched (so a caller presets a default).
 * A member of the wrong type fails with "<path>.<key>: expected X, got Y"; a boolean never passes
 * for a number, nor a number for a string. Strings are borrowed from the tree. */

/* Checks that item is of cJSON type `type` (cJSON_String, cJSON_Number, cJSON_Object, ...; a
 * boolean is cJSON_True|cJSON_False). Returns 0 or code naming path. */
int rx_json_want(const cJSON *item, const char *path, int type, int code, rexec_error *err);

int rx_json_get_string(const cJSON *obj, const char *key, const char *path, int required,
                       const char **out, int code, rexec_error *err);
int rx_json_get_bool(const cJSON *obj, const char *key, const char *path, int required, int *out,
                     int code, rexec_error *err);
/* A finite number. */
int rx_json_get_number(const cJSON *obj, const char *key, const char *path, int required,
                       double *out, int code, rexec_error *err);
/* An integral number in [min, max]; 1.5 and 1e300 are refused, and so is anything beyond
 * ±(2^53-1) (a double may have rounded it). A number is the double it denotes (RFC 8259 leaves
 * precision to the parser): 3.0 and 3e0 are 3. */
int rx_json_get_int(const cJSON *obj, const char *key, const char *path, int required,
                    long long min, long long max, long long *out, int code, rexec_error *err);
int rx_json_get_object(const cJSON *obj, const char *key, const char *path, int required,
                       const cJSON **out, int code, rexec_error *err);
int rx_json_get_array(const cJSON *obj, const char *key, const char *path, int required,
                      const cJSON **out, int code, rexec_error *err);

/* Checks that obj is an object whose keys are all in allowed (a NULL-terminated list).
 * An unknown key fails with "<path>.<key>: unknown key (expected one of: a, b, c)". */
int rx_json_check_keys(const cJSON *obj, const char *path, const char *const allowed[], int code,
                       rexec_error *err);

/* ---- Text helpers shared by the validators ------------------------------------------------- */

/* Renders a value for a message: "\"value\"" when it is at most max_show bytes of printable
 * ASCII, else "(N bytes)", so a message never carries control characters or a wall of text.
 * Writes into dst (cap bytes) and returns dst. */
const char *rx_msg_quote(char *dst, size_t cap, const void *v, size_t len, size_t max_show);

#endif
