/* `rexec __complete hosts|groups|actions`: names from the workspace, one a line, for the bash
 * completion (completions/rexec). Hidden from help and not a stable interface; it reads the
 * workspace only (no connection, no audit) and prints nothing when the workspace does not load,
 * so a half-typed command line never shows an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "rexec.h"

static void print_names(const char *text)
{
    cJSON *list = cJSON_Parse(text);
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
        if (cJSON_IsString(name))
            printf("%s\n", name->valuestring);
    }
    cJSON_Delete(list);
}

int cli_complete(const cli_global *g, int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "hosts") != 0 && strcmp(argv[1], "groups") != 0 &&
                      strcmp(argv[1], "actions") != 0))
        return cli_error(64, "usage: rexec __complete hosts|groups|actions");
    uv_loop_t loop;
    rexec_ctx *ctx;
    rexec_error e;
    if (uv_loop_init(&loop) != 0)
        return 1; /* completion stays silent: there is nothing to offer */
    if (rexec_ctx_new(&ctx, &loop, g->workspace, &e) != 0) {
        uv_loop_close(&loop);
        return 1;
    }
    char *text = rexec_ctx_list_json(ctx, argv[1]);
    if (text)
        print_names(text);
    free(text);
    cli_ctx_close(ctx);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return text ? 0 : 70;
}
