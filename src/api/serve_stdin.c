/* serve's stdin spool (serve_stdin.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "fsutil.h"
#include "serve_stdin.h"

void rx_spool_init(rx_spool *sp)
{
    memset(sp, 0, sizeof(*sp));
    sp->fd = -1;
}

/* Where O_TMPFILE is refused (some file systems): a private name, unlinked before use. */
static int spool_mkstemp(const char *dir)
{
    size_t n = strlen(dir) + sizeof("/.stdin-XXXXXX");
    char *t = malloc(n);
    if (t == NULL)
        return -1;
    snprintf(t, n, "%s/.stdin-XXXXXX", dir);
    mode_t old = umask(0077);
    int fd = mkostemp(t, O_CLOEXEC);
    umask(old);
    if (fd >= 0)
        unlink(t);
    free(t);
    return fd;
}

int rx_spool_open(rx_spool *sp, const char *ws_dir, uint64_t max, rexec_error *err)
{
    char *dir = rx_fs_join(ws_dir, "evidence");
    int r;
    rx_spool_init(sp);
    if (dir == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if ((r = rx_fs_mkdir_private(dir, REXEC_EAUDIT, err)) != 0) {
        free(dir);
        return r;
    }
    sp->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (sp->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
        sp->fd = spool_mkstemp(dir);
    if (sp->fd < 0) {
        r = rx_fail(err, REXEC_EAUDIT, "stdin: cannot spool it in %s: %s", dir, strerror(errno));
        free(dir);
        return r;
    }
    free(dir);
    snprintf(sp->path, sizeof(sp->path), "/proc/self/fd/%d", sp->fd);
    sp->max = max;
    return 0;
}

int rx_spool_add(rx_spool *sp, const void *data, size_t n, rexec_error *err)
{
    if (sp->fd < 0)
        return rx_fail(err, REXEC_EINTERNAL, "stdin: the spool is closed");
    if (n > sp->max - sp->len)
        return rx_fail(err, REXEC_EREQUEST, "stdin: more than limits.max_stdin_bytes (%llu bytes)",
                       (unsigned long long)sp->max);
    if (rx_fs_write_all(sp->fd, data, n) != 0)
        return rx_fail(err, REXEC_EAUDIT, "stdin: cannot spool it in the workspace's evidence/: %s",
                       strerror(errno));
    sp->len += n;
    return 0;
}

void rx_spool_close(rx_spool *sp)
{
    if (sp->fd >= 0)
        close(sp->fd);
    sp->fd = -1;
    sp->path[0] = 0;
}
