/* embed.c: one rexec call on the caller's own libuv loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <rexec.h>

static int status = 70;

static void on_output(void *ud, int stream, const void *data, size_t len)
{
    (void)ud; /* redacted bytes, as they arrive */
    fwrite(data, 1, len, stream == REXEC_STDOUT ? stdout : stderr);
}

static void on_done(void *ud, const rexec_result *r)
{
    rexec_ctx *ctx = ud;
    char *json = rexec_result_to_json(r); /* the object `rexec run --json` prints */
    fprintf(stderr, "%s\n", json ? json : "out of memory");
    free(json);
    status = r->exit_status;         /* what `rexec run` would exit with */
    rexec_ctx_close(ctx, NULL, NULL); /* uv_run returns once all is released */
}

int main(int argc, char **argv)
{
    uv_loop_t loop;
    rexec_ctx *ctx;
    rexec_error e;
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: %s WORKSPACE HOST ACTION [PARAM VALUE]\n", argv[0]);
        return 64;
    }
    uv_loop_init(&loop);
    if (rexec_ctx_new(&ctx, &loop, argv[1], &e) != 0) {
        fprintf(stderr, "rexec: %s\n", e.msg);
        return rexec_err_exit_code(e.code);
    }
    rexec_param p = {argc == 6 ? argv[4] : "", argc == 6 ? argv[5] : "",
                     argc == 6 ? strlen(argv[5]) : 0};
    rexec_request req = {.host = argv[2], .action = argv[3], .params = &p,
                         .n_params = argc == 6, .rationale = "embedding example"};
    rexec_callbacks cb = {.on_output = on_output, .on_done = on_done, .ud = ctx};
    if (rexec_call_start(ctx, &req, &cb, NULL, &e) != 0) { /* on_done will not run */
        fprintf(stderr, "rexec: %s\n", e.msg);
        status = rexec_err_exit_code(e.code);
        rexec_ctx_close(ctx, NULL, NULL);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return status;
}
