/* The light `rexec` (issue 30): the program a shell starts for every rexec command, linked with
 * libc and cJSON only. The full program (main.c and the library: libcrypto, libssh2, libuv)
 * takes ~1.7 ms of CPU just to start, most of a warm call through `rexec serve`; this one starts
 * in a fraction of it. It does one thing itself, the short-lived call that start-up dominates:
 * `run` or `eval` through a running serve (--socket PATH or $REXEC_SOCKET) with TARGETS, ACTION,
 * --param, --json, --grant, --timeout and the global options. Everything else (another command,
 * another option, anything it would have to refuse, a serve it cannot reach) it hands to the full
 * program, argv and environment unchanged, before anything is sent: rexec-full beside it (the
 * build tree) or in REXEC_FULL_RELDIR from it (installed: ../libexec/rexec). Once the request is
 * sent, what it prints is serve's replies, exactly as the full program prints them (client.c and
 * print.c are the same code). docs/architecture.md, "Linking the rexec executable". */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "rexec.h"

#ifndef REXEC_FULL_RELDIR
#define REXEC_FULL_RELDIR "../libexec/rexec"
#endif
#define FULL_NAME "rexec-full"
#define FRONT_MAX_PARAMS 256 /* cmd_run.c's MAX_PARAMS: more is its error to report */

static char **front_argv;
static int request_sent, json_errors;

/* The full program in place of this one; returns only when it cannot be started (70). Where
 * this program is: /proc/self/exe (symlinks resolved), else argv[0] when it names a path. */
static int exec_full(void)
{
    char self[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0 && front_argv[0] && strchr(front_argv[0], '/') &&
        strlen(front_argv[0]) < sizeof(self))
        n = (ssize_t)strlen(strcpy(self, front_argv[0]));
    char *slash = n > 0 ? (self[n] = 0, strrchr(self, '/')) : NULL;
    int e = ENOENT;
    if (slash) {
        *slash = 0;
        snprintf(path, sizeof(path), "%s/%s", self, FULL_NAME);
        execv(path, front_argv);
        snprintf(path, sizeof(path), "%s/%s/%s", self, REXEC_FULL_RELDIR, FULL_NAME);
        execv(path, front_argv);
        e = errno;
    }
    fprintf(stderr, "rexec: cannot start the full program %s (beside this rexec, or in %s from "
                    "it): %s\n", FULL_NAME, REXEC_FULL_RELDIR, strerror(e));
    return 70;
}

/* ---- what client.c and print.c need of the full program's main.c and output.c -------------- */

int cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    if (!request_sent) /* the full program says it, exactly as it always did */
        return exec_full();
    va_start(ap, fmt);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    cli_error_show(code, msg ? msg : "out of memory", json_errors); /* serve's text, redacted */
    free(msg);
    return code;
}

/* Once the request is sent, everything printed is serve's reply, redacted by serve
 * (docs/redaction.md, "Through rexec serve"); before it, any message is the full program's. */
void cli_redact_serve_replies(void)
{
    request_sent = 1;
}

char *cli_redact(const char *s)
{
    char *t = s ? strdup(s) : NULL;
    return s && t == NULL ? strdup("[REDACTED:UNAVAILABLE]") : t;
}

const char *cli_arg(const char *s)
{
    return s; /* only in messages before the request is sent: those are the full program's */
}

/* serve answers `run` and `eval` with results, never with a check report: `check` is the full
 * program's. */
void cli_show_check(const rexec_check_result *r, int json)
{
    (void)r, (void)json;
}

/* ---- the arguments it takes itself ------------------------------------------------------------ */

typedef struct front_call {
    const char *socket, *targets, *action, *grant;
    int json, eval;
    double timeout_s;
    rexec_param params[FRONT_MAX_PARAMS];
    size_t n_params;
} front_call;

/* --timeout's number as cmd_run.c takes it (0.001..604800); 0 when it would refuse it. */
static int take_timeout(front_call *f, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0.001 && v <= 604800))
        return 0;
    f->timeout_s = v;
    return 1;
}

/* One option at argv[*i] (before or after the command): 1 taken, 0 not one this front takes. */
static int take_option(front_call *f, int argc, char **argv, int *i, int after_command)
{
    const char *v;
    int missing = 0;
    if ((v = cli_opt_value(argc, argv, i, "--workspace", &missing)) ||
        (v = cli_opt_value(argc, argv, i, "-w", &missing)))
        return 1; /* the client reads no workspace: serve has its own */
    if ((v = cli_opt_value(argc, argv, i, "--socket", &missing)))
        return f->socket = v, 1;
    if (!missing && strcmp(argv[*i], "--no-progress") == 0)
        return 1;
    if (!after_command || missing)
        return 0;
    if ((v = cli_opt_value(argc, argv, i, "--param", &missing)) ||
        (v = cli_opt_value(argc, argv, i, "-p", &missing))) {
        const char *eq = strchr(v, '=');
        if (eq == NULL || eq == v || f->n_params == FRONT_MAX_PARAMS)
            return 0;
        f->params[f->n_params++] = (rexec_param){strndup(v, (size_t)(eq - v)), eq + 1,
                                                 strlen(eq + 1)};
        return f->params[f->n_params - 1].name != NULL;
    }
    if ((v = cli_opt_value(argc, argv, i, "--grant", &missing)))
        return f->grant ? 0 : (f->grant = v, 1);
    if ((v = cli_opt_value(argc, argv, i, "--timeout", &missing)))
        return take_timeout(f, v);
    if (!missing && strcmp(argv[*i], "--json") == 0)
        return f->json = 1, 1;
    return 0;
}

/* The command line, when it is one this front runs itself: 1, else 0. argv is not changed. */
static int front_takes(front_call *f, int argc, char **argv)
{
    int i = 1, positional = 0;
    const char *env = getenv("REXEC_SOCKET");
    f->socket = env;
    if (argc < 3)
        return 0; /* no command and arguments: the full program's help or usage error */
    for (; i < argc && argv[i][0] == '-'; i++)
        if (!take_option(f, argc, argv, &i, 0))
            return 0; /* --version, --help, "--", and anything unknown */
    if (i == argc || (strcmp(argv[i], "run") != 0 && strcmp(argv[i], "eval") != 0))
        return 0;
    f->eval = argv[i][0] == 'e';
    for (i++; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != 0) {
            if (!take_option(f, argc, argv, &i, 1))
                return 0; /* --help, "--", --stdin, --request, --output, ... */
        } else if (positional == 0) {
            f->targets = argv[i], positional++;
        } else if (positional == 1) {
            f->action = argv[i], positional++;
        } else {
            return 0;
        }
    }
    /* $TRACEPARENT is checked and carried by the full program */
    return f->targets && f->action && f->socket && f->socket[0] && getenv("TRACEPARENT") == NULL;
}

/* Started with stdin, stdout or stderr closed, the socket would take its number (main.c does
 * the same). */
static void std_fds_open(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
            (void)open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
}

int main(int argc, char **argv)
{
    static front_call f;
    front_argv = argv;
    for (int k = 1; k < argc && strcmp(argv[k], "--") != 0; k++)
        json_errors |= strcmp(argv[k], "--json") == 0; /* as main.c: any "--json" word */
    std_fds_open();
    if (!front_takes(&f, argc, argv))
        return exec_full();
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    rexec_request req = {.action = f.action, .params = f.params, .n_params = f.n_params,
                         .grant_id = f.grant, .timeout_s = f.timeout_s, .eval_only = f.eval,
                         .capture = f.json};
    int rc = cli_client_call(f.socket, f.eval ? "eval" : "run", &req, f.targets, f.json, 0);
    for (size_t k = 0; k < f.n_params; k++)
        free((char *)f.params[k].name);
    return rc;
}
