/* known_hosts in OpenSSH's format, markers included. libssh2 does not read markers (a line
 * starting with '@' made its whole file unreadable, and nothing refused a revoked key), so the
 * file is read here line by line: plain lines go to libssh2's parser, "@revoked" and
 * "@cert-authority" lines are matched here against the host name and the server's key. */
#ifndef RX_KNOWNHOSTS_H
#define RX_KNOWNHOSTS_H

#include <stddef.h>

#include "ssh_int.h"

#include "rexec.h"

typedef struct rx_kh_marks {
    unsigned revoked_line; /* first "@revoked" line for this host whose key is the server's */
    const char *revoked_path; /* ... in this file */
    unsigned ca_line;      /* first "@cert-authority" line whose patterns match the host */
    const char *ca_path;
    const char *path;      /* the file being read */
    unsigned skipped;      /* plain lines libssh2 could not parse (ignored, as ssh does) */
} rx_kh_marks;

/* Reads path (m is zeroed by the caller; several files may be read into one kh and m, the
 * first mark found is kept): its plain lines into kh, its marker lines checked against name (the known_hosts
 * name: "addr" or "[addr]:port") and the server's key blob. Returns 0, or REXEC_EHOSTKEY naming
 * the file when it cannot be read. */
int rx_knownhosts_load(LIBSSH2_KNOWNHOSTS *kh, const char *path, const char *name,
                       const unsigned char *key, size_t klen, rx_kh_marks *m, rexec_error *err);

#endif
