/* File-system checks and exact-mode creation (after OpenSSH's safe_path and sshkey_perm_ok). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "fsutil.h"

/* What is wrong with st's owner and mode, or NULL when nothing is. A file owned by someone
 * else than us or root could be rewritten by them whatever its mode, like ssh assumes. */
static const char *fs_mode_problem(const struct stat *st, int private)
{
    if (S_ISLNK(st->st_mode))
        return "is a symbolic link";
    if (st->st_uid != geteuid() && st->st_uid != 0)
        return "is owned by another user";
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return "is group- or world-writable";
    if (private && (st->st_mode & (S_IRGRP | S_IROTH)))
        return "is group- or world-readable";
    return NULL;
}

int rx_fs_check(const char *path, int private, int code, rexec_error *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return rx_fail(err, code, "%s: %s", path, strerror(errno));
    const char *why = fs_mode_problem(&st, private);
    if (why != NULL)
        return rx_fail(err, code, "%s: %s (mode %04o): refusing to use it", path, why,
                       (unsigned)(st.st_mode & 07777));
    return 0;
}

/* Fixes the mode of a directory we just created: mkdir's mode is filtered by the umask (0777
 * would leave 0000), and the open without following a link makes sure the mode lands on the
 * directory itself, not on whatever a racing symlink points to. */
static int fs_fix_dir_mode(const char *path, int code, rexec_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return rx_fail(err, code, "%s: %s", path,
                       errno == ELOOP ? "is a symbolic link" : strerror(errno));
    int r = 0;
    if (fchmod(fd, 0700) != 0)
        r = rx_fail(err, code, "%s: cannot set mode 0700: %s", path, strerror(errno));
    close(fd);
    return r;
}

int rx_fs_check_fd(int fd, const char *path, int private, int code, rexec_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return rx_fail(err, code, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return rx_fail(err, code, "%s: not a regular file or directory: refusing to use it", path);
    const char *why = fs_mode_problem(&st, private);
    if (why != NULL)
        return rx_fail(err, code, "%s: %s (mode %04o): refusing to use it", path, why,
                       (unsigned)(st.st_mode & 07777));
    return 0;
}

const char *rx_fs_open_dir_why(const char *path, int e)
{
    struct stat st;
    if ((e == ENOTDIR || e == ELOOP) && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        return "is a symbolic link: refusing to use it";
    return strerror(e);
}

int rx_fs_mkdir_private(const char *path, int code, rexec_error *err)
{
    if (mkdir(path, 0700) == 0)
        return fs_fix_dir_mode(path, code, err);
    if (errno != EEXIST)
        return rx_fail(err, code, "%s: cannot create directory: %s", path, strerror(errno));
    int r = rx_fs_check(path, 0, code, err);
    if (r != 0)
        return r;
    struct stat st;
    if (stat(path, &st) != 0)
        return rx_fail(err, code, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return rx_fail(err, code, "%s: exists and is not a directory", path);
    return 0;
}

int rx_fs_read_file(const char *path, size_t max, char **data, size_t *len, int code,
                    rexec_error *err)
{
    rx_buf b;
    unsigned char chunk[4096];
    int r = 0;

    struct stat st;
    rx_buf_init(&b, max);
    /* O_NONBLOCK: a FIFO put in place of a file must not hang us in open() */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return rx_fail(err, code, "%s: %s", path,
                       errno == ELOOP ? "is a symbolic link" : strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return rx_fail(err, code, "%s: not a regular file", path);
    }
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = rx_fail(err, code, "%s: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        if ((r = rx_buf_add(&b, chunk, (size_t)n)) != 0) {
            r = rx_fail(err, r == REXEC_ENOMEM ? REXEC_ENOMEM : code,
                        "%s: larger than %zu bytes", path, max);
            goto out;
        }
    }
    *data = (char *)rx_buf_steal(&b, len);
    if (*data == NULL)
        r = rx_fail(err, REXEC_ENOMEM, "%s: out of memory", path);
out:
    /* The file may be a key or a secret: the chunk and the buffer are wiped, not just freed. */
    explicit_bzero(chunk, sizeof(chunk));
    rx_buf_free(&b);
    close(fd);
    return r;
}

char *rx_fs_join(const char *dir, const char *path)
{
    size_t dl = strlen(dir), pl = strlen(path);
    if (path[0] == '/' || dl == 0)
        return strdup(path);
    char *s = malloc(dl + 1 + pl + 1);
    if (s == NULL)
        return NULL;
    memcpy(s, dir, dl);
    size_t at = dl;
    if (dir[dl - 1] != '/')
        s[at++] = '/';
    memcpy(s + at, path, pl + 1);
    return s;
}

int rx_fs_create_private(int dirfd, const char *path, int *fd, int code, rexec_error *err)
{
    int f = openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f < 0)
        return rx_fail(err, code, "%s: cannot create: %s", path, strerror(errno));
    /* The umask may have removed bits we need (0600 under umask 0777 is 0000). */
    if (fchmod(f, 0600) != 0) {
        int e = errno;
        close(f);
        unlinkat(dirfd, path, 0);
        return rx_fail(err, code, "%s: cannot set mode 0600: %s", path, strerror(e));
    }
    *fd = f;
    return 0;
}

int rx_fs_write_all(int fd, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0) { /* not expected from a regular file; never loop forever on it */
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int rx_fs_fsync_dir(const char *path, int code, rexec_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return rx_fail(err, code, "%s: %s", path, strerror(errno));
    int r = 0;
    if (fsync(fd) != 0 && errno != EINVAL) /* EINVAL: a file system without dir fsync */
        r = rx_fail(err, code, "%s: fsync: %s", path, strerror(errno));
    close(fd);
    return r;
}

int rx_fs_is_inside(const char *path, const char *dir)
{
    char *rp = realpath(path, NULL), *rd = realpath(dir, NULL);
    int r = -1;
    if (rp != NULL && rd != NULL) {
        size_t n = strlen(rd);
        if (n == 1) /* dir is "/": everything is inside */
            r = 1;
        else
            r = strncmp(rp, rd, n) == 0 && (rp[n] == '/' || rp[n] == 0);
    }
    free(rp);
    free(rd);
    return r;
}
