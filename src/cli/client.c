/* run, eval and check through a running `rexec serve` (--socket PATH or $REXEC_SOCKET): the
 * same request, the same output, the same exit codes as a direct call; only the connections
 * to the hosts are already warm. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"

/* the base64 of stdin (4/3 of it) and the rest of the request fit REXEC_REQUEST_MAX_BYTES;
 * more, or a --stdin FILE, is streamed in "stdin" pieces: raw, CLIENT_RAW_PIECE bytes after a
 * line that says how many, when serve's "accepted" says it takes them ("stdin_bytes"); else in
 * lines of CLIENT_STDIN_PIECE bytes each (their base64 is 64 KiB, under serve's 68 KiB line) */
#define CLIENT_MAX_STDIN (REXEC_REQUEST_MAX_BYTES / 4 * 3 - 2048)
#define CLIENT_STDIN_PIECE 49152
#define CLIENT_STDIN_HEAD "{\"op\":\"stdin\",\"target\":1,\"data_base64\":\""
#define CLIENT_RAW_PIECE 262144
#define CLIENT_RAW_HEAD_MAX 64
#define CLIENT_LINE_MAX (CLIENT_RAW_HEAD_MAX + CLIENT_RAW_PIECE)
_Static_assert(sizeof(CLIENT_STDIN_HEAD) + 4 * (CLIENT_STDIN_PIECE / 3) + 8 <= CLIENT_LINE_MAX,
               "a base64 stdin line fits the upload buffer");

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    if (interrupted++)
        _exit(130);
}

static int connect_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -cli_error(64, "socket path too long: %s", cli_arg(path));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return -cli_error(255, "cannot reach rexec serve at %s: %s%s", cli_arg(path), strerror(e),
                          cli_nofile_note(strerror(e)));
    }
    return fd;
}

static void add_param(cJSON *params, const rexec_param *p)
{
    char *v = strndup(p->value, p->value_len);
    cJSON_AddStringToObject(params, p->name, v ? v : "");
    free(v);
}

/* --batch, --canary, --max-failures, --retry-unavailable, for the next request (cmd_run.c). */
static rexec_fanout_spec client_fanout;

void cli_client_fanout(const rexec_fanout_spec *spec)
{
    client_fanout = *spec;
}

/* The fan-out's keys (serve takes "batch" and "max_failures" as the text given: "8", "25%"). */
static void add_fanout(cJSON *o, const rexec_fanout_spec *f)
{
    if (f->batch)
        cJSON_AddStringToObject(o, "batch", f->batch);
    if (f->canary)
        cJSON_AddNumberToObject(o, "canary", (double)f->canary);
    if (f->max_failures)
        cJSON_AddStringToObject(o, "max_failures", f->max_failures);
    if (f->retry_unavailable)
        cJSON_AddNumberToObject(o, "retry_unavailable", (double)f->retry_unavailable);
}

/* The request line, newline included: the same fields a --request file has, plus op, id,
 * targets, stream. */
static char *request_line(const rexec_request *req, const char *op, const char *targets, int stream,
                          int parallel, int streamed)
{
    cJSON *o = cJSON_CreateObject(), *params = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", op);
    cJSON_AddNumberToObject(o, "id", 1);
    cJSON_AddStringToObject(o, "targets", targets);
    if (req) {
        cJSON_AddStringToObject(o, "action", req->action);
        for (size_t i = 0; i < req->n_params; i++)
            add_param(params, &req->params[i]);
        cJSON_AddItemToObject(o, "params", params);
        params = NULL;
        if (streamed)
            cJSON_AddBoolToObject(o, "stdin_stream", 1);
        else if (req->stdin_data) {
            char *b = malloc(4 * ((req->stdin_len + 2) / 3) + 1);
            if (b)
                rexec_base64_encode(b, req->stdin_data, req->stdin_len);
            cJSON_AddStringToObject(o, "stdin_base64", b ? b : "");
            free(b);
        }
        if (req->grant_id)
            cJSON_AddStringToObject(o, "grant_id", req->grant_id);
        if (req->timeout_s > 0)
            cJSON_AddNumberToObject(o, "timeout_s", req->timeout_s);
        if (req->rationale)
            cJSON_AddStringToObject(o, "rationale", req->rationale);
        if (req->hypothesis_id)
            cJSON_AddStringToObject(o, "hypothesis_id", req->hypothesis_id);
        if (req->traceparent)
            cJSON_AddStringToObject(o, "traceparent", req->traceparent);
        cJSON_AddBoolToObject(o, "stream", stream);
        if (parallel > 0)
            cJSON_AddNumberToObject(o, "parallel", parallel);
        add_fanout(o, &client_fanout);
    }
    cJSON_Delete(params);
    char *text = cJSON_PrintUnformatted(o), *line = NULL;
    cJSON_Delete(o);
    size_t n = text ? strlen(text) : 0;
    if (text && (line = realloc(text, n + 2)) != NULL)
        memcpy(line + n, "\n", 2);
    else
        free(text);
    return line;
}

/* ---- replies -------------------------------------------------------------------------------- */

/* A stdin streamed to serve: the "stdin" lines, one at a time, written as the socket takes
 * them while replies are read (a request that serve ends early stops it). */
typedef struct upload {
    int active;                 /* lines still to send */
    int raw;                    /* serve takes raw pieces ("bytes") */
    int src;                    /* the file or pipe it comes from; -1: from mem */
    const unsigned char *mem;   /* a stdin already in memory */
    size_t mem_len, mem_off;
    char *line;                 /* the line being written */
    size_t len, off;
    char *err;                  /* why it stopped (a read error), malloc'd */
} upload;

typedef struct client {
    int fd, json, eval, cancel_sent, status, finished, accepted;
    int stdin_bytes; /* serve's "accepted" said it takes raw stdin pieces */
    int same_user, one_user_said; /* serve runs as our own user: its challenges are ours too */
    int sink_rc; /* --output FILE could not be written: 73 (sink.c) */
    cli_prefixer *pf; /* one per host when several report */
    size_t n_hosts;
} client;

static const char *js(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jn(const cJSON *o, const char *k, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static int jb(const cJSON *o, const char *k)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* "key" as text, or "key_base64" decoded; malloc'd (NULL when neither is there). */
static unsigned char *jbytes(const cJSON *o, const char *key, size_t *len)
{
    char k64[64];
    const char *t = js(o, key);
    *len = 0;
    if (t) {
        *len = strlen(t);
        return (unsigned char *)strdup(t);
    }
    snprintf(k64, sizeof(k64), "%s_base64", key);
    if ((t = js(o, k64)) == NULL)
        return NULL;
    size_t n = strlen(t);
    unsigned char *b = malloc(n / 4 * 3 + 1);
    long got = b ? rexec_base64_decode(b, t, n) : -1;
    if (got < 0) {
        free(b);
        return NULL;
    }
    *len = (size_t)got;
    return b;
}

static cli_prefixer *prefixer(client *c, const char *host)
{
    for (size_t i = 0; host && i < c->n_hosts; i++)
        if (strcmp(c->pf[i].host, host) == 0)
            return &c->pf[i];
    return NULL;
}

static void on_accepted(client *c, const cJSON *o)
{
    const cJSON *hosts = cJSON_GetObjectItemCaseSensitive(o, "hosts"), *h;
    c->stdin_bytes = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "stdin_bytes"));
    c->n_hosts = (size_t)cJSON_GetArraySize(hosts);
    c->pf = calloc(c->n_hosts + 1, sizeof(*c->pf));
    size_t i = 0;
    cJSON_ArrayForEach(h, hosts) {
        if (c->pf && cJSON_IsString(h))
            c->pf[i++].host = strdup(h->valuestring);
    }
}

static void send_cancel_line(client *c);

static void on_output(client *c, const cJSON *o)
{
    size_t n;
    unsigned char *data = jbytes(o, "data", &n);
    const char *stream = js(o, "stream");
    int id = stream && strcmp(stream, "stderr") == 0 ? REXEC_STDERR : REXEC_STDOUT;
    cli_prefixer *pf = c->n_hosts > 1 ? prefixer(c, js(o, "host")) : NULL;
    if (data && id == REXEC_STDOUT && cli_sink_active()) {
        if (cli_sink_write(data, n) != 0 && !c->cancel_sent)
            send_cancel_line(c); /* --output cannot take it: stop the call */
    } else if (data && pf)
        cli_prefix_write(pf, id, data, n);
    else if (data)
        cli_write_all(id == REXEC_STDOUT ? 1 : 2, data, n);
    free(data);
}

/* A "result" line back into a rexec_result, so it prints exactly as a direct call's. */
static void on_result(client *c, const cJSON *o)
{
    rexec_result r = {.run_id = js(o, "run_id"), .host = js(o, "host"), .action = js(o, "action"),
                      .decision = js(o, "decision"), .reason = js(o, "reason"),
                      .effective_risk = js(o, "effective_risk"), .executed = jb(o, "executed"),
                      .exit_code = (int)jn(o, "exit_code", -1), .signal = js(o, "signal"),
                      .timed_out = jb(o, "timed_out"), .truncated = jb(o, "truncated"),
                      .stdout_bytes = (uint64_t)jn(o, "stdout_bytes", 0),
                      .stderr_bytes = (uint64_t)jn(o, "stderr_bytes", 0),
                      .stdout_sha256 = js(o, "stdout_sha256"),
                      .duration_ms = (uint64_t)jn(o, "duration_ms", 0),
                      .containment = js(o, "containment"), .evidence = js(o, "evidence"),
                      .challenge_id = js(o, "challenge_id"), .rendered = js(o, "rendered"),
                      .error = js(o, "error"), .exit_status = (int)jn(o, "exit_status", 70),
                      .batch_id = js(o, "batch_id"), .traceparent = js(o, "traceparent"),
                      .stdout_truncated_in_result = jb(o, "stdout_truncated_in_result"),
                      .stderr_truncated_in_result = jb(o, "stderr_truncated_in_result"),
                      .cap_killed = jb(o, "cap_killed"),
                      .tries = (unsigned)jn(o, "tries", 0),
                      .put_sha256 = js(o, "put_sha256")};
    unsigned char *out = c->json ? jbytes(o, "stdout", &r.stdout_len) : NULL;
    unsigned char *err = c->json ? jbytes(o, "stderr", &r.stderr_len) : NULL;
    r.stdout_data = out;
    r.stderr_data = err;
    cli_prefixer *pf = prefixer(c, r.host);
    if (pf && !c->json)
        cli_prefix_flush(pf);
    c->sink_rc = cli_sink_finish(&r, c->json);
    cli_show_result(&r, c->json, c->eval);
    if (r.challenge_id && !c->json && c->same_user && !c->one_user_said++)
        cli_note_one_user();
    free(out);
    free(err);
}

/* The reply's facts object back into "key=value" lines, as a direct check reports them. */
static char *facts_text(const cJSON *o)
{
    const cJSON *f;
    size_t cap = 1, n = 0;
    char *t = calloc(1, 1);
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(o, "facts")) {
        if (!cJSON_IsString(f) || t == NULL)
            continue;
        size_t need = strlen(f->string) + strlen(f->valuestring) + 2;
        char *b = realloc(t, cap += need);
        if (b == NULL)
            break;
        t = b;
        n += (size_t)sprintf(t + n, "%s=%s\n", f->string, f->valuestring);
    }
    return t;
}

static void on_check(client *c, const cJSON *o)
{
    char *facts = facts_text(o);
    rexec_check_result r = {.host = js(o, "host"), .ok = jb(o, "ok"), .error = js(o, "error"),
                            .facts = facts ? facts : "",
                            .containment = js(o, "containment"), .warning = js(o, "warning"),
                            .duration_ms = (uint64_t)jn(o, "duration_ms", 0),
                            .exit_status = (int)jn(o, "exit_status", 70)};
    cli_show_check(&r, c->json);
    free(facts);
}

/* One reply line; returns 1 when the request is over. */
static int on_line(client *c, const char *line)
{
    cJSON *o = cJSON_Parse(line);
    const char *type = o ? js(o, "type") : NULL;
    int over = 0;
    if (type == NULL)
        c->status = cli_error(70, "unreadable reply from rexec serve");
    else if (strcmp(type, "accepted") == 0)
        on_accepted(c, o), c->accepted = 1;
    else if (strcmp(type, "output") == 0)
        on_output(c, o);
    else if (strcmp(type, "result") == 0)
        on_result(c, o);
    else if (strcmp(type, "check") == 0)
        on_check(c, o);
    else if (strcmp(type, "done") == 0)
        c->status = (int)jn(o, "exit_status", 70), over = 1;
    else if (strcmp(type, "error") == 0)
        c->status = cli_error((int)jn(o, "exit_status", 70), "%s", js(o, "error") ? js(o, "error") : "error"),
        over = 1;
    if (over && c->sink_rc != 0)
        c->status = c->sink_rc; /* --output FILE could not be written (the root cause) */
    cJSON_Delete(o);
    return over || type == NULL;
}

/* ---- the conversation ----------------------------------------------------------------------- */

static void send_cancel_line(client *c)
{
    static const char line[] = "{\"op\":\"cancel\",\"id\":2,\"target\":1}\n";
    c->cancel_sent = 1;
    cli_write_all(c->fd, line, sizeof(line) - 1);
}

static void send_cancel(client *c)
{
    dprintf(2, "\nrexec: interrupted: stopping the remote commands (again to leave at once)\n");
    send_cancel_line(c);
}

/* The next piece of stdin into buf (at most cap bytes): how many, 0 at the end, -1 on error. */
static ssize_t upload_read(upload *up, unsigned char *buf, size_t cap)
{
    ssize_t n;
    if (up->src < 0) {
        n = (ssize_t)(up->mem_len - up->mem_off < cap ? up->mem_len - up->mem_off : cap);
        memcpy(buf, up->mem + up->mem_off, (size_t)n);
        up->mem_off += (size_t)n;
        return n;
    }
    do
        n = read(up->src, buf, cap);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        up->err = strdup(strerror(errno));
    return n;
}

/* The next "stdin" line into up->line: a piece (raw after its line, or in it as base64), or the
 * "eof" line once the source is done. */
static int upload_next(upload *up)
{
    static const char eof[] = "{\"op\":\"stdin\",\"target\":1,\"eof\":true}\n";
    unsigned char piece[CLIENT_STDIN_PIECE];
    ssize_t n;
    up->off = 0;
    if (up->raw) { /* the line, then the bytes read straight after it */
        unsigned char *data = (unsigned char *)up->line + CLIENT_RAW_HEAD_MAX;
        if ((n = upload_read(up, data, CLIENT_RAW_PIECE)) < 0)
            return -1;
        if (n > 0) {
            char head[CLIENT_RAW_HEAD_MAX];
            int h = snprintf(head, sizeof(head), "{\"op\":\"stdin\",\"target\":1,\"bytes\":%zd}\n", n);
            memmove(up->line + CLIENT_RAW_HEAD_MAX - h, head, (size_t)h);
            up->off = CLIENT_RAW_HEAD_MAX - (size_t)h;
            up->len = CLIENT_RAW_HEAD_MAX + (size_t)n;
            return 0;
        }
    } else if ((n = upload_read(up, piece, sizeof(piece))) < 0) {
        return -1;
    }
    if (n == 0) {
        memcpy(up->line, eof, sizeof(eof) - 1);
        up->len = sizeof(eof) - 1;
        up->active = 0;
        return 0;
    }
    size_t h = sizeof(CLIENT_STDIN_HEAD) - 1;
    memcpy(up->line, CLIENT_STDIN_HEAD, h);
    h += rexec_base64_encode(up->line + h, piece, (size_t)n);
    memcpy(up->line + h, "\"}\n", 3);
    up->len = h + 3;
    explicit_bzero(piece, sizeof(piece));
    return 0;
}

/* Writes what the socket takes of the pending line. -1 when serve is gone. */
static int upload_write(client *c, upload *up)
{
    ssize_t n = write(c->fd, up->line + up->off, up->len - up->off);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    up->off += (size_t)n;
    return 0;
}

/* Splits what arrived into reply lines; returns 1 when the request is over. */
static int take_replies(client *c, const char *buf, size_t n, char **line, size_t *cap, size_t *len)
{
    for (size_t i = 0; i < n; i++) {
        if (*len + 1 >= *cap) {
            char *l = realloc(*line, *cap *= 2);
            if (l == NULL)
                return 1;
            *line = l;
        }
        if (buf[i] != '\n') {
            (*line)[(*len)++] = buf[i];
            continue;
        }
        (*line)[*len] = 0;
        *len = 0;
        if (on_line(c, *line))
            return 1;
    }
    return 0;
}

/* Reads reply lines until "done" (or an error), sending up's stdin lines (when up is not NULL)
 * once serve has accepted the request. A Ctrl-C sends a cancel between two lines. */
static int converse(client *c, upload *up)
{
    char buf[65536];
    size_t cap = 65536, len = 0;
    char *line = malloc(cap);
    struct pollfd p = {.fd = c->fd};
    int over = line == NULL;
    while (!over) {
        int pending = up && up->off < up->len;
        if (interrupted && up)
            up->active = 0; /* no more stdin; the line half written goes out first */
        if (interrupted && !c->cancel_sent && !pending)
            send_cancel(c);
        if (up && !pending && up->active && c->accepted && !interrupted) {
            up->raw = c->stdin_bytes;
            if (upload_next(up) != 0) {
                c->status = cli_error(74, "--stdin: cannot read it: %s", up->err ? up->err : "?");
                break;
            }
            pending = 1;
        }
        p.events = POLLIN | (pending ? POLLOUT : 0);
        if (poll(&p, 1, -1) < 0)
            continue; /* EINTR: a signal; the loop head sends the cancel */
        if ((p.revents & POLLOUT) && upload_write(c, up) != 0) {
            c->status = cli_error(255, "rexec serve closed the connection");
            break;
        }
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t n = read(c->fd, buf, sizeof(buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            c->status = cli_error(255, "rexec serve closed the connection");
            break;
        }
        over = take_replies(c, buf, (size_t)n, &line, &cap, &len);
    }
    free(line);
    return interrupted && c->status < 130 ? 130 : c->status;
}

/* How stdin goes: in the request line (0), or streamed in "stdin" lines (1), from a file
 * (req->stdin_path, "-" for our own stdin: opened into up->src) or from memory. */
static int upload_setup(const rexec_request *req, upload *up)
{
    up->src = -1;
    if (req == NULL || (!req->stdin_path && (!req->stdin_data || req->stdin_len <= CLIENT_MAX_STDIN)))
        return 0;
    if (req->stdin_path && strcmp(req->stdin_path, "-") == 0)
        up->src = 0;
    else if (req->stdin_path && (up->src = open(req->stdin_path, O_RDONLY | O_CLOEXEC)) < 0)
        return -cli_error(65, "--stdin %s: %s", cli_arg(req->stdin_path), strerror(errno));
    up->mem = req->stdin_data;
    up->mem_len = req->stdin_len;
    up->line = malloc(CLIENT_LINE_MAX); /* a raw piece and its line, or a base64 line */
    if (up->line == NULL) {
        if (up->src > 0)
            close(up->src);
        return -cli_error(70, "out of memory");
    }
    up->active = 1;
    return 1;
}

static void upload_free(upload *up)
{
    if (up->src > 0)
        close(up->src);
    if (up->line)
        explicit_bzero(up->line, CLIENT_LINE_MAX);
    free(up->line);
    free(up->err);
}

int cli_client_call(const char *socket_path, const char *op, const rexec_request *req,
                    const char *targets, int json, int parallel)
{
    client c = {.json = json, .eval = strcmp(op, "eval") == 0};
    struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART: poll must wake up */
    int fd = connect_socket(socket_path);
    if (fd < 0)
        return -fd;
    c.fd = fd;
    struct ucred peer;
    socklen_t plen = sizeof(peer);
    c.same_user = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &plen) == 0 &&
                  peer.uid == getuid();
    upload up = {0};
    int streamed = upload_setup(req, &up);
    if (streamed < 0) {
        close(fd);
        return -streamed;
    }
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* a closed terminal cancels, as in a direct run */
    signal(SIGPIPE, SIG_IGN);
    char *line = request_line(req, op, targets, !json, parallel, streamed);
    if (line == NULL) {
        upload_free(&up);
        close(fd);
        return cli_error(70, "out of memory");
    }
    cli_write_all(fd, line, strlen(line)); /* with its newline: one write, one wake-up of serve */
    free(line);
    cli_redact_serve_replies(); /* what follows is serve's, redacted there */
    /* the stdin lines are written as the socket takes them, between replies */
    if (streamed)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int rc = converse(&c, streamed ? &up : NULL);
    upload_free(&up);
    for (size_t i = 0; c.pf && i < c.n_hosts; i++) {
        cli_prefix_flush(&c.pf[i]);
        free((char *)c.pf[i].host);
    }
    free(c.pf);
    close(fd);
    return rc;
}
