/* serve's peers: credentials, admission and verbs (serve_peer.h). */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "fsutil.h"
#include "serve_peer.h"

#define PEER_MAX_GROUPS 256
#define NSS_BUF 16384 /* getpwnam_r/getgrnam_r scratch: ample for local files and LDAP alike */

int rx_peer_get(int fd, rx_peer *p)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    struct passwd pw, *res = NULL;
    char buf[NSS_BUF];
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return -1;
    p->uid = cred.uid;
    p->gid = cred.gid;
    p->pid = cred.pid;
    p->user_gid = cred.gid;
    if (getpwuid_r(cred.uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL) {
        snprintf(p->user, sizeof(p->user), "%s", pw.pw_name);
        p->user_gid = pw.pw_gid;
    } else {
        snprintf(p->user, sizeof(p->user), "%u", (unsigned)cred.uid);
    }
    return 0;
}

static int name_uid(const char *name, uid_t *uid)
{
    struct passwd pw, *res = NULL;
    char buf[NSS_BUF];
    if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) != 0 || res == NULL)
        return -1;
    *uid = pw.pw_uid;
    return 0;
}

static int name_gid(const char *name, gid_t *gid)
{
    struct group gr, *res = NULL;
    char buf[NSS_BUF];
    if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || res == NULL)
        return -1;
    *gid = gr.gr_gid;
    return 0;
}

/* 1 when the peer belongs to gid: the process's gid as the kernel reports it, its user's
 * primary group (passwd) even when the process runs under another (sg, newgrp), or a
 * supplementary group of its user (group database). */
static int peer_in_group(const rx_peer *p, gid_t gid)
{
    gid_t groups[PEER_MAX_GROUPS];
    int n = PEER_MAX_GROUPS;
    if (p->gid == gid || p->user_gid == gid)
        return 1;
    if (getgrouplist(p->user, p->user_gid, groups, &n) < 0)
        n = PEER_MAX_GROUPS; /* more than we hold: check the ones we got */
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return 1;
    return 0;
}

unsigned rx_peer_verbs(const rx_ws *ws, const rx_peer *p)
{
    unsigned verbs = 0;
    if (p->uid == geteuid())
        return RX_VERB_ALL;
    for (size_t i = 0; i < ws->serve.n_clients; i++) {
        const rx_serve_client *c = &ws->serve.clients[i];
        uid_t uid;
        gid_t gid;
        if (c->user != NULL && name_uid(c->user, &uid) == 0 && uid == p->uid)
            verbs |= c->verbs;
        else if (c->group != NULL && name_gid(c->group, &gid) == 0 && peer_in_group(p, gid))
            verbs |= c->verbs;
    }
    /* entries that add up (a user's and its group's) never make a uid that runs an approver:
     * it keeps what runs, and loses approve */
    if ((verbs & RX_VERB_APPROVE) && (verbs & RX_VERB_EXECUTING))
        verbs &= ~(unsigned)RX_VERB_APPROVE;
    return verbs;
}

static int check_names(const rx_ws *ws, rexec_error *err)
{
    const rx_serve_conf *sc = &ws->serve;
    uid_t uid;
    gid_t gid;
    for (size_t i = 0; i < sc->n_clients; i++) {
        const rx_serve_client *c = &sc->clients[i];
        if (c->user != NULL && name_uid(c->user, &uid) != 0)
            return rx_fail(err, REXEC_ECONFIG, "serve.clients[%zu].user: no user \"%s\" on this "
                           "machine", i, c->user);
        if (c->group != NULL && name_gid(c->group, &gid) != 0)
            return rx_fail(err, REXEC_ECONFIG, "serve.clients[%zu].group: no group \"%s\" on "
                           "this machine", i, c->group);
    }
    if (sc->socket_group != NULL && name_gid(sc->socket_group, &gid) != 0)
        return rx_fail(err, REXEC_ECONFIG, "serve.socket_group: no group \"%s\" on this machine",
                       sc->socket_group);
    return 0;
}

/* A path other users must not reach: no group or other bits at all. A missing one is fine
 * (rexec creates it 0700). */
static int check_closed(const char *dir, const char *name, rexec_error *err)
{
    struct stat st;
    char *path = name ? rx_fs_join(dir, name) : strdup(dir);
    int r = 0;
    if (path == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (lstat(path, &st) == 0 && (st.st_mode & 077) != 0)
        r = rx_fail(err, REXEC_ECONFIG, "serve.clients admits other users, so %s must be closed "
                    "to group and others (it is %04o): chmod go= %s", path,
                    (unsigned)(st.st_mode & 07777), path);
    free(path);
    return r;
}

int rx_serve_ws_check(const rx_ws *ws, rexec_error *err)
{
    static const char *const dirs[] = {"approvals", "audit", "evidence", NULL};
    int r;
    if (ws->serve.n_clients == 0)
        return 0;
    if ((r = check_names(ws, err)) != 0)
        return r;
    for (int i = 0; dirs[i]; i++)
        if ((r = check_closed(ws->dir, dirs[i], err)) != 0)
            return r;
    for (size_t i = 0; i < ws->n_secrets; i++)
        if (ws->secrets[i].file && (r = check_closed(ws->secrets[i].file, NULL, err)) != 0)
            return r;
    for (size_t i = 0; i < ws->n_hosts; i++)
        if (ws->hosts[i].auth == RX_AUTH_KEY && ws->hosts[i].key &&
            (r = check_closed(ws->hosts[i].key, NULL, err)) != 0)
            return r;
    return 0;
}

int rx_serve_socket_access(const rx_ws *ws, const char *path, rexec_error *err)
{
    gid_t gid;
    const char *g = ws->serve.socket_group;
    if (g != NULL && name_gid(g, &gid) != 0)
        return rx_fail(err, REXEC_ECONFIG, "serve.socket_group: no group \"%s\" on this machine",
                       g);
    if (g != NULL && chown(path, (uid_t)-1, gid) != 0)
        return rx_fail(err, REXEC_EUSAGE, "%s: cannot give the socket to group %s: %s", path, g,
                       strerror(errno));
    if (chmod(path, (mode_t)rx_serve_socket_mode(&ws->serve)) != 0)
        return rx_fail(err, REXEC_EUSAGE, "%s: cannot set the socket's mode: %s", path,
                       strerror(errno));
    return 0;
}
