/* `rexec approvals watch` and `rexec approvals web`: the operator's live console and web page.
 * Both are programs of the Python client (python/rexec_client/console.py and web.py, standard
 * library only) that talk to `rexec serve` as the approver account this process runs as; rexec
 * checks the arguments and hands over to them with exec. docs/gate.md, "Approvers on serve". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* What runs the module: it says clearly when the Python client is not installed (69), else
 * hands the arguments to the module's main(). The module comes from python3's own path and
 * $PYTHONPATH, never from the directory rexec was started in. */
static const char launcher[] =
    "import sys\n"
    "sys.path = [p for p in sys.path if p not in ('', '.')]\n" /* -c puts the working directory
                                                              * first: never import from it */
    "try:\n"
    "    import importlib\n"
    "    m = importlib.import_module('rexec_client.' + sys.argv[1])\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('rexec: approvals: the Python client (rexec_client) is not installed "
    "where python3 finds it (docs/python-client.md, \"Install\"): %s\\n' % e)\n"
    "    sys.exit(69)\n"
    "sys.exit(m.main(sys.argv[2:]))\n";

static const char *python(void)
{
    const char *p = getenv("REXEC_PYTHON");
    if (p != NULL && p[0] != 0)
        return p;
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

static int exec_module(const char *module, const char *const *args, size_t n)
{
    const char *argv[16];
    size_t k = 0;
    argv[k++] = python();
    argv[k++] = "-c";
    argv[k++] = launcher;
    argv[k++] = module;
    for (size_t i = 0; i < n && k + 1 < sizeof(argv) / sizeof(*argv); i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    fflush(NULL);
    execvp(argv[0], (char *const *)argv);
    return cli_error(69, "approvals %s: cannot start %s: %s", module, argv[0], strerror(errno));
}

static int usage(const char *what)
{
    return cli_error(64, "usage: rexec approvals %s (see `rexec help approvals`)", what);
}

/* --socket PATH: main.c takes it as the global option wherever it stands; here for a caller
 * that hands the arguments on (cli_approvals_ui is given them unparsed). */
static int socket_arg(int argc, char **argv, int *i, const char **sock)
{
    int missing = 0;
    const char *v = cli_opt_value(argc, argv, i, "--socket", &missing);
    if (v != NULL)
        *sock = v;
    return v != NULL;
}

/* rexec approvals watch [--socket PATH] */
static int watch(const cli_global *g, int argc, char **argv)
{
    const char *sock = g->socket;
    for (int i = 1; i < argc; i++)
        if (!socket_arg(argc, argv, &i, &sock))
            return usage("watch [--socket PATH]");
    if (sock == NULL)
        return cli_error(64, "approvals watch: no serve socket: give --socket PATH (or set "
                         "$REXEC_SOCKET) of a `rexec serve` that grants this user the approvals "
                         "and approve verbs");
    const char *args[] = {"--socket", sock};
    return exec_module("console", args, 2);
}

/* rexec approvals web --listen unix:PATH [--socket PATH] [--quiet] */
static int web(const cli_global *g, int argc, char **argv)
{
    const char *listen = NULL, *sock = g->socket;
    int quiet = 0, missing = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = cli_opt_value(argc, argv, &i, "--listen", &missing);
        if (v != NULL)
            listen = v;
        else if (socket_arg(argc, argv, &i, &sock))
            continue;
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = 1;
        else
            return usage("web --listen unix:PATH [--socket PATH] [--quiet]");
    }
    if (listen == NULL || strncmp(listen, "unix:", 5) != 0 || listen[5] == 0)
        return cli_error(64, "approvals web: --listen unix:PATH is required (a Unix socket only "
                         "this user can open; operators reach it with ssh -L)");
    if (sock == NULL)
        return cli_error(64, "approvals web: no serve socket: give --socket PATH (or set "
                         "$REXEC_SOCKET)");
    const char *args[] = {"--listen", listen, "--socket", sock, "--quiet"};
    return exec_module("web", args, quiet ? 5 : 4);
}

int cli_approvals_ui(const cli_global *g, int argc, char **argv)
{
    if (strcmp(argv[0], "watch") == 0)
        return watch(g, argc, argv);
    return web(g, argc, argv);
}
