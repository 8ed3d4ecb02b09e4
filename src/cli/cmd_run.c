/* `rexec run` and `rexec eval`: one call per target host, bounded in parallel, on one loop. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "rexec.h"

#define MAX_PARAMS 256
#define MAX_STDIN_FILE (1024u * 1024u * 1024u)

typedef struct run_opts {
    const char *targets, *action, *request_file, *stdin_file, *grant, *socket;
    const char *output; /* --output FILE: stdout into FILE (sink.c) */
    const char *traceparent; /* --traceparent */
    int stdin_stream; /* a regular --stdin file goes to the library by name: streamed */
    int via_socket;   /* through serve: any --stdin FILE ("-" too) goes by name to the client */
    rexec_param params[MAX_PARAMS];
    size_t n_params;
    double timeout_s;
    double stdin_timeout_s; /* --stdin-timeout: the longest pause of a piped --stdin */
    int json, parallel, approve, eval, no_progress;
    rexec_fanout_spec fanout; /* --batch, --canary, --max-failures, --retry-unavailable */
} run_opts;

struct run;

/* One host's call, and the line prefixer used when several hosts share the terminal. */
typedef struct host_call {
    struct run *run;
    const char *host;
    rexec_call *call;
    int done, approved;
    char grant[64];
    cli_prefixer pf;
} host_call;

typedef struct run {
    uv_loop_t loop;
    rexec_ctx *ctx;
    rexec_request req;
    run_opts *o;
    host_call *hosts;
    size_t n_hosts, next, running, finished, failed;
    int worst;
    char batch[REXEC_BATCH_ID_SIZE]; /* a fan-out's batch_id */
    int interrupted;
    int one_user_said; /* the one-user note is said once per run */
    int progress; /* stderr is a terminal and there are several hosts */
    int drawn;    /* the progress line is on the screen (no newline after it yet) */
    uv_signal_t sigs[3]; /* SIGINT, SIGTERM, SIGHUP: each ends the run the same way */
    size_t n_sigs;       /* how many of sigs are initialised (and must be closed) */
    rexec_fanout *fan;   /* the fan-out's controls, or NULL when none was asked for */
    const char *const *names;
} run;

static const int run_signals[3] = {SIGINT, SIGTERM, SIGHUP};

/* ---- output --------------------------------------------------------------------------------- */

/* The progress line lives on the terminal's last line: it is wiped before anything else is
 * printed and drawn again after, so host output never runs into it. */
static void progress_clear(run *r)
{
    if (r->drawn)
        cli_write_all(2, "\r\033[K", 4);
    r->drawn = 0;
}

static void progress_draw(run *r)
{
    if (!r->progress)
        return;
    int last = r->finished == r->n_hosts;
    rexec_fanout_progress fp;
    rexec_fanout_get_progress(r->fan, &fp);
    if (r->fan && fp.batches > 1) /* the batch, and the hosts the threshold kept from starting */
        dprintf(2, "\r\033[Krexec: batch %zu/%zu, %zu/%zu hosts done, %zu failed, %zu skipped%s%s",
                fp.batch, fp.batches, r->finished, r->n_hosts, r->failed, fp.skipped,
                fp.stopped ? " (stopped: too many failures)" : "", last ? "\n" : "");
    else
        dprintf(2, "\r\033[Krexec: %zu/%zu hosts done, %zu failed%s", r->finished, r->n_hosts,
                r->failed, last ? "\n" : "");
    r->drawn = !last;
}

static void on_output(void *ud, int stream, const void *data, size_t len)
{
    host_call *h = ud;
    run *r = h->run;
    if (stream == REXEC_STDOUT && cli_sink_active()) {
        if (cli_sink_write(data, len) != 0 && h->call)
            rexec_call_cancel(h->call); /* its output has nowhere to go */
        return;
    }
    if (r->o->json)
        return;
    if (r->n_hosts > 1) {
        int was = r->drawn, lines = memchr(data, '\n', len) != NULL;
        if (lines) /* whole lines reach the screen: wipe the progress line first */
            progress_clear(r);
        cli_prefix_write(&h->pf, stream, data, len);
        if (lines && was)
            progress_draw(r);
    } else {
        cli_write_all(stream == REXEC_STDOUT ? 1 : 2, data, len);
    }
}

/* ---- the calls ------------------------------------------------------------------------------ */

static void launch_more(run *r);

static void start_call(run *r, host_call *h);

/* --approve: the operator confirms at this terminal, then the call runs again with its grant. */
static int approve_inline(run *r, host_call *h, const rexec_result *res)
{
    rexec_error e;
    if (!r->o->approve || h->approved || res->challenge_id == NULL || r->interrupted)
        return 0;
    h->approved = 1;
    if (rexec_approve_tty(r->ctx, res->challenge_id, &e) != 0) {
        char *m = cli_redact(e.msg);
        dprintf(2, "rexec: %s\n", m);
        free(m);
        return 0;
    }
    snprintf(h->grant, sizeof(h->grant), "%s", res->challenge_id);
    start_call(r, h);
    return 1;
}

/* --retry-unavailable: a call that provably never reached its host goes again. */
static int retry_unavailable(run *r, host_call *h, const rexec_result *res)
{
    size_t i = (size_t)(h - r->hosts);
    if (r->interrupted || !rexec_fanout_retry(r->fan, i, res))
        return 0;
    if (!r->o->json) {
        char *m = cli_redact(res->error ? res->error : "host unavailable");
        progress_clear(r);
        dprintf(2, "rexec: %s (try %u of %ld); trying again in %.1f s\n", m,
                rexec_fanout_tries(r->fan, i) - 1, r->o->fanout.retry_unavailable + 1,
                rexec_fanout_delay_ms(r->fan, i) / 1000.0);
        free(m);
        progress_draw(r);
    }
    start_call(r, h);
    return 1;
}

/* A host is over: counted, shown, and the progress line drawn again. */
static void host_finished(run *r, host_call *h, const rexec_result *in)
{
    rexec_result shown = *in, *res = &shown;
    size_t i = (size_t)(h - r->hosts);
    shown.tries = rexec_fanout_tries(r->fan, i);
    if (r->fan && rexec_fanout_done(r->fan, i, res)) {
        rexec_error e;
        if (rexec_fanout_record_stop(r->ctx, r->fan, r->names, r->req.action, r->req.batch_id,
                                     NULL, 0, &e) != 0)
            dprintf(2, "rexec: %s\n", e.msg);
    }
    h->done = 1;
    r->running--;
    r->finished++;
    int sink_rc = cli_sink_finish(res, r->o->json);
    if ((res->exit_status != 0 && res->err != REXEC_ESTOPPED) || sink_rc != 0)
        r->failed++;
    /* Several hosts: the largest status wins (255 host unavailable > 77 denied > 1 ...). */
    if (res->exit_status > r->worst)
        r->worst = res->exit_status;
    if (sink_rc != 0) /* --output (one host): FILE failed, the root cause (a stop included) */
        r->worst = sink_rc;
    progress_clear(r);
    if (r->n_hosts > 1 && !r->o->json)
        cli_prefix_flush(&h->pf);
    cli_show_result(res, r->o->json, r->o->eval);
    if (res->challenge_id && !r->o->json && !r->o->approve && !r->one_user_said++)
        cli_note_one_user();
    progress_draw(r);
}

static void on_done(void *ud, const rexec_result *res)
{
    host_call *h = ud;
    run *r = h->run;
    h->call = NULL;
    if (approve_inline(r, h, res) || retry_unavailable(r, h, res))
        return;
    host_finished(r, h, res);
    launch_more(r);
    if (r->finished == r->n_hosts) {
        for (size_t i = 0; i < r->n_sigs; i++)
            uv_close((uv_handle_t *)&r->sigs[i], NULL);
        r->n_sigs = 0;
        cli_ctx_close(r->ctx); /* it goes once every call's memory is released */
    }
}

static void start_call(run *r, host_call *h)
{
    rexec_callbacks cb = {.on_output = on_output, .on_done = on_done, .ud = h};
    rexec_error e;
    rexec_request req = r->req;
    req.host = h->host;
    req.start_delay_ms = rexec_fanout_delay_ms(r->fan, (size_t)(h - r->hosts)); /* a retry */
    if (h->grant[0])
        req.grant_id = h->grant;
    if (rexec_call_start(r->ctx, &req, &cb, &h->call, &e) != 0) {
        rexec_result res = rexec_result_not_started(h->host, req.action, e.code, e.msg);
        on_done(h, &res);
    }
}

/* The next hosts, as many as --parallel lets run and the plan lets start: a later batch waits
 * for this one's end; once the failure threshold is crossed, the rest are reported skipped. */
static void launch_more(run *r)
{
    while (r->next < r->n_hosts && r->running < (size_t)r->o->parallel && !r->interrupted) {
        int go = rexec_fanout_next(r->fan, r->next);
        if (go == REXEC_FANOUT_WAIT)
            break;
        host_call *h = &r->hosts[r->next++];
        r->running++;
        if (go == REXEC_FANOUT_SKIP) {
            rexec_result res = rexec_fanout_skipped(r->fan, r->next - 1, h->host, r->req.action);
            host_finished(r, h, &res);
            continue;
        }
        start_call(r, h);
    }
}

/* Ctrl-C, SIGTERM or SIGHUP (the terminal closed, the ssh session to the controller dropped):
 * cancel every call (the remote side stops its process tree) so each still gets its outcome
 * record; a second signal leaves at once. */
static void on_signal(uv_signal_t *s, int signum)
{
    run *r = s->data;
    if (r->interrupted) {
        dprintf(2, "\nrexec: interrupted again: leaving without waiting for the hosts\n");
        _exit(130);
    }
    r->interrupted = 1;
    progress_clear(r);
    dprintf(2, "\nrexec: %s: stopping the remote commands (again to leave at once)\n",
            signum == SIGINT ? "interrupted" : signum == SIGHUP ? "hung up" : "terminated");
    for (size_t i = 0; i < r->n_hosts; i++)
        if (r->hosts[i].call)
            rexec_call_cancel(r->hosts[i].call);
    /* hosts never started count as done */
    while (r->next < r->n_hosts) {
        host_call *h = &r->hosts[r->next++];
        char msg[320];
        snprintf(msg, sizeof(msg), "%s: cancelled before it started", h->host);
        rexec_result res = rexec_result_not_started(h->host, r->req.action, REXEC_ECANCELLED, msg);
        r->running++;
        on_done(h, &res);
    }
}

/* ---- arguments ------------------------------------------------------------------------------ */

static int parse_param(run_opts *o, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv)
        return cli_error(64, "--param wants NAME=VALUE, got \"%s\"", cli_arg(kv));
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
        return cli_error(64, "%s wants a number from %g to %g, got \"%s\"", opt, min, max,
                         cli_arg(s));
    *out = v;
    return 0;
}

/* A whole number min..max, digits only. */
static int parse_whole(const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = s[0] >= '0' && s[0] <= '9' ? strtol(s, &end, 10) : -1;
    if (v < 0 || errno || *end || v < min || v > max)
        return cli_error(64, "%s wants a whole number from %ld to %ld, got \"%s\"", opt, min,
                         max, cli_arg(s));
    *out = v;
    return 0;
}

static int parse_option(run_opts *o, int argc, char **argv, int *i)
{
    const char *v;
    int missing = 0;
    double d = 0;
    if ((v = cli_opt_value(argc, argv, i, "--param", &missing)) ||
        (v = cli_opt_value(argc, argv, i, "-p", &missing)))
        return parse_param(o, v);
    if ((v = cli_opt_value(argc, argv, i, "--request", &missing)))
        return o->request_file = v, 0;
    if ((v = cli_opt_value(argc, argv, i, "--stdin", &missing)))
        return o->stdin_file = v, 0;
    if ((v = cli_opt_value(argc, argv, i, "--output", &missing)))
        return o->output = v, 0;
    if ((v = cli_opt_value(argc, argv, i, "--grant", &missing)))
        return o->grant ? cli_error(64, "--grant given twice: a call uses one grant (a fan-out's "
                                        "grant serves each of its hosts)")
                        : (o->grant = v, 0);
    if ((v = cli_opt_value(argc, argv, i, "--socket", &missing)))
        return o->socket = v, 0;
    if ((v = cli_opt_value(argc, argv, i, "--traceparent", &missing)))
        return o->traceparent = v, 0;
    if ((v = cli_opt_value(argc, argv, i, "--timeout", &missing)))
        return parse_number("--timeout", v, 0.001, 604800, &o->timeout_s);
    if ((v = cli_opt_value(argc, argv, i, "--stdin-timeout", &missing)))
        return parse_number("--stdin-timeout", v, 0.001, 604800, &o->stdin_timeout_s);
    if ((v = cli_opt_value(argc, argv, i, "--batch", &missing)))
        return o->fanout.batch = v, 0;
    if ((v = cli_opt_value(argc, argv, i, "--max-failures", &missing)))
        return o->fanout.max_failures = v, 0;
    if ((v = cli_opt_value(argc, argv, i, "--canary", &missing)))
        return parse_whole("--canary", v, 1, 1000000, &o->fanout.canary);
    if ((v = cli_opt_value(argc, argv, i, "--retry-unavailable", &missing)))
        return parse_whole("--retry-unavailable", v, 0, 10, &o->fanout.retry_unavailable);
    if ((v = cli_opt_value(argc, argv, i, "--parallel", &missing))) {
        int r = parse_number("--parallel", v, 1, 4096, &d);
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
    return cli_error(64, "unknown option %s (see `rexec help %s`)", cli_arg(argv[*i]),
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
                             cli_arg(argv[i]));
        }
    }
    if (o->targets == NULL)
        return cli_error(64, "usage: rexec %s TARGETS ACTION [--param NAME=VALUE]... (see `rexec "
                             "help %s`)", argv[0], argv[0]);
    if (o->action == NULL && o->request_file == NULL)
        return cli_error(64, "no ACTION given (as an argument or in --request FILE)");
    if (o->grant && o->approve)
        return cli_error(64, "--grant and --approve are exclusive");
    if (o->output && o->eval)
        return cli_error(64, "--output: eval runs nothing");
    if (o->output && strchr(o->targets, ',') != NULL)
        return cli_error(64, "--output takes one host (TARGETS is %s)", cli_arg(o->targets));
    if (o->eval && rexec_fanout_wanted(&o->fanout))
        return cli_error(64, "--batch, --canary, --max-failures and --retry-unavailable are "
                             "for rexec run (eval runs nothing)");
    return 0;
}

/* ---- inputs --------------------------------------------------------------------------------- */

/* Reads all of path ("-": stdin) up to max bytes. Every path out closes what it opened. */
static int read_file(const char *path, size_t max, unsigned char **data, size_t *len)
{
    int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    size_t cap = 65536, n = 0;
    unsigned char *buf = fd < 0 ? NULL : malloc(cap);
    if (fd < 0 || buf == NULL) {
        rc = fd < 0 ? cli_error(65, "%s: %s", cli_arg(path), strerror(errno))
                    : cli_error(71, "%s: out of memory", cli_arg(path));
        goto out;
    }
    for (;;) {
        if (n == cap) {
            if (n > max) {
                rc = cli_error(65, "%s: larger than %zu bytes", cli_arg(path), max);
                goto out;
            }
            /* up to one byte more than max: a file of exactly max bytes is read whole */
            unsigned char *b = realloc(buf, cap = cap * 2 > max ? max + 1 : cap * 2);
            if (b == NULL) {
                rc = cli_error(71, "%s: out of memory", cli_arg(path));
                goto out;
            }
            buf = b;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = cli_error(65, "%s: %s", cli_arg(path), strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
out:
    if (fd > 0)
        close(fd);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *data = buf;
    *len = n;
    return 0;
}

typedef struct run_inputs {
    rexec_request_doc *doc;
    unsigned char *stdin_data;
    rexec_param *params;
} run_inputs;

/* The caller's W3C traceparent: --traceparent, else the request's, else $TRACEPARENT (as
 * OpenTelemetry's environment carrier sets it). One that is not valid is a usage error: nothing
 * runs. */
static int trace_context(const run_opts *o, rexec_request *req)
{
    const char *env = getenv("TRACEPARENT"), *what = "--traceparent";
    rexec_error e;
    if (o->traceparent)
        req->traceparent = o->traceparent;
    else if (req->traceparent == NULL && env != NULL)
        req->traceparent = env, what = "$TRACEPARENT";
    else
        return 0; /* none, or the request's (checked when it was parsed) */
    if (rexec_traceparent_check(req->traceparent, what, &e) != 0)
        return cli_error(64, "%s", e.msg);
    return 0;
}

/* The request: --request FILE first, then the command line's ACTION, --param and --stdin. */
static int build_request(run_opts *o, run_inputs *in, rexec_request *req)
{
    rexec_error e;
    unsigned char *text = NULL;
    size_t len = 0;
    memset(req, 0, sizeof(*req));
    if (o->request_file) {
        int r = read_file(o->request_file, REXEC_REQUEST_MAX_BYTES, &text, &len);
        if (r == 0 && rexec_request_doc_parse((char *)text, len, &in->doc, req, &e) != 0)
            r = cli_error(rexec_err_exit_code(e.code), "%s: %s", cli_arg(o->request_file), e.msg);
        free(text);
        if (r)
            return r;
        if (req->action && o->action && strcmp(req->action, o->action) != 0)
            return cli_error(64, "ACTION %s differs from the request's \"%s\"", cli_arg(o->action),
                             cli_arg(req->action));
        /* TARGETS decides where the call goes; a request naming another host is a mistake */
        if (req->host && strcmp(req->host, o->targets) != 0)
            return cli_error(64, "TARGETS %s differs from the request's host \"%s\"",
                             cli_arg(o->targets), cli_arg(req->host));
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
        struct stat st;
        if (req->stdin_data)
            return cli_error(64, "--stdin and the request's stdin are exclusive");
        if (o->via_socket || (o->stdin_stream && strcmp(o->stdin_file, "-") != 0 &&
                              stat(o->stdin_file, &st) == 0 && S_ISREG(st.st_mode))) {
            req->stdin_path = o->stdin_file; /* streamed by the call or the client, never loaded */
        } else if (o->stdin_stream && cli_stdin_by_name(o->stdin_file)) {
            /* a pipe, FIFO or terminal: the call sends it as it reads it (docs/cli.md); "-"
             * redirected from a file: that file, streamed as --stdin FILE is */
            req->stdin_path = strcmp(o->stdin_file, "-") == 0 ? "/dev/stdin" : o->stdin_file;
        } else {
            int r = read_file(o->stdin_file, MAX_STDIN_FILE, &in->stdin_data, &req->stdin_len);
            if (r)
                return r;
            req->stdin_data = in->stdin_data;
        }
    }
    if (o->timeout_s > 0)
        req->timeout_s = o->timeout_s;
    req->stdin_timeout_s = o->stdin_timeout_s;
    req->grant_id = o->grant;
    int r = trace_context(o, req);
    if (r != 0)
        return r;
    req->eval_only = o->eval;
    req->capture = o->json && !o->output; /* --output: stdout goes to FILE only */
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

/* The signal watchers. Without them a signal would kill rexec between an intent and its
 * outcome, so a watcher that cannot be set up (no descriptor left for libuv's signal pipe)
 * stops the run before any call starts. */
static int signals_start(run *r)
{
    for (size_t i = 0; i < sizeof(run_signals) / sizeof(run_signals[0]); i++) {
        int rc = uv_signal_init(&r->loop, &r->sigs[i]);
        if (rc == 0) {
            r->n_sigs++;
            r->sigs[i].data = r;
            rc = uv_signal_start(&r->sigs[i], on_signal, run_signals[i]);
        }
        if (rc != 0) {
            for (size_t k = 0; k < r->n_sigs; k++)
                uv_close((uv_handle_t *)&r->sigs[k], NULL);
            r->n_sigs = 0;
            return cli_uv_error(rc, "cannot watch for signals");
        }
    }
    return 0;
}

/* A fan-out runs at most as many hosts at once as the descriptors allow, each call with room
 * for its outcome record: past that, calls would start and then fail to record how they ended
 * (exit 74, the intent left open). Says so when it holds --parallel back; refuses (71) when
 * not even one call at a time fits beside every host's connection. */
static int fit_parallel(run *r)
{
    size_t want = r->n_hosts < (size_t)r->o->parallel ? r->n_hosts : (size_t)r->o->parallel;
    size_t conns = r->n_hosts * CLI_FDS_PER_CONN + CLI_FDS_SPARE, fit;
    long free_now = cli_fds_free();
    struct rlimit rl;
    if (free_now < 0 || free_now == LONG_MAX)
        return 0;
    fit = (size_t)free_now > conns ? ((size_t)free_now - conns) / CLI_FDS_PER_CALL : 0;
    if (fit >= want)
        return 0;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (fit == 0)
        return cli_error(71, "too many open files (RLIMIT_NOFILE is %llu): a run on %zu host(s) "
                             "needs %zu free file descriptors, %ld are free; raise the limit "
                             "(ulimit -n)", (unsigned long long)rl.rlim_cur, r->n_hosts,
                         conns + CLI_FDS_PER_CALL, free_now);
    dprintf(2, "rexec: warning: RLIMIT_NOFILE is %llu: running at most %zu host(s) at once, not "
               "%zu; raise ulimit -n for more\n", (unsigned long long)rl.rlim_cur, fit, want);
    r->o->parallel = (int)fit;
    return 0;
}

static int run_loop(run *r, const char *const *names)
{
    r->hosts = calloc(r->n_hosts, sizeof(host_call));
    if (r->hosts == NULL)
        return cli_error(70, "out of memory");
    for (size_t i = 0; i < r->n_hosts; i++)
        r->hosts[i] = (host_call){.run = r, .host = names[i], .pf = {.host = names[i]}};
    r->progress = r->n_hosts > 1 && isatty(2) && !r->o->json && !r->o->no_progress;
    int rc = r->o->eval ? 0 : fit_parallel(r); /* eval opens no connection, keeps no evidence */
    if (rc != 0) {
        free(r->hosts);
        return rc;
    }
    if ((rc = signals_start(r)) != 0) {
        free(r->hosts);
        return rc;
    }
    launch_more(r);
    if (r->finished < r->n_hosts)
        progress_draw(r);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    free(r->hosts);
    return r->interrupted && r->worst < 130 ? 130 : rexec_fanout_exit_status(r->fan, r->worst);
}

/* The fan-out's plan, checked against the hosts (a canary larger than the list is refused) and
 * recorded before any call starts. */
static int fanout_start(run *r)
{
    rexec_error e;
    if (!rexec_fanout_wanted(&r->o->fanout))
        return 0;
    if (rexec_fanout_new(&r->o->fanout, r->n_hosts, 1, &r->fan, &e) != 0 ||
        rexec_fanout_record_plan(r->ctx, r->fan, r->names, r->req.action, r->req.batch_id, NULL,
                                 0, &e) != 0)
        return cli_error(rexec_err_exit_code(e.code), "%s", e.msg);
    return 0;
}

/* Several hosts cannot share one pipe: a fan-out's piped --stdin is read once into a private
 * spool that every call streams like a file (cli_stdin_spool). One host reads the pipe itself. */
static int fanout_stdin(run *r, run_opts *o)
{
    static char spool[32];
    if (r->n_hosts < 2 || r->req.stdin_path == NULL || !cli_stdin_streams(r->req.stdin_path))
        return 0;
    int rc = cli_stdin_spool(r->req.stdin_path, MAX_STDIN_FILE,
                             o->stdin_timeout_s > 0 ? o->stdin_timeout_s : 60.0, spool);
    if (rc == 0)
        r->req.stdin_path = spool;
    return rc;
}

int cli_run(const cli_global *g, int argc, char **argv)
{
    run_opts o = {0};
    run_inputs in = {0};
    run r = {.o = &o};
    rexec_error e;
    const char **names = NULL;
    int rc = parse_args(&o, argc, argv);
    o.no_progress = g->no_progress;
    const char *socket = o.socket ? o.socket : g->socket;
    o.stdin_stream = socket == NULL;
    o.via_socket = socket != NULL;
    signal(SIGPIPE, SIG_IGN);
    /* a file-size limit makes a write fail (EFBIG: --output says 73, the audit 74), not kill
     * rexec between an intent and its outcome */
    signal(SIGXFSZ, SIG_IGN);
    if (rc == 0 && o.output)
        rc = cli_sink_open(o.output);
    if (rc == 0 && (rc = build_request(&o, &in, &r.req)) == 0 && socket) {
        if (o.approve)
            rc = cli_error(64, "--approve needs a terminal of its own: run without --socket");
        else {
            cli_client_fanout(&o.fanout); /* serve checks it, as a direct run does */
            rc = cli_client_call(socket, o.eval ? "eval" : "run", &r.req, o.targets, o.json,
                                 o.parallel);
        }
    } else if (rc == 0 && (rc = cli_fds_check(o.eval ? "rexec eval" : "rexec run",
                                              CLI_FDS_RUN)) == 0 &&
               (rc = cli_uv_loop_init(&r.loop)) == 0) {
        if (cli_ctx_new(&r.ctx, &r.loop, g->workspace, &e) != 0)
            rc = cli_lib_error(&e);
        else if (rexec_ctx_targets(r.ctx, o.targets, &names, &r.n_hosts, &e) != 0) {
            rc = cli_error(rexec_err_exit_code(e.code), "%s", e.msg);
            cli_ctx_close(r.ctx);
        } else if (o.output && r.n_hosts > 1) {
            rc = cli_error(64, "--output takes one host (TARGETS %s names %zu)",
                           cli_arg(o.targets), r.n_hosts);
            cli_ctx_close(r.ctx);
        } else {
            if (o.parallel == 0)
                o.parallel = rexec_ctx_parallel(r.ctx);
            if (r.n_hosts > 1 && rexec_batch_id_new(r.batch) == 0)
                r.req.batch_id = r.batch;
            r.names = names;
            if ((rc = fanout_stdin(&r, &o)) == 0 && (rc = fanout_start(&r)) == 0)
                rc = run_loop(&r, names);
            else
                cli_ctx_close(r.ctx);
            rexec_fanout_free(r.fan);
        }
        uv_run(&r.loop, UV_RUN_DEFAULT); /* let the context finish closing */
        uv_loop_close(&r.loop);
        free(names);
    }
    cli_sink_abort(); /* a call that never reported: FILE is left as it was */
    inputs_free(&in, &o);
    return rc;
}
