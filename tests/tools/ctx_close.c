/* rexec_ctx_close with calls in flight (issue #12 item 8), through the public API only:
 *
 *   ctx_close WORKSPACE HOST ACTION N
 *
 * starts N calls of ACTION on HOST and, once the first stdout bytes of any of them arrive,
 * closes the context. Every call must still report (a result line each, as `rexec run --json`
 * prints it, on stdout) and the context's on_closed must come ("closed" on stdout) before the
 * loop ends. Exit 0 when both happened, 1 otherwise; 2 on a bad start. Built in the test build
 * (CMakeLists.txt) for tests/e2e/t_ctx_close.sh.
 *
 *   ctx_close WORKSPACE HOST --check N
 *
 * starts N checks of HOST; when the first reports, it starts one of an unknown host (whose
 * failure is reported from the loop, later) and closes the context there and then. Every check
 * must report ("check HOST ok|failed" on stdout) before "closed" (issue #30: a check was not
 * part of the context's lifetime, and ASan found it reading a freed context). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <rexec.h>

static rexec_ctx *ctx;
static int done, closed, closing;

static void on_closed(void *ud)
{
    (void)ud;
    closed = 1;
    printf("closed\n");
}

static void on_output(void *ud, int stream, const void *data, size_t len)
{
    (void)ud, (void)data;
    if (stream == REXEC_STDOUT && len > 0 && !closing) {
        closing = 1;
        rexec_ctx_close(ctx, on_closed, NULL);
    }
}

static void on_done(void *ud, const rexec_result *r)
{
    (void)ud;
    char *json = rexec_result_to_json(r);
    printf("%s\n", json ? json : "out of memory");
    free(json);
    done++;
}

static void on_check(void *ud, const rexec_check_result *r)
{
    rexec_error e;
    (void)ud;
    printf("check %s %s\n", r->host, r->ok ? "ok" : "failed");
    done++;
    if (!closing) {
        closing = 1;
        if (rexec_check_start(ctx, "no-such-host", on_check, NULL, &e) != 0)
            printf("check not started: %s\n", e.msg);
        rexec_ctx_close(ctx, on_closed, NULL);
    }
}

static int run_checks(uv_loop_t *loop, const char *host, int n)
{
    rexec_error e;
    for (int i = 0; i < n; i++)
        if (rexec_check_start(ctx, host, on_check, NULL, &e) != 0) {
            fprintf(stderr, "ctx_close: %s\n", e.msg);
            return 2;
        }
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    fflush(stdout);
    return done == n + 1 && closed ? 0 : 1;
}

int main(int argc, char **argv)
{
    uv_loop_t loop;
    rexec_error e;
    if (argc != 5 || atoi(argv[4]) < 1) {
        fprintf(stderr, "usage: %s WORKSPACE HOST ACTION N\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[4]);
    uv_loop_init(&loop);
    if (rexec_ctx_new(&ctx, &loop, argv[1], &e) != 0) {
        fprintf(stderr, "ctx_close: %s\n", e.msg);
        return 2;
    }
    if (strcmp(argv[3], "--check") == 0)
        return run_checks(&loop, argv[2], n);
    rexec_request req = {.host = argv[2], .action = argv[3], .rationale = "ctx_close test"};
    rexec_callbacks cb = {.on_output = on_output, .on_done = on_done};
    for (int i = 0; i < n; i++)
        if (rexec_call_start(ctx, &req, &cb, NULL, &e) != 0) {
            fprintf(stderr, "ctx_close: %s\n", e.msg);
            return 2;
        }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    fflush(stdout);
    return done == n && closed ? 0 : 1;
}
