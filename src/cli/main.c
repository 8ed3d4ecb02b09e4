/* rexec: the command line. Global options (anywhere before a `--`), then one command
 * (src/cli/cmd_*.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "interface.h"
#include "rexec.h"

/* --json anywhere on the command line: failures are a JSON object on stdout too. */
static int json_errors;

/* "DIR/rexec.json: No such file or directory" is what every command says, through the library
 * or the CLI's own modules, when run outside a workspace; the usual cause is a forgotten -w or
 * $REXEC_WORKSPACE, so the message says how to name one. msg may be replaced; never NULL after. */
static const char *with_workspace_hint(char **msg)
{
    static const char enoent[] = "rexec.json: No such file or directory";
    static const char hint[] = " (not a workspace: name one with --workspace DIR, -w DIR or "
                               "$REXEC_WORKSPACE; docs/workspace.md)";
    if (*msg == NULL)
        return "out of memory";
    size_t n = strlen(*msg);
    if (n < sizeof(enoent) - 1 || strcmp(*msg + n - (sizeof(enoent) - 1), enoent) != 0)
        return *msg;
    char *longer = realloc(*msg, n + sizeof(hint));
    if (longer == NULL)
        return *msg;
    memcpy(longer + n, hint, sizeof(hint));
    return *msg = longer;
}

int cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    /* the whole message, however long: a secret cut short at a fixed size would no longer be
     * recognised by the redactor */
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *msg = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (msg) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    char *shown = cli_redact(with_workspace_hint(&msg));
    free(msg);
    cli_error_show(code, shown, json_errors);
    free(shown);
    return code;
}

static int cli_help(const cli_global *g, int argc, char **argv)
{
    (void)g;
    const char *text = cli_help_text(argc > 1 ? argv[1] : NULL);
    if (text == NULL)
        return cli_error(64, "no such command: %s (see `rexec help`)", cli_arg(argv[1]));
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
    {"approve", cli_approve}, {"deny", cli_deny}, {"approvals", cli_approvals}, {"serve", cli_serve},
    {"groups", cli_groups},   {"evidence", cli_evidence},   {"help", cli_help},
    {"put", cli_put},         {"get", cli_put},
    {"__complete", cli_complete}, {"__interface", cli_interface},
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
            const char *text = cli_help_text(argv[0]);
            fputs(text ? text : cli_help_text(NULL), stdout); /* the hidden ones have none */
            return 0;
        }
        return commands[i].fn(g, argc, argv);
    }
    return cli_error(64, "unknown command \"%s\" (see `rexec help`)", cli_arg(argv[0]));
}

/* Command options that take a value as the next word: that word is never a global option. The
 * interface table (interface.c) says which they are. */
static int takes_value(const char *opt)
{
    return strchr(opt, '=') == NULL && cli_takes_value(opt);
}

/* A global option at argv[*i]: 1 (taken, *i moved past its value), 0 (not one), or -exit. */
static int global_option(cli_global *g, int argc, char **argv, int *i)
{
    const char *v;
    int missing = 0;
    if ((v = cli_opt_value(argc, argv, i, "--workspace", &missing)) ||
        (v = cli_opt_value(argc, argv, i, "-w", &missing)))
        return g->workspace = v, cli_redact_workspace(v[0] ? v : "."), 1;
    if ((v = cli_opt_value(argc, argv, i, "--socket", &missing)))
        return g->socket = v, 1;
    if (missing)
        return -cli_error(64, "%s needs a value", argv[*i]);
    if (strcmp(argv[*i], "--no-progress") == 0)
        return g->no_progress = 1, 1;
    return 0;
}

/* getopt_long's habit: global options may also come after the command; they are taken out of
 * the command's arguments (up to a `--`, and never the value of a command option). */
static int globals_after_command(cli_global *g, int *argc, char **argv)
{
    int out = 1, r;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (strcmp(argv[i], "--json") == 0)
            json_errors = 1;
        if ((r = global_option(g, *argc, argv, &i)) < 0)
            return -r;
        if (r == 1)
            continue;
        argv[out++] = argv[i];
        if (takes_value(argv[i]) && i + 1 < *argc)
            argv[out++] = argv[++i];
    }
    *argc = out;
    return 0;
}

/* One fd per warm connection: a controller of hundreds of hosts needs more than the usual soft
 * limit of 1024. The soft limit goes up to the hard one; if the OS refuses, rexec says so and
 * goes on (a fan-out past the limit then fails per host, naming RLIMIT_NOFILE). */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t want = rl.rlim_max;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0)
        fprintf(stderr, "rexec: warning: cannot raise the open-file limit (RLIMIT_NOFILE) from %llu "
                "to its hard limit %llu: %s; connections beyond it will fail\n",
                (unsigned long long)rl.rlim_cur, (unsigned long long)want, strerror(errno));
}

/* Started with stdin, stdout or stderr closed, the next open would take its number: libuv
 * aborts when its own descriptors land there, and output meant for the terminal would go into
 * a socket or an audit file. Each closed one becomes /dev/null. */
static void std_fds_open(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
            (void)open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY); /* takes the lowest: fd */
}

int main(int argc, char **argv)
{
    cli_global g = {.workspace = getenv("REXEC_WORKSPACE"), .socket = getenv("REXEC_SOCKET")};
    int i = 1, r;
    cli_redact_workspace(g.workspace && g.workspace[0] ? g.workspace : ".");
    std_fds_open();
    raise_nofile();
    for (int k = 1; k < argc && strcmp(argv[k], "--") != 0; k++)
        if (strcmp(argv[k], "--json") == 0)
            json_errors = 1; /* before any error, also a usage error in the options */
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
            printf("rexec %s\n%s\n", rexec_version(), rexec_dependency_versions());
            return 0;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(cli_help_text(NULL), stdout);
            return 0;
        } else if ((r = global_option(&g, argc, argv, &i)) < 0) {
            return -r;
        } else if (r == 0) {
            return cli_error(64, "unknown option %s (see `rexec help`)", cli_arg(argv[i]));
        }
    }
    if (i == argc) {
        if (json_errors)
            return cli_error(64, "no command given (see `rexec help`)");
        fputs(cli_help_text(NULL), stderr);
        return 64;
    }
    int sub_argc = argc - i;
    char **sub = argv + i;
    if ((r = globals_after_command(&g, &sub_argc, sub)) != 0)
        return r;
    if (g.workspace == NULL || g.workspace[0] == 0)
        g.workspace = ".";
    cli_redact_workspace(g.workspace);
    if (g.socket && g.socket[0] == 0)
        g.socket = NULL;
    return dispatch(&g, sub_argc, sub);
}
