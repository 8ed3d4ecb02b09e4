/* `rexec serve --socket PATH`: the long-lived controller (docs/serve-protocol.md). */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "rexec.h"

typedef struct serve_cli {
    uv_loop_t loop;
    rexec_ctx *ctx;
    rexec_server *srv;
    uv_signal_t sigint, sigterm, sighup;
    int n_sigs; /* how many of them are initialised, in that order */
    int stopping;
} serve_cli;

static void signals_close(serve_cli *s)
{
    uv_signal_t *h[3] = {&s->sigint, &s->sigterm, &s->sighup};
    for (int i = 0; i < s->n_sigs; i++)
        uv_close((uv_handle_t *)h[i], NULL);
    s->n_sigs = 0;
}

/* Called when the last request is done, possibly from inside a call's on_done: safe, the context
 * waits until every call and check has released its memory (call.c: the registry). */
static void on_stopped(void *ud)
{
    serve_cli *s = ud;
    cli_ctx_close(s->ctx);
    signals_close(s);
}

/* SIGHUP: reload rexec.json; a file that does not load leaves the running configuration. */
static void on_sighup(uv_signal_t *h, int signum)
{
    serve_cli *s = h->data;
    rexec_error e;
    size_t warm = 0;
    (void)signum;
    if (rexec_ctx_reload(s->ctx, &warm, &e) != 0) {
        char *m = cli_redact(e.msg);
        fprintf(stderr, "rexec serve: SIGHUP: reload refused, the configuration is unchanged: %s\n",
                m);
        free(m);
    } else
        fprintf(stderr, "rexec serve: SIGHUP: workspace reloaded (%zu host(s) kept warm)\n", warm);
}

/* SIGTERM/SIGINT: stop accepting, cancel what is in flight (the remote commands stop), send the
 * results, close; a second signal leaves at once. */
static void on_signal(uv_signal_t *h, int signum)
{
    serve_cli *s = h->data;
    if (s->stopping++)
        exit(128 + signum);
    fprintf(stderr, "rexec serve: %s: shutting down\n", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    rexec_server_stop(s->srv, on_stopped, s);
}

/* SIGINT and SIGTERM stop serve, SIGHUP reloads: a watcher that cannot be set up (no
 * descriptor left for libuv's signal pipe) refuses to start rather than serve without them. */
static int serve_signals(serve_cli *s)
{
    uv_signal_t *h[3] = {&s->sigint, &s->sigterm, &s->sighup};
    static const int num[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        int rc = uv_signal_init(&s->loop, h[i]);
        if (rc == 0) {
            s->n_sigs++;
            h[i]->data = s;
            rc = uv_signal_start(h[i], i == 2 ? on_sighup : on_signal, num[i]);
        }
        if (rc != 0) {
            signals_close(s);
            return cli_uv_error(rc, "serve: cannot watch for signals");
        }
    }
    return 0;
}

/* serve lives for weeks and handles results of a few MiB (captured output, result lines). glibc
 * serves a block above M_MMAP_THRESHOLD with its own mmap and gives it back on free, but after
 * the first such free it raises the threshold to that size, so later blocks of the same size
 * come from the heap, where they fragment it and RSS stays high. A fixed threshold keeps big
 * blocks on mmap (scripts/soak measures serve's RSS over time).
 * Below it, glibc gives the heap's free top back to the system once it passes M_TRIM_THRESHOLD
 * (128 KiB): a streamed stdin's line (64 KiB of base64, its parsed string and its decoded piece)
 * grew the heap and shrank it again on every line, and the page faults and TLB flushes of that
 * took two thirds of serve's time (1 GiB streamed in 17-24 s; docs/PERFORMANCE.md). Keeping up
 * to 1 MiB of free heap costs that much RSS at most, a fixed amount. */
#define SERVE_MMAP_THRESHOLD (256 * 1024)
#define SERVE_TRIM_THRESHOLD (1024 * 1024)

static void serve_malloc_policy(void)
{
    mallopt(M_MMAP_THRESHOLD, SERVE_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, SERVE_TRIM_THRESHOLD);
}

/* --log auto|json|journal|off */
static int log_format(const char *s, int *out)
{
    static const struct { const char *name; int v; } f[] = {
        {"auto", REXEC_SERVE_LOG_AUTO}, {"json", REXEC_SERVE_LOG_JSON},
        {"journal", REXEC_SERVE_LOG_JOURNAL}, {"off", REXEC_SERVE_LOG_OFF}};
    for (size_t i = 0; i < sizeof(f) / sizeof(*f); i++)
        if (strcmp(s, f[i].name) == 0) {
            *out = f[i].v;
            return 0;
        }
    return cli_error(64, "serve: --log wants auto, json, journal or off, got \"%s\"", cli_arg(s));
}

int cli_serve(const cli_global *g, int argc, char **argv)
{
    serve_cli s = {0};
    rexec_error e;
    int rc;
    rexec_server_opts opts = {.socket_path = g->socket, .idle_timeout_s = 300};
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
            opts.socket_path = argv[++i];
        else if (strcmp(argv[i], "--idle-timeout") == 0 && i + 1 < argc) {
            opts.idle_timeout_s = strtod(argv[++i], &end);
            if (*end || !(opts.idle_timeout_s >= 0 && opts.idle_timeout_s <= 1e7))
                return cli_error(64, "--idle-timeout wants seconds (0 = never), got \"%s\"",
                                 cli_arg(argv[i]));
        } else if (strcmp(argv[i], "--stdin-timeout") == 0 && i + 1 < argc) {
            opts.stdin_timeout_s = strtod(argv[++i], &end);
            if (*end || !(opts.stdin_timeout_s > 0 && opts.stdin_timeout_s <= 1e7))
                return cli_error(64, "--stdin-timeout wants seconds above 0, got \"%s\"",
                                 cli_arg(argv[i]));
        } else if (strcmp(argv[i], "--metrics-file") == 0 && i + 1 < argc) {
            opts.metrics_file = argv[++i];
        } else if (strcmp(argv[i], "--metrics-interval-s") == 0 && i + 1 < argc) {
            opts.metrics_interval_s = strtod(argv[++i], &end);
            if (*end || !(opts.metrics_interval_s >= 1 && opts.metrics_interval_s <= 86400))
                return cli_error(64, "--metrics-interval-s wants seconds from 1 to 86400, got "
                                 "\"%s\"", cli_arg(argv[i]));
        } else if (strcmp(argv[i], "--log") == 0 && i + 1 < argc) {
            if (log_format(argv[++i], &opts.log) != 0)
                return 64;
        } else
            return cli_error(64, "serve: unexpected argument \"%s\" (see `rexec help serve`)",
                             cli_arg(argv[i]));
    }
    signal(SIGPIPE, SIG_IGN);
    serve_malloc_policy();
    if ((rc = cli_fds_check("rexec serve", CLI_FDS_RUN)) != 0 ||
        (rc = cli_uv_loop_init(&s.loop)) != 0)
        return rc;
    if (cli_ctx_new(&s.ctx, &s.loop, g->workspace, &e) != 0) {
        uv_loop_close(&s.loop);
        return cli_lib_error(&e);
    }
    if ((rc = serve_signals(&s)) == 0 && rexec_server_start(s.ctx, &opts, &s.srv, &e) != 0) {
        signals_close(&s);
        rc = cli_lib_error(&e);
    }
    if (rc != 0) {
        cli_ctx_close(s.ctx);
        uv_run(&s.loop, UV_RUN_DEFAULT); /* the listener's close, the context's release */
        uv_loop_close(&s.loop);
        return rc;
    }
    char *where = cli_redact(opts.socket_path ? opts.socket_path : "the socket systemd passed");
    fprintf(stderr, "rexec serve: listening on %s (pid %d)\n", where, (int)getpid());
    free(where);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    uv_loop_close(&s.loop);
    return 0;
}
