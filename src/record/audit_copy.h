/* Private to src/record: the copy of every audit line to a syslog socket (audit.c). */
#ifndef RX_AUDIT_COPY_H
#define RX_AUDIT_COPY_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "rexec.h"

/* Longest line sent whole: rsyslog's default message limit is 8 KiB. A longer record is
 * copied as its seq, hash, run_id and size, which is what anchors the tail. */
#define RX_AUDIT_COPY_MAX 7680

typedef struct rx_audit_copy {
    int fd; /* -1: no copy */
    struct sockaddr_un addr;
    socklen_t addr_len;
    unsigned long failures; /* copies that could not be sent */
} rx_audit_copy;

void rx_audit_copy_init(rx_audit_copy *c);
/* Opens a datagram socket for sending to path (/dev/log for the system's syslog or journald).
 * REXEC_ECONFIG when the path is too long or not absolute. Nothing is sent yet. */
int rx_audit_copy_open(rx_audit_copy *c, const char *path, rexec_error *err);
/* Sends one line (without its newline) as "<86>Mmm dd hh:mm:ss rexec-audit[pid]: <line>":
 * facility authpriv, severity info. Never blocks; a failure is counted, not returned. */
void rx_audit_copy_send(rx_audit_copy *c, const char *line, size_t len, long long seq,
                        const char *hash);
void rx_audit_copy_close(rx_audit_copy *c);

#endif
