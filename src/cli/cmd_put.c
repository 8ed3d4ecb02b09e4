/* `rexec put HOST ACTION LOCAL_FILE` and `rexec get HOST ACTION LOCAL_FILE`: a call of a file
 * action (docs/workspace.md, "put and get"), made by `rexec run` with what the file needs:
 *   put: --stdin LOCAL_FILE (streamed from the file, flat memory) and its size (content_size);
 *        the call hashes the file on the one pass that sends it and the stream's trailer
 *        carries the hash (src/api/call_put.c), so nothing reads the file before it goes.
 *        Through serve (--socket) the file is hashed here first (content_sha256, as before):
 *        serve spools the whole stream before sending it anyway;
 *   get: --output LOCAL_FILE (sink.c: a temporary file next to it, renamed once whole).
 * Every other option is run's, passed through. Through serve (--socket) the client reads and
 * writes the local file itself; serve never opens a path a client names. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "interface.h"

typedef struct put_args {
    int argc;
    char **argv; /* "run", then the caller's arguments without LOCAL_FILE, then ours */
    const char *local;
    int json, via_socket;
    char sha[65];
    char size_param[64], sha_param[96];
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
        if (opt_is(a, "socket"))
            p->via_socket = 1;
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

/* The file's size, and with want_sha its SHA-256 (read in fixed pieces, never whole: through
 * serve); without, the call hashes it as it sends it. 0, or the exit code. */
static int stat_file(const char *path, int want_sha, char sha[65], unsigned long long *size)
{
    struct stat st;
    uint64_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    if (fd < 0)
        return cli_error(65, "LOCAL_FILE %s: %s", cli_arg(path), strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = cli_error(65, "LOCAL_FILE %s: not a regular file", cli_arg(path));
    else if (want_sha && rx_sha256_fd(fd, UINT64_MAX, sha, &got) != 0)
        rc = errno == ENOMEM ? cli_error(71, "out of memory")
                             : cli_error(65, "LOCAL_FILE %s: %s", cli_arg(path), strerror(errno));
    close(fd);
    *size = want_sha ? (unsigned long long)got : (unsigned long long)st.st_size;
    return rc;
}

/* What the calls sent (cli_put_sent), for the closing line; empty until one sent it whole. */
static char put_sent_sha[65];

void cli_put_sent(const rexec_result *res)
{
    if (res->put_sha256 != NULL && put_sent_sha[0] == 0)
        snprintf(put_sent_sha, sizeof(put_sent_sha), "%s", res->put_sha256);
}

static int do_put(const cli_global *g, put_args *p)
{
    unsigned long long size = 0;
    int via_socket = p->via_socket || g->socket != NULL;
    int rc = stat_file(p->local, via_socket, p->sha, &size);
    if (rc != 0)
        return rc;
    snprintf(p->size_param, sizeof(p->size_param), "content_size=%llu", size);
    p->argv[p->argc++] = "--stdin";
    p->argv[p->argc++] = (char *)p->local;
    p->argv[p->argc++] = "--param";
    p->argv[p->argc++] = p->size_param;
    if (via_socket) {
        snprintf(p->sha_param, sizeof(p->sha_param), "content_sha256=%s", p->sha);
        p->argv[p->argc++] = "--param";
        p->argv[p->argc++] = p->sha_param;
    }
    rc = cli_run(g, p->argc, p->argv);
    if (rc == 0 && !p->json)
        dprintf(2, "rexec: put %s: %llu bytes, sha256 %s\n", cli_arg(p->local), size,
                via_socket ? p->sha : put_sent_sha[0] ? put_sent_sha : "-");
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
