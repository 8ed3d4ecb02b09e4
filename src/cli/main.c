/* rexec: the command line. Global options, then one command (src/cli/cmd_*.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rexec.h"

int cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    fputs("rexec: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

static int cli_help(const cli_global *g, int argc, char **argv)
{
    (void)g;
    const char *text = cli_help_text(argc > 1 ? argv[1] : NULL);
    if (text == NULL)
        return cli_error(64, "no such command: %s (see `rexec help`)", argv[1]);
    fputs(text, stdout);
    return 0;
}

struct command {
    const char *name;
    cli_cmd_fn fn;
};

static const struct command commands[] = {
    {"run", cli_run},         {"eval", cli_run},           {"check", cli_check},
    {"hosts", cli_hosts},     {"actions", cli_actions},    {"audit", cli_audit},
    {"approve", cli_approve}, {"approvals", cli_approvals}, {"serve", cli_serve},
    {"help", cli_help},       {"__complete", cli_complete},
};

/* `rexec X --help` is `rexec help X`, for every command. */
static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return 0;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    }
    return 0;
}

static int dispatch(const cli_global *g, int argc, char **argv)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++) {
        if (strcmp(argv[0], commands[i].name) != 0)
            continue;
        if (wants_help(argc, argv) && commands[i].fn != cli_help) {
            fputs(cli_help_text(argv[0]), stdout);
            return 0;
        }
        return commands[i].fn(g, argc, argv);
    }
    return cli_error(64, "unknown command \"%s\" (see `rexec help`)", argv[0]);
}

int main(int argc, char **argv)
{
    cli_global g = {.workspace = getenv("REXEC_WORKSPACE"), .socket = getenv("REXEC_SOCKET")};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
            printf("rexec %s\n%s\n", rexec_version(), rexec_dependency_versions());
            return 0;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(cli_help_text(NULL), stdout);
            return 0;
        } else if (strcmp(argv[i], "--workspace") == 0 || strcmp(argv[i], "-w") == 0) {
            if (++i == argc)
                return cli_error(64, "--workspace needs a directory");
            g.workspace = argv[i];
        } else if (strncmp(argv[i], "--workspace=", 12) == 0) {
            g.workspace = argv[i] + 12;
        } else if (strcmp(argv[i], "--socket") == 0) {
            if (++i == argc)
                return cli_error(64, "--socket needs a path");
            g.socket = argv[i];
        } else {
            return cli_error(64, "unknown option %s (see `rexec help`)", argv[i]);
        }
    }
    if (g.workspace == NULL || g.workspace[0] == 0)
        g.workspace = ".";
    if (g.socket && g.socket[0] == 0)
        g.socket = NULL;
    if (i == argc) {
        fputs(cli_help_text(NULL), stderr);
        return 64;
    }
    return dispatch(&g, argc - i, argv + i);
}
