/* rexec serve's log lines (serve_log.h). A line is built as one cJSON object whose strings are
 * redacted as they are added; it is then printed as JSON on stderr, or sent to the journal as
 * REXEC_* fields with the native protocol (systemd.io/JOURNAL_NATIVE_PROTOCOL: one datagram of
 * KEY=VALUE lines; a value with a newline goes as KEY, a 64-bit little-endian length, the
 * bytes). The protocol is a few lines; linking libsystemd for it would make every user of
 * librexec depend on it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "audit.h"
#include "buf.h"
#include "call.h"
#include "err.h"
#include "serve_log.h"

#define LOG_JOURNAL_SOCKET "/run/systemd/journal/socket"
#define LOG_ENTRY_MAX ((size_t)64 << 10)
#define LOG_IDENT "rexec-serve"

/* systemd sets JOURNAL_STREAM=<dev>:<ino> to what stderr is when it goes to the journal; a
 * process whose stderr was redirected since must not take it for the journal. */
static int stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (js == NULL || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(2, &st) != 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

int rx_serve_log_init(rx_serve_log *l, int format, rexec_error *err)
{
    memset(l, 0, sizeof(*l));
    l->fd = -1;
    if (format == REXEC_SERVE_LOG_AUTO)
        format = stderr_is_journal() ? REXEC_SERVE_LOG_JOURNAL : REXEC_SERVE_LOG_JSON;
    if (format != REXEC_SERVE_LOG_OFF && format != REXEC_SERVE_LOG_JSON &&
        format != REXEC_SERVE_LOG_JOURNAL)
        return rx_fail(err, REXEC_EUSAGE, "serve log: unknown format %d", format);
    l->format = format;
    if (format != REXEC_SERVE_LOG_JOURNAL)
        return 0;
    const char *path = getenv("REXEC_JOURNAL_SOCKET");
    l->journal.sun_family = AF_UNIX;
    snprintf(l->journal.sun_path, sizeof(l->journal.sun_path), "%s",
             path && *path ? path : LOG_JOURNAL_SOCKET);
    if ((l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
        return rx_fail(err, REXEC_EINTERNAL, "serve log: socket: %s", strerror(errno));
    return 0;
}

void rx_serve_log_close(rx_serve_log *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

/* ---- building a line -------------------------------------------------------------------- */

static void add_redacted(cJSON *o, const rexec_ctx *ctx, const char *key, const char *v)
{
    rx_buf b;
    if (v == NULL) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    rx_buf_init(&b, LOG_ENTRY_MAX);
    if (rx_redact_buf(rx_ctx_redactor(ctx), v, strlen(v), &b) == 0 && rx_buf_addc(&b, 0) == 0)
        cJSON_AddStringToObject(o, key, (const char *)b.data);
    else
        cJSON_AddStringToObject(o, key, "[not logged: too long]");
    rx_buf_free(&b);
}

/* The request id: a string id is redacted like any string, another JSON value kept. */
/* An id of any JSON type: every string and key in it redacted (the journal prints it too). */
static void add_id(cJSON *o, const rexec_ctx *ctx, const cJSON *id)
{
    cJSON *c = rx_redact_json(rx_ctx_redactor(ctx), id);
    cJSON_AddItemToObject(o, "id", c ? c : cJSON_CreateString("[not logged: no memory]"));
}

static cJSON *line_new(const rexec_ctx *ctx, const char *event, const rx_serve_log_who *w)
{
    char ts[RX_AUDIT_TS_LEN];
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    rx_audit_timestamp(ts);
    cJSON_AddStringToObject(o, "ts", ts);
    cJSON_AddStringToObject(o, "event", event);
    add_redacted(o, ctx, "op", w->op);
    add_id(o, ctx, w->id);
    if (w->uid >= 0)
        cJSON_AddNumberToObject(o, "client_uid", (double)w->uid);
    else
        cJSON_AddNullToObject(o, "client_uid");
    add_redacted(o, ctx, "client_user", w->user);
    if (w->traceparent)
        add_redacted(o, ctx, "traceparent", w->traceparent);
    return o;
}

/* ---- the journal ------------------------------------------------------------------------ */

/* KEY=value, or KEY\n<le64 length><value>\n when the value holds a newline. */
static int journal_field(rx_buf *b, const char *key, const char *v)
{
    size_t n = strlen(v);
    int r = rx_buf_adds(b, key);
    if (memchr(v, '\n', n) == NULL)
        return r || rx_buf_addc(b, '=') || rx_buf_add(b, v, n) || rx_buf_addc(b, '\n');
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    return r || rx_buf_addc(b, '\n') || rx_buf_add(b, len, 8) || rx_buf_add(b, v, n) ||
           rx_buf_addc(b, '\n');
}

/* REXEC_<KEY> for every member of o (numbers and JSON values as their JSON text). */
static int journal_fields(rx_buf *b, const cJSON *o)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        char key[64], *text = NULL;
        size_t k = 0;
        for (const char *p = it->string; *p && k + 7 < sizeof(key); p++)
            key[k++] = (*p >= 'a' && *p <= 'z') ? (char)(*p - 32) : *p;
        key[k] = 0;
        char name[80];
        snprintf(name, sizeof(name), "REXEC_%s", key);
        if (cJSON_IsNull(it))
            continue;
        const char *v = cJSON_IsString(it) ? it->valuestring : (text = cJSON_PrintUnformatted(it));
        int r = v ? journal_field(b, name, v) : -1;
        free(text);
        if (r != 0)
            return -1;
    }
    return 0;
}

static void journal_send(rx_serve_log *l, const cJSON *o, const char *message, int error)
{
    rx_buf b;
    rx_buf_init(&b, LOG_ENTRY_MAX);
    if (journal_field(&b, "MESSAGE", message) || journal_field(&b, "PRIORITY", error ? "4" : "6") ||
        journal_field(&b, "SYSLOG_IDENTIFIER", LOG_IDENT) || journal_fields(&b, o) ||
        sendto(l->fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL,
               (const struct sockaddr *)&l->journal, sizeof(l->journal)) < 0)
        l->lost++;
    rx_buf_free(&b);
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : "-";
}

/* A short MESSAGE for journalctl's default view; the fields carry the rest. */
static void journal_message(const cJSON *o, char *out, size_t n)
{
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(o, "exit_status");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "duration_ms");
    int call = strcmp(str_of(o, "event"), "call") == 0;
    snprintf(out, n, "%s %s%s%s%s%s: exit %d in %.0f ms (client %s)", str_of(o, "event"),
             str_of(o, "op"), call ? " " : "", call ? str_of(o, "host") : "", call ? " " : "",
             call ? str_of(o, "action") : "", cJSON_IsNumber(ex) ? ex->valueint : -1,
             cJSON_IsNumber(ms) ? ms->valuedouble : 0.0, str_of(o, "client_user"));
}

static void line_emit(rx_serve_log *l, cJSON *o, int error)
{
    if (o != NULL && l->format == REXEC_SERVE_LOG_JSON) {
        char *s = cJSON_PrintUnformatted(o);
        if (s != NULL)
            fprintf(stderr, "%s\n", s);
        free(s);
    } else if (o != NULL && l->format == REXEC_SERVE_LOG_JOURNAL) {
        char msg[512];
        journal_message(o, msg, sizeof(msg));
        journal_send(l, o, msg, error);
    }
    cJSON_Delete(o);
}

/* ---- the two kinds of line -------------------------------------------------------------- */

void rx_serve_log_request(rx_serve_log *l, const rexec_ctx *ctx, const rx_serve_log_who *w,
                          size_t hosts, int exit_status, uint64_t duration_ms, const char *error)
{
    if (l->format == REXEC_SERVE_LOG_OFF)
        return;
    cJSON *o = line_new(ctx, "request", w);
    if (o != NULL) {
        cJSON_AddNumberToObject(o, "hosts", (double)hosts);
        cJSON_AddNumberToObject(o, "exit_status", exit_status);
        cJSON_AddNumberToObject(o, "duration_ms", (double)duration_ms);
        add_redacted(o, ctx, "error", error);
    }
    line_emit(l, o, error != NULL);
}

void rx_serve_log_call(rx_serve_log *l, const rexec_ctx *ctx, const rx_serve_log_who *w,
                       const rexec_result *r)
{
    if (l->format == REXEC_SERVE_LOG_OFF)
        return;
    cJSON *o = line_new(ctx, "call", w);
    if (o != NULL) {
        add_redacted(o, ctx, "run_id", r->run_id);
        add_redacted(o, ctx, "host", r->host);
        add_redacted(o, ctx, "action", r->action);
        add_redacted(o, ctx, "decision", r->decision);
        add_redacted(o, ctx, "reason", r->decision ? r->reason : NULL);
        cJSON_AddNumberToObject(o, "exit_status", r->exit_status);
        if (r->exit_code >= 0)
            cJSON_AddNumberToObject(o, "exit_code", r->exit_code);
        else
            cJSON_AddNullToObject(o, "exit_code");
        cJSON_AddBoolToObject(o, "timed_out", r->timed_out);
        cJSON_AddNumberToObject(o, "duration_ms", (double)r->duration_ms);
        add_redacted(o, ctx, "error", r->error);
    }
    line_emit(l, o, r->error != NULL);
}
