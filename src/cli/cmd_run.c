/* `rexec run` and `rexec eval`: one call per target host, bounded in parallel, on one loop. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "cli.h"
#include "rexec.h"

#define MAX_PARAMS 256
#define MAX_STDIN_FILE (1024u * 1024u * 1024u)

typedef struct run_opts {
    const char *targets, *action, *request_file, *stdin_file, *grant;
    rexec_param params[MAX_PARAMS];
    size_t n_params;
    double timeout_s;
    int json, parallel, approve, eval;
} run_opts;

struct run;

/* One host's call, and the line prefixer used when several hosts share the terminal. */
typedef struct host_call {
    struct run *run;
    const char *host;
    rexec_call *call;
    int done;
    char *partial[2];
    size_t partial_len[2];
} host_call;

typedef struct run {
    uv_loop_t loop;
    rexec_ctx *ctx;
    rexec_request req;
    run_opts *o;
    host_call *hosts;
    size_t n_hosts, next, running, finished, failed;
    int worst;
    int interrupted;
    int progress; /* stderr is a terminal and there are several hosts */
    uv_signal_t sigint, sigterm;
} run;

/* ---- output --------------------------------------------------------------------------------- */

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a closed pipe: nothing sensible left to do with the bytes */
        c += w;
        n -= (size_t)w;
    }
}

/* Several hosts: each line becomes "[host] line", so interleaved output stays readable. */
static void prefixed(host_call *h, int idx, const unsigned char *data, size_t len)
{
    int fd = idx == 0 ? 1 : 2;
    for (size_t i = 0; i < len; i++) {
        char *p = realloc(h->partial[idx], h->partial_len[idx] + 1);
        if (p == NULL)
            return;
        h->partial[idx] = p;
        p[h->partial_len[idx]++] = (char)data[i];
        if (data[i] == '\n') {
            dprintf(fd, "[%s] %.*s", h->host, (int)h->partial_len[idx], p);
            h->partial_len[idx] = 0;
        }
    }
}

static void flush_prefixed(host_call *h)
{
    for (int idx = 0; idx < 2; idx++) {
        if (h->partial_len[idx])
            dprintf(idx == 0 ? 1 : 2, "[%s] %.*s\n", h->host, (int)h->partial_len[idx],
                    h->partial[idx]);
        free(h->partial[idx]);
        h->partial[idx] = NULL;
    }
}

static void on_output(void *ud, int stream, const void *data, size_t len)
{
    host_call *h = ud;
    if (h->run->o->json)
        return;
    if (h->run->n_hosts > 1)
        prefixed(h, stream == REXEC_STDOUT ? 0 : 1, data, len);
    else
        write_all(stream == REXEC_STDOUT ? 1 : 2, data, len);
}

/* A stream as a JSON string when it is UTF-8 text, else as "<name>_base64". */
static void add_stream(cJSON *o, const char *name, const unsigned char *p, size_t n)
{
    char key[32];
    if (p == NULL) {
        cJSON_AddNullToObject(o, name);
        return;
    }
    if (rexec_utf8_valid(p, n) && memchr(p, 0, n) == NULL) {
        char *s = strndup((const char *)p, n);
        cJSON_AddStringToObject(o, name, s ? s : "");
        free(s);
        return;
    }
    unsigned char *b = malloc(4 * ((n + 2) / 3) + 1);
    if (b)
        EVP_EncodeBlock(b, p, (int)n);
    cJSON_AddNullToObject(o, name);
    snprintf(key, sizeof(key), "%s_base64", name);
    cJSON_AddStringToObject(o, key, b ? (char *)b : "");
    free(b);
}

static void add_s(cJSON *o, const char *k, const char *v)
{
    if (v)
        cJSON_AddStringToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static void print_json(const rexec_result *r)
{
    cJSON *o = cJSON_CreateObject();
    add_s(o, "run_id", r->run_id);
    add_s(o, "host", r->host);
    add_s(o, "action", r->action);
    add_s(o, "decision", r->decision);
    add_s(o, "reason", r->reason);
    add_s(o, "effective_risk", r->effective_risk);
    cJSON_AddBoolToObject(o, "executed", r->executed);
    if (r->exit_code >= 0)
        cJSON_AddNumberToObject(o, "exit_code", r->exit_code);
    else
        cJSON_AddNullToObject(o, "exit_code");
    add_s(o, "signal", r->signal);
    cJSON_AddBoolToObject(o, "timed_out", r->timed_out);
    cJSON_AddBoolToObject(o, "truncated", r->truncated);
    add_stream(o, "stdout", r->stdout_data, r->stdout_len);
    add_stream(o, "stderr", r->stderr_data, r->stderr_len);
    cJSON_AddNumberToObject(o, "stdout_bytes", (double)r->stdout_bytes);
    cJSON_AddNumberToObject(o, "stderr_bytes", (double)r->stderr_bytes);
    add_s(o, "stdout_sha256", r->stdout_sha256);
    cJSON_AddNumberToObject(o, "duration_ms", (double)r->duration_ms);
    add_s(o, "containment", r->containment);
    add_s(o, "evidence", r->evidence);
    add_s(o, "challenge_id", r->challenge_id);
    add_s(o, "rendered", r->rendered);
    add_s(o, "error", r->error);
    cJSON_AddNumberToObject(o, "exit_status", r->exit_status);
    char *text = cJSON_PrintUnformatted(o);
    if (text) {
        write_all(1, text, strlen(text));
        write_all(1, "\n", 1);
    }
    free(text);
    cJSON_Delete(o);
}

/* ---- the calls ------------------------------------------------------------------------------ */

static void launch_more(run *r);

static void progress_line(run *r)
{
    if (r->progress)
        dprintf(2, "\r\033[Krexec: %zu/%zu hosts done, %zu failed%s", r->finished, r->n_hosts,
                r->failed, r->finished == r->n_hosts ? "\n" : "");
}

/* Messages for people: what happened when the call did not simply run to its exit status. */
static void print_outcome(const run *r, const rexec_result *res)
{
    if (res->error)
        dprintf(2, "rexec: %s\n", res->error);
    if (res->challenge_id)
        dprintf(2, "rexec: approval required: challenge %s\n"
                   "rexec: an operator runs `rexec approve %s` at a terminal, then call again "
                   "with --grant %s\n",
                res->challenge_id, res->challenge_id, res->challenge_id);
    if (res->timed_out)
        dprintf(2, "rexec: %s: the action hit its timeout and was stopped\n", res->host);
    if (res->truncated)
        dprintf(2, "rexec: %s: output truncated at max_output_bytes\n", res->host);
    if (r->o->eval && res->decision)
        dprintf(1, "%s%s: %s (%s, %s)%s%s\n", r->n_hosts > 1 ? "" : "", res->host, res->decision,
                res->reason ? res->reason : "-", res->effective_risk ? res->effective_risk : "-",
                res->rendered ? "\n  would run: " : "", res->rendered ? res->rendered : "");
}

static void on_done(void *ud, const rexec_result *res)
{
    host_call *h = ud;
    run *r = h->run;
    h->done = 1;
    h->call = NULL;
    r->running--;
    r->finished++;
    if (res->exit_status != 0)
        r->failed++;
    /* Several hosts: the largest status wins (255 host unavailable > 77 denied > 1 ...). */
    if (res->exit_status > r->worst)
        r->worst = res->exit_status;
    if (r->n_hosts > 1 && !r->o->json)
        flush_prefixed(h);
    if (r->o->json)
        print_json(res);
    else
        print_outcome(r, res);
    progress_line(r);
    launch_more(r);
    if (r->finished == r->n_hosts) {
        uv_close((uv_handle_t *)&r->sigint, NULL);
        uv_close((uv_handle_t *)&r->sigterm, NULL);
        rexec_ctx_close(r->ctx, NULL, NULL);
    }
}

static void launch_more(run *r)
{
    while (r->next < r->n_hosts && r->running < (size_t)r->o->parallel && !r->interrupted) {
        host_call *h = &r->hosts[r->next++];
        rexec_callbacks cb = {on_output, on_done, h};
        rexec_error e;
        rexec_request req = r->req;
        req.host = h->host;
        r->running++;
        if (rexec_call_start(r->ctx, &req, &cb, &h->call, &e) != 0) {
            rexec_result res = {.host = h->host, .action = req.action, .exit_code = -1,
                                .err = e.code, .error = e.msg,
                                .exit_status = rexec_err_exit_code(e.code)};
            on_done(h, &res);
        }
    }
}

/* Ctrl-C or SIGTERM: cancel every call (the remote side stops its process tree); a second
 * Ctrl-C leaves at once. */
static void on_signal(uv_signal_t *s, int signum)
{
    run *r = s->data;
    if (r->interrupted) {
        dprintf(2, "\nrexec: interrupted again: leaving without waiting for the hosts\n");
        _exit(130);
    }
    r->interrupted = 1;
    dprintf(2, "\nrexec: %s: stopping the remote commands (again to leave at once)\n",
            signum == SIGINT ? "interrupted" : "terminated");
    for (size_t i = 0; i < r->n_hosts; i++)
        if (r->hosts[i].call)
            rexec_call_cancel(r->hosts[i].call);
    /* hosts never started count as done */
    while (r->next < r->n_hosts) {
        host_call *h = &r->hosts[r->next++];
        rexec_result res = {.host = h->host, .action = r->req.action, .exit_code = -1,
                            .err = REXEC_ECANCELLED, .error = "cancelled before it started",
                            .exit_status = 130};
        r->running++;
        on_done(h, &res);
    }
}

/* ---- arguments ------------------------------------------------------------------------------ */

static int parse_param(run_opts *o, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv)
        return cli_error(64, "--param wants NAME=VALUE, got \"%s\"", kv);
    if (o->n_params == MAX_PARAMS)
        return cli_error(64, "too many --param (at most %d)", MAX_PARAMS);
    char *name = strndup(kv, (size_t)(eq - kv));
    if (name == NULL)
        return cli_error(70, "out of memory");
    o->params[o->n_params++] = (rexec_param){name, eq + 1, strlen(eq + 1)};
    return 0;
}

static int parse_number(const char *opt, const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= min && v <= max))
        return cli_error(64, "%s wants a number from %g to %g, got \"%s\"", opt, min, max, s);
    *out = v;
    return 0;
}

/* An option's value: "--opt VALUE" or "--opt=VALUE". Returns NULL (and moves nothing) if argv[*i]
 * is not this option. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != 0)
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int parse_option(run_opts *o, int argc, char **argv, int *i)
{
    const char *v;
    int missing = 0;
    double d = 0;
    if ((v = opt_value(argc, argv, i, "--param", &missing)) ||
        (v = opt_value(argc, argv, i, "-p", &missing)))
        return parse_param(o, v);
    if ((v = opt_value(argc, argv, i, "--request", &missing)))
        return o->request_file = v, 0;
    if ((v = opt_value(argc, argv, i, "--stdin", &missing)))
        return o->stdin_file = v, 0;
    if ((v = opt_value(argc, argv, i, "--grant", &missing)))
        return o->grant = v, 0;
    if ((v = opt_value(argc, argv, i, "--timeout", &missing)))
        return parse_number("--timeout", v, 0.001, 604800, &o->timeout_s);
    if ((v = opt_value(argc, argv, i, "--parallel", &missing))) {
        int r = parse_number("--parallel", v, 1, 1024, &d);
        o->parallel = (int)d;
        return r;
    }
    if (missing)
        return cli_error(64, "%s needs a value (see `rexec help %s`)", argv[*i],
                         o->eval ? "eval" : "run");
    if (strcmp(argv[*i], "--json") == 0)
        return o->json = 1, 0;
    if (strcmp(argv[*i], "--approve") == 0)
        return o->approve = 1, 0;
    return cli_error(64, "unknown option %s (see `rexec help %s`)", argv[*i],
                     o->eval ? "eval" : "run");
}

static int parse_args(run_opts *o, int argc, char **argv)
{
    int positional = 0, r;
    o->eval = strcmp(argv[0], "eval") == 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != 0) {
            if ((r = parse_option(o, argc, argv, &i)) != 0)
                return r;
        } else if (positional == 0) {
            o->targets = argv[i], positional++;
        } else if (positional == 1) {
            o->action = argv[i], positional++;
        } else {
            return cli_error(64, "unexpected argument \"%s\" (parameters go as --param NAME=VALUE)",
                             argv[i]);
        }
    }
    if (o->targets == NULL)
        return cli_error(64, "usage: rexec %s TARGETS ACTION [--param NAME=VALUE]... (see `rexec "
                             "help %s`)", argv[0], argv[0]);
    if (o->action == NULL && o->request_file == NULL)
        return cli_error(64, "no ACTION given (as an argument or in --request FILE)");
    if (o->grant && o->approve)
        return cli_error(64, "--grant and --approve are exclusive");
    return 0;
}

/* ---- inputs --------------------------------------------------------------------------------- */

static int read_file(const char *path, size_t max, unsigned char **data, size_t *len)
{
    int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    size_t cap = 65536, n = 0;
    unsigned char *buf = malloc(cap);
    if (fd < 0 || buf == NULL) {
        free(buf);
        return cli_error(65, "%s: %s", path, strerror(errno));
    }
    for (;;) {
        if (n == cap) {
            unsigned char *b = cap >= max ? NULL : realloc(buf, cap *= 2);
            if (b == NULL) {
                free(buf);
                return cli_error(65, "%s: larger than %zu bytes", path, max);
            }
            buf = b;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            free(buf);
            return cli_error(65, "%s: %s", path, strerror(errno));
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    if (fd != 0)
        close(fd);
    *data = buf;
    *len = n;
    return 0;
}

typedef struct run_inputs {
    rexec_request_doc *doc;
    unsigned char *stdin_data;
    rexec_param *params;
} run_inputs;

/* The request: --request FILE first, then the command line's ACTION, --param and --stdin. */
static int build_request(run_opts *o, run_inputs *in, rexec_request *req)
{
    rexec_error e;
    unsigned char *text = NULL;
    size_t len = 0;
    memset(req, 0, sizeof(*req));
    if (o->request_file) {
        int r = read_file(o->request_file, 64 * 1024 + 1, &text, &len);
        if (r == 0 && rexec_request_doc_parse((char *)text, len, &in->doc, req, &e) != 0)
            r = cli_error(rexec_err_exit_code(e.code), "%s: %s", o->request_file, e.msg);
        free(text);
        if (r)
            return r;
        if (req->action && o->action && strcmp(req->action, o->action) != 0)
            return cli_error(64, "ACTION %s differs from the request's \"%s\"", o->action,
                             req->action);
    }
    if (o->action)
        req->action = o->action;
    in->params = calloc(req->n_params + o->n_params + 1, sizeof(rexec_param));
    if (in->params == NULL)
        return cli_error(70, "out of memory");
    if (req->n_params)
        memcpy(in->params, req->params, req->n_params * sizeof(rexec_param));
    if (o->n_params)
        memcpy(in->params + req->n_params, o->params, o->n_params * sizeof(rexec_param));
    req->params = in->params;
    req->n_params += o->n_params;
    if (o->stdin_file) {
        if (req->stdin_data)
            return cli_error(64, "--stdin and the request's stdin are exclusive");
        int r = read_file(o->stdin_file, MAX_STDIN_FILE, &in->stdin_data, &req->stdin_len);
        if (r)
            return r;
        req->stdin_data = in->stdin_data;
    }
    if (o->timeout_s > 0)
        req->timeout_s = o->timeout_s;
    req->grant_id = o->grant;
    req->eval_only = o->eval;
    req->capture = o->json;
    return 0;
}

static void inputs_free(run_inputs *in, run_opts *o)
{
    rexec_request_doc_free(in->doc);
    free(in->stdin_data);
    free(in->params);
    for (size_t i = 0; i < o->n_params; i++)
        free((char *)o->params[i].name);
}

static int run_loop(run *r, const char *const *names)
{
    r->hosts = calloc(r->n_hosts, sizeof(host_call));
    if (r->hosts == NULL)
        return cli_error(70, "out of memory");
    for (size_t i = 0; i < r->n_hosts; i++)
        r->hosts[i] = (host_call){.run = r, .host = names[i]};
    r->progress = r->n_hosts > 1 && isatty(2) && !r->o->json;
    uv_signal_init(&r->loop, &r->sigint);
    uv_signal_init(&r->loop, &r->sigterm);
    r->sigint.data = r->sigterm.data = r;
    uv_signal_start(&r->sigint, on_signal, SIGINT);
    uv_signal_start(&r->sigterm, on_signal, SIGTERM);
    launch_more(r);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    free(r->hosts);
    return r->interrupted && r->worst < 130 ? 130 : r->worst;
}

int cli_run(const cli_global *g, int argc, char **argv)
{
    run_opts o = {0};
    run_inputs in = {0};
    run r = {.o = &o};
    rexec_error e;
    const char **names = NULL;
    int rc = parse_args(&o, argc, argv);
    signal(SIGPIPE, SIG_IGN);
    if (rc == 0 && (rc = build_request(&o, &in, &r.req)) == 0) {
        uv_loop_init(&r.loop);
        if (rexec_ctx_new(&r.ctx, &r.loop, g->workspace, &e) != 0)
            rc = cli_error(rexec_err_exit_code(e.code), "%s", e.msg);
        else if (rexec_ctx_targets(r.ctx, o.targets, &names, &r.n_hosts, &e) != 0) {
            rc = cli_error(rexec_err_exit_code(e.code), "%s", e.msg);
            rexec_ctx_close(r.ctx, NULL, NULL);
        } else {
            if (o.parallel == 0)
                o.parallel = 16;
            rc = run_loop(&r, names);
        }
        uv_run(&r.loop, UV_RUN_DEFAULT); /* let the context finish closing */
        uv_loop_close(&r.loop);
        free(names);
    }
    inputs_free(&in, &o);
    return rc;
}
