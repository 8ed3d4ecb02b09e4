/* The syslog copy of the audit log: every appended line also goes, as one datagram in the
 * local syslog format, to a socket such as /dev/log, where rsyslog or journald keep it on
 * another system or out of the workspace owner's reach. It is a second witness, not the
 * record: the append never waits for it or fails because of it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit_copy.h"
#include "err.h"

#define COPY_PRI 86 /* LOG_AUTHPRIV (10) * 8 + LOG_INFO (6) */
#define COPY_IDENT "rexec-audit"

void rx_audit_copy_init(rx_audit_copy *c)
{
    memset(c, 0, sizeof(*c));
    c->fd = -1;
}

void rx_audit_copy_close(rx_audit_copy *c)
{
    if (c->fd >= 0)
        close(c->fd);
    rx_audit_copy_init(c);
}

int rx_audit_copy_open(rx_audit_copy *c, const char *path, rexec_error *err)
{
    rx_audit_copy_close(c);
    if (path == NULL)
        return 0;
    if (path[0] != '/' || strlen(path) >= sizeof(c->addr.sun_path))
        return rx_fail(err, REXEC_ECONFIG,
                       "audit.syslog: \"%.120s\": expected an absolute socket path shorter than "
                       "%zu bytes", path, sizeof(c->addr.sun_path));
    c->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c->fd < 0)
        return rx_fail(err, REXEC_EAUDIT, "audit.syslog: socket: %s", strerror(errno));
    c->addr.sun_family = AF_UNIX;
    memcpy(c->addr.sun_path, path, strlen(path) + 1);
    c->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
    return 0;
}

void rx_audit_copy_send(rx_audit_copy *c, const char *line, size_t len, long long seq,
                        const char *hash)
{
    char head[96], cut[256], stamp[32];
    struct iovec iov[2];
    struct msghdr msg = {0};
    time_t now = time(NULL);
    struct tm tm;

    if (c->fd < 0)
        return;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%b %e %H:%M:%S", &tm);
    int hn = snprintf(head, sizeof(head), "<%d>%s " COPY_IDENT "[%ld]: ", COPY_PRI, stamp,
                      (long)getpid());
    iov[0] = (struct iovec){head, (size_t)hn};
    if (len <= RX_AUDIT_COPY_MAX) {
        iov[1] = (struct iovec){(void *)line, len};
    } else { /* too long for a syslog message: what anchors the tail */
        int n = snprintf(cut, sizeof(cut), "{\"seq\":%lld,\"hash\":\"%s\",\"bytes\":%zu,"
                                           "\"copy\":\"record too long to copy whole\"}",
                         seq, hash, len);
        iov[1] = (struct iovec){cut, (size_t)n};
    }
    msg.msg_name = &c->addr;
    msg.msg_namelen = c->addr_len;
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    while (sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        if (errno != EINTR) {
            c->failures++;
            return;
        }
}
