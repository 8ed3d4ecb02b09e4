/* `rexec put HOST ACTION LOCAL_FILE` and `rexec get HOST ACTION LOCAL_FILE`: a call of a file
 * action (docs/workspace.md, "put and get"), made by `rexec run` with what the file needs:
 *   put: --stdin LOCAL_FILE (streamed from the file, flat memory) and its size (content_size);
 *        the call hashes the file on the one pass that sends it and the stream's trailer
 *        carries the hash (src/api/call_put.c), so nothing reads the file before it goes;
 *        through serve (--socket) the same, by serve's call (the result's put_sha256);
 *   get: --output LOCAL_FILE (sink.c: a temporary file next to it, renamed once whole).
 * Every other option is run's, passed through. Through serve (--socket) the client reads and
 * writes the local file itself; serve never opens a path a client names. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "interface.h"

typedef struct put_args {
    int argc;
    char **argv; /* "run", then the caller's arguments without LOCAL_FILE, then ours */
    const char *local;
    int json;
    char size_param[64];
} put_args;

#define OPT_STDIN "stdin"
#define OPT_OUTPUT "output"
#define OPT_JSON "json"

/* a is --NAME or --NAME=... */
static int opt_is(const char *a, const char *name)
{
    size_t n = strlen(name);
    return a[0] == '-' && a[1] == '-' && strncmp(a + 2, name, n) == 0 &&
           (a[2 + n] == 0 || a[2 + n] == '=');
}

/* Splits LOCAL_FILE (the third positional argument) from the rest, which goes to run as it is;
 * room is left for the options put and get add. */
static int split_args(put_args *p, int argc, char **argv, const char *cmd)
{
    int positional = 0;
    p->argv = calloc((size_t)argc + 8, sizeof(char *));
    if (p->argv == NULL)
        return cli_error(71, "out of memory");
    p->argv[p->argc++] = "run";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        /* run's parser takes every option (tests/install/interface_check.py reads it there) */
        if (opt_is(a, OPT_STDIN) || opt_is(a, OPT_OUTPUT))
            return cli_error(64, "rexec %s: %.*s is set by %s itself (see `rexec help %s`)", cmd,
                             (int)strcspn(a, "="), a, cmd, cmd);
        if (opt_is(a, OPT_JSON))
            p->json = 1;
        if (a[0] == '-' && a[1] != 0) {
            p->argv[p->argc++] = argv[i];
            if (strchr(a, '=') == NULL && cli_takes_value(a) && i + 1 < argc)
                p->argv[p->argc++] = argv[++i];
        } else if (++positional == 3) {
            p->local = a;
        } else {
            p->argv[p->argc++] = argv[i];
        }
    }
    if (positional != 3)
        return cli_error(64, "usage: rexec %s HOST ACTION LOCAL_FILE [--param NAME=VALUE]... "
                             "(see `rexec help %s`)", cmd, cmd);
    return 0;
}

/* The file's size (fstat): the call hashes the file as it sends it, here or in serve (which
 * spools what the client streams, then sends it the same way). 0, or the exit code. */
static int size_file(const char *path, unsigned long long *size)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cli_error(65, "LOCAL_FILE %s: %s", cli_arg(path), strerror(errno));
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(fd);
    if (!ok)
        return cli_error(65, "LOCAL_FILE %s: not a regular file", cli_arg(path));
    *size = (unsigned long long)st.st_size;
    return 0;
}

static int do_put(const cli_global *g, put_args *p)
{
    unsigned long long size = 0;
    int rc = size_file(p->local, &size);
    if (rc != 0)
        return rc;
    snprintf(p->size_param, sizeof(p->size_param), "content_size=%llu", size);
    p->argv[p->argc++] = "--stdin";
    p->argv[p->argc++] = (char *)p->local;
    p->argv[p->argc++] = "--param";
    p->argv[p->argc++] = p->size_param;
    rc = cli_run(g, p->argc, p->argv);
    if (rc == 0 && !p->json)
        dprintf(2, "rexec: put %s: %llu bytes, sha256 %s\n", cli_arg(p->local), size,
                cli_put_sent_sha() ? cli_put_sent_sha() : "-");
    return rc;
}

int cli_put(const cli_global *g, int argc, char **argv)
{
    put_args p = {0};
    const char *cmd = argv[0];
    int rc = split_args(&p, argc, argv, cmd);
    if (rc == 0 && strcmp(cmd, "put") == 0) {
        rc = do_put(g, &p);
    } else if (rc == 0) {
        p.argv[p.argc++] = "--output";
        p.argv[p.argc++] = (char *)p.local;
        rc = cli_run(g, p.argc, p.argv);
    }
    free(p.argv);
    return rc;
}
