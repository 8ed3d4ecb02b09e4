/* Who is on the other end of a serve connection, and what it may do (docs/gate.md, "Two
 * users"). Private to src/api/ (serve.c).
 *
 * The user running serve has every verb. Other users get the verbs of the workspace's
 * serve.clients entries that name them or a group they belong to (primary or supplementary),
 * anyone else nothing: the connection is refused with a line saying so. */
#ifndef RX_SERVE_PEER_H
#define RX_SERVE_PEER_H

#include <sys/types.h>

#include "rexec.h"
#include "workspace.h"

#define RX_PEER_NAME_MAX 64

typedef struct rx_peer {
    uid_t uid;
    gid_t gid;      /* the process's gid, as the kernel reports it */
    gid_t user_gid; /* the user's primary group from its passwd entry; gid when it has none */
    pid_t pid;
    char user[RX_PEER_NAME_MAX]; /* the user name, or the uid in decimal when it has none */
} rx_peer;

/* The peer of a connected Unix socket (SO_PEERCRED). 0, or -1 when the kernel cannot say. */
int rx_peer_get(int fd, rx_peer *p);

/* The verbs (RX_VERB_*) the peer has under ws's serve section; 0: not admitted. */
unsigned rx_peer_verbs(const rx_ws *ws, const rx_peer *p);

/* Checks a workspace before serve admits other users with it: every serve.clients name exists
 * on this machine (REXEC_ECONFIG naming the entry), and approvals/, audit/, evidence/, the secret
 * files and the hosts' private keys are closed to group and others (REXEC_ECONFIG naming the
 * path and the chmod that fixes it). Without clients there is nothing to check. */
int rx_serve_ws_check(const rx_ws *ws, rexec_error *err);

/* Creates the listening socket's access: chmod to the workspace's socket mode and, with a
 * socket_group, chgrp. REXEC_ECONFIG naming an unknown group, REXEC_EUSAGE when it fails. */
int rx_serve_socket_access(const rx_ws *ws, const char *path, rexec_error *err);

#endif
