/* --output FILE (`rexec run`, `rexec get`): a call's stdout, redacted as everywhere, streamed
 * into a temporary file next to FILE as it arrives (never held in memory), which becomes FILE
 * only when the call succeeded with all of its output: exit 0, nothing cut by max_output_bytes,
 * everything written and synced. Otherwise the temporary file is removed and FILE is left as it
 * was. One sink a process: --output takes one host. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define SINK_EXIT 73 /* the local output file cannot be written (docs/exit-codes.md) */

static struct {
    char *path, *tmp;
    int fd;
    int werr; /* errno of the first failed write; later bytes are dropped */
    unsigned long long written;
    unsigned long long flushed; /* bytes whose writeback was started (sink_writeback) */
} sink = {NULL, NULL, -1, 0, 0, 0};

/* The writeback of what is written is started every SINK_FLUSH bytes, so that the fsync before
 * the rename has little left to wait for (syncing 512 MiB just written took 0.2 s on the lab
 * machine, after the last byte). Starting it waits for nothing; a failure here is no failure:
 * the fsync still decides. */
#define SINK_FLUSH (8ULL << 20)

static void sink_writeback(void)
{
#ifdef SYNC_FILE_RANGE_WRITE
    if (sink.written - sink.flushed < SINK_FLUSH)
        return;
    (void)sync_file_range(sink.fd, (off_t)sink.flushed, (off_t)(sink.written - sink.flushed),
                          SYNC_FILE_RANGE_WRITE);
    sink.flushed = sink.written;
#endif
}

int cli_sink_active(void)
{
    return sink.fd >= 0;
}

static void sink_drop(void)
{
    if (sink.fd >= 0)
        close(sink.fd);
    if (sink.tmp)
        unlink(sink.tmp);
    free(sink.tmp), free(sink.path);
    sink.tmp = sink.path = NULL;
    sink.fd = -1;
    sink.written = sink.flushed = 0;
}

/* The temporary file is made now, before anything runs: a FILE that cannot be written is said
 * before the call is audited or sent. */
int cli_sink_open(const char *path)
{
    struct stat st;
    if (path == NULL || *path == 0)
        return cli_error(64, "--output needs a file name");
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return cli_error(SINK_EXIT, "--output %s: is a directory", cli_arg(path));
    char *copy = strdup(path);
    sink.path = strdup(path);
    if (copy == NULL || sink.path == NULL ||
        asprintf(&sink.tmp, "%s/.rexec-out.XXXXXX", dirname(copy)) < 0) {
        free(copy), free(sink.path);
        sink.path = sink.tmp = NULL;
        return cli_error(71, "out of memory");
    }
    free(copy);
    sink.fd = mkostemp(sink.tmp, O_CLOEXEC);
    if (sink.fd < 0) {
        int e = errno;
        free(sink.tmp), sink.tmp = NULL;
        sink_drop();
        return cli_error(SINK_EXIT, "--output %s: cannot create a file next to it: %s",
                         cli_arg(path), strerror(e));
    }
    mode_t um = umask(0);
    umask(um);
    fchmod(sink.fd, 0666 & ~um); /* as a shell's > would create it */
    return 0;
}

/* 0, or -1 once a write failed (the caller stops the call: its output has nowhere to go). */
int cli_sink_write(const void *data, size_t len)
{
    const char *p = data;
    while (sink.werr == 0 && len > 0) {
        ssize_t n = write(sink.fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            sink.werr = errno;
            break;
        }
        p += n, len -= (size_t)n;
        sink.written += (unsigned long long)n;
    }
    if (sink.werr == 0)
        sink_writeback();
    return sink.werr ? -1 : 0;
}

static int sink_commit(void)
{
    if (fsync(sink.fd) != 0 || close(sink.fd) != 0) {
        sink.werr = errno;
        sink.fd = -1;
        return -1;
    }
    sink.fd = -1;
    if (rename(sink.tmp, sink.path) != 0) {
        sink.werr = errno;
        return -1;
    }
    free(sink.tmp), sink.tmp = NULL;
    return 0;
}

/* What a put sent (the first host's whose file went whole), for put's closing line. */
static char put_sent_sha[65];

const char *cli_put_sent_sha(void)
{
    return put_sent_sha[0] ? put_sent_sha : NULL;
}

int cli_sink_finish(const rexec_result *res, int json)
{
    int rc = 0;
    if (res->put_sha256 != NULL && put_sent_sha[0] == 0)
        snprintf(put_sent_sha, sizeof(put_sent_sha), "%s", res->put_sha256);
    if (sink.path == NULL)
        return 0;
    /* stdout_bytes counts what the stream produced, also past max_output_bytes: all of it was
     * written here exactly when they are equal (stderr passing its cap does not matter) */
    if (sink.werr == 0 && res->exit_status == 0 && sink.written == res->stdout_bytes &&
        sink_commit() == 0) {
        if (!json)
            dprintf(2, "rexec: wrote %s: %llu bytes, sha256 %s\n", cli_arg(sink.path),
                    sink.written, res->stdout_sha256 ? res->stdout_sha256 : "-");
    } else if (sink.werr != 0) {
        rc = cli_error(SINK_EXIT, "--output %s: %s: the file was left as it was",
                       cli_arg(sink.path), strerror(sink.werr));
    } else if (res->exit_status == 0 && res->truncated && sink.written < res->stdout_bytes) {
        rc = cli_error(SINK_EXIT, "--output %s: the output passed max_output_bytes (%llu bytes "
                                  "were produced): the file was left as it was",
                       cli_arg(sink.path), (unsigned long long)res->stdout_bytes);
    } else if (res->exit_status == 0) {
        rc = cli_error(SINK_EXIT, "--output %s: %llu bytes written of %llu: the file was left "
                                  "as it was", cli_arg(sink.path), sink.written,
                       (unsigned long long)res->stdout_bytes);
    } else if (!json) {
        dprintf(2, "rexec: --output %s: the call did not succeed: the file was left as it was\n",
                cli_arg(sink.path));
    }
    sink_drop();
    return rc;
}

void cli_sink_abort(void)
{
    sink_drop();
}
