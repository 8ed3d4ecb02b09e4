/* The error table: one X-macro gives names, exit codes and messages (after libuv's UV_ERRNO_MAP). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

struct err_entry {
    int err;
    int exit_code;
    const char *name;
    const char *msg;
};

static const struct err_entry err_table[] = {
#define ERR_ENTRY_(name, code, msg) {REXEC_E##name, code, #name, msg},
    REXEC_ERR_MAP(ERR_ENTRY_)
#undef ERR_ENTRY_
};

static const struct err_entry *err_find(int err)
{
    for (size_t i = 0; i < sizeof(err_table) / sizeof(err_table[0]); i++)
        if (err_table[i].err == err)
            return &err_table[i];
    return NULL;
}

const char *rexec_strerror(int err)
{
    const struct err_entry *e = err_find(err);
    if (err == REXEC_OK)
        return "success";
    return e ? e->msg : "unknown error";
}

const char *rexec_err_name(int err)
{
    const struct err_entry *e = err_find(err);
    if (err == REXEC_OK)
        return "OK";
    return e ? e->name : "UNKNOWN";
}

int rexec_err_exit_code(int err)
{
    const struct err_entry *e = err_find(err);
    if (err == REXEC_OK)
        return 0;
    return e ? e->exit_code : 70;
}

const char *rexec_version(void)
{
    return REXEC_VERSION;
}

int rx_log_on(const rx_logger *l, int level)
{
    (void)level;
    return l != NULL && l->fn != NULL;
}

void rx_log(const rx_logger *l, int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    if (!rx_log_on(l, level))
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    l->fn(l->ud, level, line);
}

int rx_fail(rexec_error *err, int code, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    err->code = code;
    return code;
}

int rx_fail_prefix(rexec_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return REXEC_EINTERNAL;
    char prefix[512], old[sizeof(err->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    size_t n = strnlen(prefix, sizeof(err->msg) - 1);
    memcpy(err->msg, prefix, n);
    size_t m = strnlen(old, sizeof(err->msg) - 1 - n);
    memcpy(err->msg + n, old, m);
    err->msg[n + m] = 0;
    return err->code;
}
