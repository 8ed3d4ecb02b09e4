/* `--stdin` from a pipe (cli.h): telling one from a file, and the fan-out's spool. One call
 * sends a pipe as it reads it (src/api/call_stdin.c); several calls cannot share one pipe, so
 * a fan-out copies it once into a private file that each call then streams like --stdin FILE. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int cli_stdin_streams(const char *path)
{
    struct stat st;
    int r = strcmp(path, "-") == 0 ? fstat(0, &st) : stat(path, &st);
    return r == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode));
}

int cli_stdin_by_name(const char *path)
{
    struct stat st;
    if (cli_stdin_streams(path))
        return 1;
    return strcmp(path, "-") == 0 && fstat(0, &st) == 0 && S_ISREG(st.st_mode);
}

/* An unlinked file in a fresh 0700 directory under $TMPDIR (removed at once): nobody else can
 * name it, open it or put anything in its place. -1 with errno. */
static int private_tmpfile(void)
{
    const char *t = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/rexec-stdin-XXXXXX", t && *t ? t : "/tmp");
    if (mkdtemp(dir) == NULL)
        return -1;
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) { /* a file system without O_TMPFILE: a name, unlinked before use */
        char name[4200];
        snprintf(name, sizeof(name), "%s/spool", dir);
        fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0)
            unlink(name);
    }
    int saved = errno;
    rmdir(dir);
    errno = saved;
    return fd;
}

/* Copies in to out up to max bytes, waiting at most pause_s for each piece. 0 or exit code. */
static int copy_stream(int in, int out, const char *path, unsigned long long max, double pause_s)
{
    static unsigned char buf[1 << 16];
    unsigned long long total = 0;
    for (;;) {
        struct pollfd p = {.fd = in, .events = POLLIN};
        int w = poll(&p, 1, (int)(pause_s * 1000));
        if (w < 0 && errno == EINTR)
            continue;
        if (w == 0)
            return cli_error(65, "--stdin %s sent nothing for %.10g s and did not end "
                                 "(--stdin-timeout): nothing ran", cli_arg(path), pause_s);
        ssize_t k = w < 0 ? -1 : read(in, buf, sizeof(buf));
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k < 0)
            return cli_error(65, "--stdin %s: %s", cli_arg(path), strerror(errno));
        if (k == 0)
            return 0;
        if ((total += (unsigned long long)k) > max)
            return cli_error(65, "--stdin %s: larger than %llu bytes", cli_arg(path), max);
        for (ssize_t off = 0; off < k;) {
            ssize_t n = write(out, buf + off, (size_t)(k - off));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return cli_error(74, "--stdin: cannot spool it under $TMPDIR: %s", strerror(errno));
            off += n;
        }
    }
}

int cli_stdin_spool(const char *path, unsigned long long max, double pause_s, char out[32])
{
    int in = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return cli_error(65, "--stdin %s: %s", cli_arg(path), strerror(errno));
    int fd = private_tmpfile();
    int rc = fd < 0 ? cli_error(74, "--stdin: cannot spool it under $TMPDIR: %s", strerror(errno))
                    : copy_stream(in, fd, path, max, pause_s);
    if (in > 0)
        close(in);
    if (rc == 0 && lseek(fd, 0, SEEK_SET) != 0)
        rc = cli_error(74, "--stdin: cannot read back its spool: %s", strerror(errno));
    if (rc != 0) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    snprintf(out, 32, "/proc/self/fd/%d", fd); /* open until the process ends */
    return 0;
}
