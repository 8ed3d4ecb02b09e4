/* `rexec __complete hosts|groups|actions`: names from the workspace, one a line, for the bash
 * completion (completions/rexec). Hidden from help and not a stable interface; it reads the
 * workspace only (no connection, no audit) and prints nothing when the workspace does not load,
 * so a half-typed command line never shows an error.
 * `rexec __complete commands | subcommands CMD | flags [CMD [SUB]] | valued`: the names of the
 * one interface table (interface.c), so the completion has no list of its own to drift.
 * `rexec __interface`: that table as JSON (tests/install/t_interface.sh); `rexec __interface
 * --serve`: serve's request keys (src/config/request.c) as JSON (t_serve_interface.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "interface.h"
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

static int same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static void print_opt(const cli_opt *o)
{
    printf("%s\n", o->name);
    if (o->alias)
        printf("%s\n", o->alias);
}

static void print_opts(const cli_opt *o)
{
    for (; o->name; o++)
        print_opt(o);
}

/* Names from the table; -1 when words is not a table query. */
static int table_names(int argc, char **argv)
{
    const char *what = argv[1], *cmd = argc > 2 ? argv[2] : NULL, *sub = argc > 3 ? argv[3] : NULL;
    if (strcmp(what, "commands") == 0 && argc == 2) {
        for (unsigned i = 0; i < cli_n_entries; i++)
            if (i == 0 || strcmp(cli_entries[i].command, cli_entries[i - 1].command) != 0)
                printf("%s\n", cli_entries[i].command);
    } else if (strcmp(what, "subcommands") == 0 && argc == 3) {
        for (unsigned i = 0; i < cli_n_entries; i++)
            if (strcmp(cli_entries[i].command, cmd) == 0 && cli_entries[i].sub)
                printf("%s\n", cli_entries[i].sub);
    } else if (strcmp(what, "flags") == 0 && argc <= 4) {
        if (cmd == NULL)
            print_opts(cli_global_opts);
        for (unsigned i = 0; cmd && i < cli_n_entries; i++)
            if (strcmp(cli_entries[i].command, cmd) == 0 && same(cli_entries[i].sub, sub))
                print_opts(cli_entries[i].opts);
        if (cmd)
            printf("--help\n");
    } else if (strcmp(what, "valued") == 0 && argc == 2) {
        for (const cli_opt *o = cli_global_opts; o->name; o++)
            if (o->value)
                print_opt(o);
        for (unsigned i = 0; i < cli_n_entries; i++)
            for (const cli_opt *o = cli_entries[i].opts; o->name; o++)
                if (o->value)
                    print_opt(o);
    } else {
        return -1;
    }
    return 0;
}

int cli_interface(const cli_global *g, int argc, char **argv)
{
    (void)g;
    /* --serve: serve's request keys (src/config/request.c), for t_serve_interface */
    int serve = argc == 2 && strcmp(argv[1], "--serve") == 0;
    if (argc != 1 && !serve)
        return cli_error(64, "usage: rexec __interface [--serve]");
    char *text = serve ? rexec_serve_keys_json() : cli_interface_json();
    if (text == NULL)
        return cli_error(71, "out of memory");
    printf("%s\n", text);
    free(text);
    return 0;
}

int cli_complete(const cli_global *g, int argc, char **argv)
{
    int r = argc >= 2 ? table_names(argc, argv) : -1;
    if (r >= 0)
        return r;
    if (argc != 2 || (strcmp(argv[1], "hosts") != 0 && strcmp(argv[1], "groups") != 0 &&
                      strcmp(argv[1], "actions") != 0))
        return cli_error(64, "usage: rexec __complete hosts|groups|actions|commands|valued, "
                             "subcommands CMD, flags [CMD [SUB]]");
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
