/* Typed parameter validation. A value reaches the command line as one single-quoted word, so the
 * quoting already stops shell syntax; these rules stop what quoting cannot: a value the tool
 * reads as an option, a path that climbs out, a target outside scope, text that is not text. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "jsonx.h"
#include "params.h"

#define QUOTE_MAX 64 /* a value longer than this is never quoted in a message */

static int pfail(rexec_error *err, int code, const rx_param_spec *spec, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int pfail(rexec_error *err, int code, const rx_param_spec *spec, const char *fmt, ...)
{
    char reason[sizeof(err->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    return rx_fail(err, code, "parameter \"%s\": %s", spec->name ? spec->name : "?", reason);
}

/* Rules for every type: length first (cheap, and it bounds the rest), then NUL, then UTF-8. */
static int check_text(const rx_param_spec *spec, const char *v, size_t len, rexec_error *err)
{
    size_t max = spec->max_len ? spec->max_len : RX_PARAM_DEFAULT_MAX_LEN;
    size_t bad;
    if (len > max)
        return pfail(err, REXEC_EREQUEST, spec, "longer than %zu bytes (%zu)", max, len);
    const char *nul = len ? memchr(v, 0, len) : NULL;
    if (nul != NULL)
        return pfail(err, REXEC_EREQUEST, spec, "NUL byte at offset %zu", (size_t)(nul - v));
    if (rx_utf8_check(v, len, &bad) != 0)
        return pfail(err, REXEC_EREQUEST, spec, "invalid UTF-8 at offset %zu", bad);
    return 0;
}

static int check_string(const rx_param_spec *spec, const char *v, rexec_error *err)
{
    if (spec->has_re && regexec(&spec->re, v, 0, NULL, 0) != 0)
        return pfail(err, REXEC_EREQUEST, spec, "does not match pattern %s",
                     spec->pattern ? spec->pattern : "(the action's pattern)");
    return 0;
}

/* Canonical decimal only: what the tool reads is what was range-checked. "+5", "05", "-0",
 * " 5" and "0x5" are refused rather than read the way strtoll happens to read them. */
static int check_int(const rx_param_spec *spec, const char *v, size_t len, rexec_error *err)
{
    char q[QUOTE_MAX + 16];
    const char *d = v + (v[0] == '-');
    size_t nd = strspn(d, "0123456789");
    rx_msg_quote(q, sizeof(q), v, len, QUOTE_MAX);
    if (nd == 0 || d[nd] != 0)
        return pfail(err, REXEC_EREQUEST, spec, "%s is not a decimal integer", q);
    if (d[0] == '0' && (nd > 1 || d != v))
        return pfail(err, REXEC_EREQUEST, spec, "%s is not canonical (leading zero or -0)", q);
    errno = 0;
    long long n = strtoll(v, NULL, 10);
    if (errno == ERANGE)
        return pfail(err, REXEC_EREQUEST, spec, "%s does not fit a 64-bit integer", q);
    if ((spec->has_min && n < spec->min) || (spec->has_max && n > spec->max))
        return pfail(err, REXEC_EREQUEST, spec, "%lld is out of range (%lld..%lld)", n,
                     spec->has_min ? spec->min : LLONG_MIN, spec->has_max ? spec->max : LLONG_MAX);
    return 0;
}

static int check_enum(const rx_param_spec *spec, const char *v, size_t len, rexec_error *err)
{
    char q[QUOTE_MAX + 16], list[512];
    size_t at = 0;
    for (size_t i = 0; i < spec->n_enum; i++)
        if (strlen(spec->enum_values[i]) == len && memcmp(spec->enum_values[i], v, len) == 0)
            return 0;
    list[0] = 0;
    for (size_t i = 0; i < spec->n_enum && at < sizeof(list); i++)
        at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", i ? ", " : "",
                               spec->enum_values[i]);
    return pfail(err, REXEC_EREQUEST, spec, "%s is not one of: %s",
                 rx_msg_quote(q, sizeof(q), v, len, QUOTE_MAX), list);
}

/* Absolute or relative. No control characters (a newline splits log lines and some tools'
 * input), no leading '-' (the tool would read an option: write "./-x"), no ".." component (an
 * action's "cat /var/log/{file}" must not climb out of /var/log). */
static int check_path(const rx_param_spec *spec, const char *v, size_t len, rexec_error *err)
{
    if (len == 0)
        return pfail(err, REXEC_EREQUEST, spec, "empty path");
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
            return pfail(err, REXEC_EREQUEST, spec, "control character at offset %zu in a path",
                         i);
    if (v[0] == '-')
        return pfail(err, REXEC_EREQUEST, spec,
                     "a path may not start with '-' (a tool would read an option; write ./-name)");
    for (const char *c = v; c != NULL; c = strchr(c, '/')) {
        c += (*c == '/');
        if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == 0))
            return pfail(err, REXEC_EREQUEST, spec, "'..' path components are not allowed");
    }
    return 0;
}

/* url/host/cidr: syntax alone, or syntax and scope when the spec asks for it. */
static int check_target(const rx_param_spec *spec, const char *v, const rx_scope *scope,
                        rexec_error *err)
{
    int r;
    if (spec->type == RX_P_URL)
        r = spec->in_scope ? rx_scope_check_url(scope, v, err) : rx_scope_parse_url(v, err);
    else if (spec->type == RX_P_HOST)
        r = spec->in_scope ? rx_scope_check_host(scope, v, 0, err) : rx_scope_parse_host(v, err);
    else
        r = spec->in_scope ? rx_scope_check_cidr(scope, v, err) : rx_scope_parse_cidr(v, err);
    if (r != 0)
        rx_fail_prefix(err, "parameter \"%s\": ", spec->name ? spec->name : "?");
    return r;
}

static int check_typed(const rx_param_spec *spec, const char *v, size_t len,
                       const rx_scope *scope, rexec_error *err)
{
    switch (spec->type) {
    case RX_P_STRING: return check_string(spec, v, err);
    case RX_P_INT: return check_int(spec, v, len, err);
    case RX_P_ENUM: return check_enum(spec, v, len, err);
    case RX_P_URL:
    case RX_P_HOST:
    case RX_P_CIDR: return check_target(spec, v, scope, err);
    case RX_P_PATH: return check_path(spec, v, len, err);
    case RX_P_SHELL: return 0; /* free-form: the action is L3 for it */
    }
    return pfail(err, REXEC_EINTERNAL, spec, "unknown parameter type %d", (int)spec->type);
}

int rx_param_validate(const rx_param_spec *spec, const char *value, size_t len,
                      const rx_scope *scope, rexec_error *err)
{
    int r;
    if (value == NULL && len != 0)
        return pfail(err, REXEC_EREQUEST, spec, "no value");
    if ((r = check_text(spec, value ? value : "", len, err)) != 0)
        return r;
    /* The value need not be NUL-terminated; regexec and the scope parsers want a C string. */
    char *v = malloc(len + 1);
    if (v == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (len)
        memcpy(v, value, len);
    v[len] = 0;
    r = check_typed(spec, v, len, scope, err);
    free(v);
    return r;
}
