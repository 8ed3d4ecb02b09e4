/* One SSH connection on the libuv loop. Every transition goes through session_set_state (logged
 * with REXEC_DEBUG=1); each state has one st_<name> function. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "auth.h"
#include "err.h"
#include "knownhosts.h"
#include "session.h"
#include "ssh_int.h"

struct rx_session {
    uv_loop_t *loop;
    rx_session_opts opts;
    rx_session_events ev;
    rx_session_state state;
    int fd;
    LIBSSH2_SESSION *ssh;
    uv_getaddrinfo_t gai;
    struct addrinfo *addrs, *addr_next;
    uv_poll_t *poll;       /* one per socket tried; freed by its close callback */
    int poll_events;
    uv_timer_t timer;      /* connect timeout, then keepalive */
    uv_timer_t kick;       /* runs the drive loop from the loop, never from a caller's stack */
    uv_idle_t resume;      /* a drive that ran out of budget with work left goes on from here,
                              after the loop's other handles (RX_DRIVE_PASSES) */
    int pinging;           /* a keepalive round trip (see st_ping) is in flight */
    int unanswered;        /* keepalive probes sent since the last bytes read from the server */
    int open_handles;      /* handles whose close callback is still due */
    int gai_pending;
    int hk_pending;        /* a known_hosts append runs on the thread pool (hk_append) */
    rx_chan_user *users;   /* attached channel users (execs), running or queued */
    rx_auth *auth;         /* AUTH state: agent connection, passphrase (auth.c) */
    int driving, again;    /* the drive loop is running / must run once more */
    int full;
    int closing;
    rx_session_state failed_in; /* the state a failure happened in */
    rexec_error err;
};

static const char *const state_names[] = {"RESOLVE", "CONNECT", "HANDSHAKE", "HOSTKEY",
                                          "AUTH",    "READY",   "FAILED",    "CLOSED"};

const char *rx_session_state_name(rx_session_state st)
{
    return st <= RX_SS_CLOSED ? state_names[st] : "?";
}

static void session_set_state(rx_session *s, rx_session_state st)
{
    rx_log(s->opts.log, REXEC_LOG_DEBUG, "%s: %s -> %s", s->opts.host->name,
           rx_session_state_name(s->state), rx_session_state_name(st));
    s->state = st;
}

static void session_drive(rx_session *s);
static void session_fail(rx_session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- tear-down ------------------------------------------------------------------------------ */

static void session_maybe_free(rx_session *s)
{
    if (s->open_handles > 0 || s->gai_pending || s->hk_pending)
        return;
    if (s->addrs)
        uv_freeaddrinfo(s->addrs);
    rx_tunnel_link_unref(s->opts.tunnel);
    rx_session_events ev = s->ev;
    free(s);
    if (ev.on_freed)
        ev.on_freed(ev.ud);
}

static void on_handle_closed(uv_handle_t *h)
{
    rx_session *s = h->data;
    if (h->type == UV_POLL)
        free(h);
    s->open_handles--;
    session_maybe_free(s);
}

/* Stops watching the current socket and closes it (its poll handle first: libuv must not watch
 * a closed descriptor). */
static void session_close_socket(rx_session *s)
{
    if (s->poll) {
        uv_close((uv_handle_t *)s->poll, on_handle_closed);
        s->poll = NULL;
    }
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

/* Frees libssh2 without blocking: shutting the socket down first makes every pending libssh2
 * operation fail at once instead of waiting for a peer that may be gone. */
static void session_drop_ssh(rx_session *s)
{
    rx_auth_free(s->auth);
    s->auth = NULL;
    if (s->ssh == NULL)
        return;
    if (s->state == RX_SS_READY)
        libssh2_session_disconnect(s->ssh, "rexec closing");
    if (s->fd >= 0)
        shutdown(s->fd, SHUT_RDWR);
    libssh2_session_free(s->ssh);
    s->ssh = NULL;
}

static void fail_users(rx_session *s, const rexec_error *err)
{
    rx_chan_user *u = s->users;
    s->users = NULL;
    while (u) {
        rx_chan_user *next = u->next;
        u->next = NULL;
        u->ops->fail(u, err->code, err->msg);
        u->ops->finish(u);
        u = next;
    }
}

void rx_session_close(rx_session *s, const rexec_error *err)
{
    rexec_error cancelled;
    if (s->closing)
        return;
    s->closing = 1;
    if (err == NULL) {
        rx_fail(&cancelled, REXEC_ECANCELLED, "%s: connection closed", s->opts.host->name);
        err = &cancelled;
    }
    fail_users(s, err);
    session_drop_ssh(s);
    if (s->state != RX_SS_FAILED)
        session_set_state(s, RX_SS_CLOSED);
    session_close_socket(s);
    if (!uv_is_closing((uv_handle_t *)&s->timer))
        uv_close((uv_handle_t *)&s->timer, on_handle_closed);
    if (!uv_is_closing((uv_handle_t *)&s->kick))
        uv_close((uv_handle_t *)&s->kick, on_handle_closed);
    if (!uv_is_closing((uv_handle_t *)&s->resume))
        uv_close((uv_handle_t *)&s->resume, on_handle_closed);
    if (s->gai_pending)
        uv_cancel((uv_req_t *)&s->gai);
    session_maybe_free(s);
}

static void session_fail(rx_session *s, int code, const char *fmt, ...)
{
    va_list ap;
    char msg[sizeof(s->err.msg)];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* Through a tunnel that broke first (the bastion is down or refused it): that is the cause. */
    if (s->opts.tunnel && s->opts.tunnel->failed && s->state < RX_SS_READY) {
        code = s->opts.tunnel->err.code;
        snprintf(msg, sizeof(msg), "%s", s->opts.tunnel->err.msg);
    }
    rx_fail(&s->err, code, "%s: %s", s->opts.host->name, msg);
    s->failed_in = s->state;
    session_set_state(s, RX_SS_FAILED);
    if (s->ev.on_failed)
        s->ev.on_failed(s->ev.ud, s, &s->err);
    rx_session_close(s, &s->err);
}

/* ---- timers --------------------------------------------------------------------------------- */

static void on_connect_timeout(uv_timer_t *t)
{
    rx_session *s = t->data;
    session_fail(s, REXEC_ETIMEDOUT, "no SSH session within %.1f s (stuck in %s)",
                 s->opts.connect_timeout_s, rx_session_state_name(s->state));
}

/* 1 when every exec on s is paused by its consumer (rexec_call_pause): the socket is then not
 * read on purpose, and its silence says nothing about the peer. */
static int session_all_paused(const rx_session *s)
{
    if (s->users == NULL || s->pinging)
        return 0;
    for (rx_chan_user *u = s->users; u; u = u->next)
        if (u->ops->paused == NULL || !u->ops->paused(u))
            return 0;
    return 1;
}

/* Bytes the kernel holds for us that libssh2 has not read yet (a busy loop, not a dead peer). */
static int socket_has_bytes(const rx_session *s)
{
    char c;
    return s->fd >= 0 && recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* A probe every keepalive_s, counted like OpenSSH's ServerAliveCountMax: it answers the
 * server's own keepalives and finds a dead peer (the socket has TCP_USER_TIMEOUT, so
 * unacknowledged bytes end the connection). A peer whose kernel still acknowledges but whose
 * sshd no longer answers (SIGSTOPped, hung, a middlebox that lost the flow) is found by
 * unanswered probes: every probe asks for a reply, and any byte read resets the count; after
 * RX_KEEPALIVE_COUNT unanswered ones the connection is dead, so a dead peer is found between
 * RX_KEEPALIVE_COUNT and RX_KEEPALIVE_COUNT + 1 intervals after its last bytes. Judged by
 * probes, not by wall-clock silence: a loop that was blocked (a slow on_output, an operator's
 * approval prompt) fires this timer once when it wakes, and what arrived meanwhile is read
 * before the count can grow again. */
static void on_keepalive(uv_timer_t *t)
{
    rx_session *s = t->data;
    int next = 0;
    if (s->state != RX_SS_READY)
        return;
    if (session_all_paused(s)) {
        s->unanswered = 0;
        return;
    }
    if (s->unanswered >= RX_KEEPALIVE_COUNT) {
        if (socket_has_bytes(s)) { /* arrived, not read yet: read it, judge on the next tick */
            rx_session_kick(s);
            return;
        }
        session_fail(s, REXEC_ECONNLOST,
                     "no answer to %d keepalives sent %.0f s apart: the connection is dead",
                     s->unanswered, s->opts.keepalive_s);
        return;
    }
    s->unanswered++;
    if (s->users != NULL) {
        libssh2_keepalive_send(s->ssh, &next);
        return;
    }
    s->pinging = 1;
    rx_session_kick(s);
}

/* ---- RESOLVE and CONNECT -------------------------------------------------------------------- */

static void on_poll(uv_poll_t *p, int status, int events);

static void st_connect_next(rx_session *s);

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    rx_session *s = req->data;
    s->gai_pending = 0;
    if (s->closing) {
        if (res)
            uv_freeaddrinfo(res);
        session_maybe_free(s);
        return;
    }
    if (status != 0) {
        session_fail(s, REXEC_EHOST, "cannot resolve %s: %s", s->opts.host->address,
                     uv_strerror(status));
        return;
    }
    s->addrs = s->addr_next = res;
    session_set_state(s, RX_SS_CONNECT);
    st_connect_next(s);
}

static int socket_open(rx_session *s, const struct addrinfo *ai)
{
    int one = 1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* libssh2 never sets TCP_NODELAY; without it every call waits on delayed ACKs. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    if (s->opts.keepalive_s > 0) {
        unsigned ms = (unsigned)(s->opts.keepalive_s * 3000);
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Tries the next resolved address; fails the session when there is none left. */
static void st_connect_next(rx_session *s)
{
    int last = 0;
    while (s->addr_next) {
        const struct addrinfo *ai = s->addr_next;
        s->addr_next = ai->ai_next;
        int fd = socket_open(s, ai);
        if (fd < 0) {
            last = -fd;
            continue;
        }
        s->fd = fd;
        s->poll = malloc(sizeof(*s->poll));
        if (s->poll == NULL || uv_poll_init_socket(s->loop, s->poll, fd) != 0) {
            free(s->poll);
            s->poll = NULL;
            session_fail(s, REXEC_EINTERNAL, "cannot watch the socket");
            return;
        }
        s->poll->data = s;
        s->open_handles++;
        s->poll_events = UV_WRITABLE;
        int r = uv_poll_start(s->poll, UV_WRITABLE, on_poll);
        if (r != 0)
            session_fail(s, REXEC_EINTERNAL, "cannot watch the socket: %s", uv_strerror(r));
        return;
    }
    if (last == EMFILE || last == ENFILE) /* one fd per connection: say which limit */
        session_fail(s, REXEC_EHOST, "cannot connect to %s port %d: %s (the open-file limit, "
                     "RLIMIT_NOFILE / ulimit -n, holds one per connection)", s->opts.host->address,
                     s->opts.host->port, strerror(last));
    else
        session_fail(s, REXEC_EHOST, "cannot connect to %s port %d: %s", s->opts.host->address,
                     s->opts.host->port, strerror(last ? last : ECONNREFUSED));
}

static void st_connected(rx_session *s)
{
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        soerr = errno;
    if (soerr != 0) {
        /* Another address may work (e.g. ::1 then 127.0.0.1): a fresh socket and poll. */
        if (s->addr_next == NULL) {
            session_fail(s, REXEC_EHOST, "cannot connect to %s port %d: %s",
                         s->opts.host->address, s->opts.host->port, strerror(soerr));
            return;
        }
        session_close_socket(s);
        st_connect_next(s);
        return;
    }
    session_set_state(s, RX_SS_HANDSHAKE);
    session_drive(s);
}

/* ---- HANDSHAKE, HOSTKEY, AUTH --------------------------------------------------------------- */

enum { ST_AGAIN = 0, ST_NEXT = 1, ST_FAILED = -1 };

int rx_session_last_error(rx_session *s, char *buf, size_t n)
{
    char *m = NULL;
    int e = libssh2_session_last_error(s->ssh, &m, NULL, 0);
    snprintf(buf, n, "%s", m && *m ? m : "unknown libssh2 error");
    return e;
}

static int st_handshake(rx_session *s)
{
    char m[256];
    int rc = libssh2_session_handshake(s->ssh, s->fd);
    if (rc == LIBSSH2_ERROR_EAGAIN)
        return ST_AGAIN;
    if (rc != 0) {
        rx_session_last_error(s, m, sizeof(m));
        session_fail(s, REXEC_EHOST, "SSH handshake with %s port %d failed: %s",
                     s->opts.host->address, s->opts.host->port, m);
        return ST_FAILED;
    }
    session_set_state(s, RX_SS_HOSTKEY);
    return ST_NEXT;
}

static int knownhost_keybits(int hostkey_type)
{
    switch (hostkey_type) {
    case LIBSSH2_HOSTKEY_TYPE_RSA: return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
    case LIBSSH2_HOSTKEY_TYPE_DSS: return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
    case LIBSSH2_HOSTKEY_TYPE_ED25519: return LIBSSH2_KNOWNHOST_KEY_ED25519;
    default: return LIBSSH2_KNOWNHOST_KEY_UNKNOWN;
    }
}

/* "SHA256:<base64 without padding>", as ssh-keygen -lf prints it. */
static void fingerprint(rx_session *s, char *out, size_t n)
{
    const unsigned char *h = (const unsigned char *)libssh2_hostkey_hash(s->ssh,
                                                                        LIBSSH2_HOSTKEY_HASH_SHA256);
    unsigned char b64[64];
    int len = h ? EVP_EncodeBlock(b64, h, 32) : 0;
    while (len > 0 && b64[len - 1] == '=')
        len--;
    snprintf(out, n, "SHA256:%.*s", len, (const char *)b64);
}

/* The name known_hosts uses for this host: "[addr]:port" unless the port is 22. */
static void knownhost_name(const rx_host *h, char *out, size_t n)
{
    if (h->port == 22)
        snprintf(out, n, "%s", h->address);
    else
        snprintf(out, n, "[%s]:%d", h->address, h->port);
}

/* Trust on first use: the key's line is appended to known_hosts under an exclusive lock, one
 * write, then fsync: on libuv's thread pool, because flock waits for whoever else holds the file
 * (an ssh-keygen -R, another rexec) and fsync for the disk, and every other connection and serve
 * client would wait with them on the loop. The session stays in HOSTKEY meanwhile (st_hostkey
 * waits) and is not freed before the append has reported (hk_pending). */
typedef struct hk_append {
    uv_work_t work;
    rx_session *s;
    char path[4096];
    char line[4096];
    size_t len;
    char fp[80];
    const char *why; /* NULL: appended */
    int err;
} hk_append;

static void hk_append_work(uv_work_t *w)
{
    hk_append *a = w->data;
    int fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        a->err = errno;
        a->why = errno == ELOOP ? "it is a symbolic link" : "open";
        return;
    }
    errno = 0;
    if (flock(fd, LOCK_EX) != 0 || write(fd, a->line, a->len) != (ssize_t)a->len || fsync(fd) != 0)
        a->why = "write", a->err = errno;
    close(fd);
}

static void hk_append_done(uv_work_t *w, int status)
{
    hk_append *a = w->data;
    rx_session *s = a->s;
    s->hk_pending = 0;
    if (s->closing) {
        session_maybe_free(s);
    } else if (status != 0 || a->why != NULL) {
        session_fail(s, REXEC_EHOSTKEY, "cannot record the new host key %s in %s: %s", a->fp,
                     s->opts.known_hosts,
                     status != 0 ? uv_strerror(status)
                     : a->err == 0 ? "short write"
                     : a->err == ELOOP ? a->why : strerror(a->err));
    } else {
        session_set_state(s, RX_SS_AUTH);
        session_drive(s);
    }
    free(a);
}

/* Renders the new key's line and starts its append (hk_append_work). 0, or -1 with *why. */
static int knownhost_append(rx_session *s, LIBSSH2_KNOWNHOSTS *kh, const char *key, size_t klen,
                            int bits, const char *fp, const char **why)
{
    char name[300];
    struct libssh2_knownhost *entry = NULL;
    hk_append *a = calloc(1, sizeof(*a));
    knownhost_name(s->opts.host, name, sizeof(name));
    *why = "libssh2 cannot write the line";
    if (a == NULL || strlen(s->opts.known_hosts) >= sizeof(a->path) ||
        libssh2_knownhost_addc(kh, name, NULL, key, klen, "added by rexec (accept-new)", 27,
                               LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | bits,
                               &entry) != 0 ||
        libssh2_knownhost_writeline(kh, entry, a->line, sizeof(a->line), &a->len,
                                    LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0) {
        *why = a == NULL ? "out of memory" : *why;
        free(a);
        return -1;
    }
    snprintf(a->path, sizeof(a->path), "%s", s->opts.known_hosts);
    snprintf(a->fp, sizeof(a->fp), "%s", fp);
    a->s = s;
    a->work.data = a;
    if (uv_queue_work(s->loop, &a->work, hk_append_work, hk_append_done) != 0) {
        *why = "cannot start the write";
        free(a);
        return -1;
    }
    s->hk_pending = 1;
    return 0;
}

/* Reads known_hosts: plain lines into kh, markers into marks (knownhosts.c). */
static int hostkey_read_file(rx_session *s, LIBSSH2_KNOWNHOSTS *kh, const char *key, size_t klen,
                             rx_kh_marks *marks)
{
    char name[300];
    rexec_error e;
    const char *extra = s->opts.host->known_hosts_extra;
    knownhost_name(s->opts.host, name, sizeof(name));
    if ((access(s->opts.known_hosts, F_OK) == 0 &&
         rx_knownhosts_load(kh, s->opts.known_hosts, name, (const unsigned char *)key, klen,
                            marks, &e) != 0) ||
        (extra && rx_knownhosts_load(kh, extra, name, (const unsigned char *)key, klen, marks,
                                     &e) != 0)) {
        session_fail(s, REXEC_EHOSTKEY, "%s", e.msg);
        return -1;
    }
    if (marks->skipped)
        rx_log(s->opts.log, REXEC_LOG_DEBUG, "%s: %u line(s) of %s not understood by libssh2, ignored",
               s->opts.host->name, marks->skipped, s->opts.known_hosts);
    return 0;
}

static int hostkey_check_file(rx_session *s, const char *key, size_t klen, int type)
{
    const rx_host *h = s->opts.host;
    struct libssh2_knownhost *found = NULL;
    char fp[80];
    int bits = knownhost_keybits(type), rc;
    rx_kh_marks marks = {0};
    LIBSSH2_KNOWNHOSTS *kh = libssh2_knownhost_init(s->ssh);
    if (kh == NULL)
        return session_fail(s, REXEC_ENOMEM, "out of memory"), ST_FAILED;
    fingerprint(s, fp, sizeof(fp));
    /* A missing file is an empty one: strict then refuses, accept-new creates it. */
    if (hostkey_read_file(s, kh, key, klen, &marks) != 0) {
        libssh2_knownhost_free(kh);
        return ST_FAILED;
    }
    if (marks.revoked_line) {
        libssh2_knownhost_free(kh);
        session_fail(s, REXEC_EHOSTKEY,
                     "REVOKED HOST KEY: %s of %s port %d is marked @revoked in %s line %u; "
                     "refusing to connect",
                     fp, h->address, h->port, marks.revoked_path, marks.revoked_line);
        return ST_FAILED;
    }
    rc = libssh2_knownhost_checkp(kh, h->address, h->port, key, klen,
                                  LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | bits,
                                  &found);
    if (rc == LIBSSH2_KNOWNHOST_CHECK_NOTFOUND && marks.ca_line) {
        libssh2_knownhost_free(kh);
        session_fail(s, REXEC_EHOSTKEY,
                     "host key %s of %s port %d: the only match in %s is the @cert-authority "
                     "line %u, and host certificates are not supported by rexec; pin the host's "
                     "own key instead",
                     fp, h->address, h->port, marks.ca_path, marks.ca_line);
        return ST_FAILED;
    }
    if (rc == LIBSSH2_KNOWNHOST_CHECK_NOTFOUND && h->hostkey == RX_HK_ACCEPT_NEW) {
        const char *why = NULL;
        int r = knownhost_append(s, kh, key, klen, bits, fp, &why);
        libssh2_knownhost_free(kh);
        if (r != 0) {
            session_fail(s, REXEC_EHOSTKEY, "cannot record the new host key %s in %s: %s", fp,
                         s->opts.known_hosts, why);
            return ST_FAILED;
        }
        return ST_AGAIN; /* hk_append_done goes on to AUTH */
    }
    libssh2_knownhost_free(kh);
    if (rc == LIBSSH2_KNOWNHOST_CHECK_MATCH)
        return ST_NEXT;
    if (rc == LIBSSH2_KNOWNHOST_CHECK_MISMATCH)
        session_fail(s, REXEC_EHOSTKEY,
                     "HOST KEY MISMATCH for %s port %d: the server offered %s, which is not the "
                     "key pinned in %s; refusing to connect (possible man-in-the-middle)",
                     h->address, h->port, fp, s->opts.known_hosts);
    else
        session_fail(s, REXEC_EHOSTKEY,
                     "host key %s of %s port %d is not in %s%s%s (host_key is \"strict\"; add it, "
                     "or use \"accept-new\" to trust on first use)",
                     fp, h->address, h->port, s->opts.known_hosts,
                     h->known_hosts_extra ? " nor in " : "",
                     h->known_hosts_extra ? h->known_hosts_extra : "");
    return ST_FAILED;
}

/* Fails closed before any authentication: nothing of ours is sent to an unverified server. */
static int st_hostkey(rx_session *s)
{
    size_t klen = 0;
    int type = 0, r;
    if (s->hk_pending)
        return ST_AGAIN; /* the new key is being recorded (hk_append_done) */
    const char *key = libssh2_session_hostkey(s->ssh, &klen, &type);
    char fp[80];
    if (key == NULL) {
        session_fail(s, REXEC_EHOSTKEY, "the server sent no host key");
        return ST_FAILED;
    }
    if (s->opts.host->hostkey == RX_HK_PINNED) {
        fingerprint(s, fp, sizeof(fp));
        if (strcmp(fp, s->opts.host->fingerprint) != 0) {
            session_fail(s, REXEC_EHOSTKEY,
                         "HOST KEY MISMATCH for %s port %d: the server offered %s, the pinned "
                         "fingerprint is %s; refusing to connect",
                         s->opts.host->address, s->opts.host->port, fp, s->opts.host->fingerprint);
            return ST_FAILED;
        }
        r = ST_NEXT;
    } else {
        r = hostkey_check_file(s, key, klen, type);
    }
    if (r == ST_NEXT)
        session_set_state(s, RX_SS_AUTH);
    return r;
}

static int st_auth(rx_session *s)
{
    rexec_error e;
    if (s->auth == NULL && (s->auth = rx_auth_new()) == NULL)
        return session_fail(s, REXEC_ENOMEM, "out of memory"), ST_FAILED;
    int rc = rx_auth_step(s->auth, s->ssh, s->opts.host, s->opts.connect_timeout_s, &e);
    if (rc == RX_AUTH_AGAIN)
        return ST_AGAIN;
    rx_auth_free(s->auth); /* the agent's socket and the passphrase go now */
    s->auth = NULL;
    if (rc != RX_AUTH_DONE) {
        session_fail(s, e.code, "%s", e.msg);
        return ST_FAILED;
    }
    uv_timer_stop(&s->timer);
    session_set_state(s, RX_SS_READY);
    s->unanswered = 0;
    if (s->opts.keepalive_s > 0) {
        uint64_t ms = (uint64_t)(s->opts.keepalive_s * 1000);
        /* interval 1: libssh2 then sends one on every tick of our timer (it rate-limits by
         * whole seconds, and a sub-second keepalive_s would otherwise disable it) */
        libssh2_keepalive_config(s->ssh, 1, 1);
        uv_timer_start(&s->timer, on_keepalive, ms, ms);
    }
    if (s->ev.on_ready)
        s->ev.on_ready(s->ev.ud, s);
    return s->closing ? ST_FAILED : ST_NEXT;
}

/* ---- READY: run the channels ---------------------------------------------------------------- */

/* An idle connection's round trip: a channel open of a type no server knows. The refusal proves
 * the peer alive, and reading it lets libssh2 answer whatever the server sent meanwhile
 * (keepalive@openssh.com requests), which nothing else would read on an idle connection. */
static int st_ping(rx_session *s)
{
    static const char type[] = "ping@rexec";
    LIBSSH2_CHANNEL *ch = libssh2_channel_open_ex(s->ssh, type, sizeof(type) - 1, 0, 0, NULL, 0);
    int e = ch ? 0 : libssh2_session_last_errno(s->ssh);
    if (e == LIBSSH2_ERROR_EAGAIN)
        return ST_AGAIN;
    s->pinging = 0;
    if (ch)
        libssh2_channel_free(ch);
    else if (e != LIBSSH2_ERROR_CHANNEL_FAILURE) {
        session_fail(s, REXEC_ECONNLOST, "the connection is gone (keepalive failed)");
        return ST_FAILED;
    }
    return ST_NEXT;
}

static void session_resume_later(rx_session *s);

/* Steps every exec until none makes progress, for at most RX_DRIVE_PASSES passes. Reading one
 * channel can pull another's packets (or its EOF) into libssh2's queue while the socket goes
 * quiet, so work is left only when no exec has anything pending in that queue either; a drive
 * that runs out of passes first comes back after the loop's other handles (the socket may stay
 * quiet while libssh2 holds the rest). Finished execs are collected in *done. */
static int st_ready(rx_session *s, rx_chan_user **done)
{
    int progress, passes = 0;
    if (s->pinging) {
        int r = st_ping(s);
        if (r != ST_NEXT)
            return r;
    }
    do {
        progress = 0;
        rx_chan_user **pp = &s->users;
        while (*pp && !s->closing) {
            rx_chan_user *u = *pp;
            int r = u->ops->step(u);
            if (r == RX_STEP_DONE) {
                *pp = u->next;
                u->next = *done;
                *done = u;
                progress = 1;
                continue;
            }
            if (r == RX_STEP_PROGRESS || u->ops->pending(u))
                progress = 1;
            pp = &u->next;
        }
        /* A later user's read may have pulled an earlier one's packets (or EOF) into libssh2's
         * queue without making progress itself: every user is asked once more, after the pass,
         * or that data would wait (the socket drained) for the next keepalive or timer. */
        for (rx_chan_user *u = s->users; u && !progress && !s->closing; u = u->next)
            progress = u->ops->pending(u);
    } while (progress && !s->closing && ++passes < RX_DRIVE_PASSES);
    if (progress && !s->closing)
        session_resume_later(s);
    return ST_AGAIN;
}

/* ---- the drive loop and the poll ------------------------------------------------------------ */

static void session_update_poll(rx_session *s)
{
    int dir = libssh2_session_block_directions(s->ssh), ev = 0;
    if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
        ev |= UV_READABLE;
    if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
        ev |= UV_WRITABLE;
    /* An idle connection still listens, so that a server closing it is noticed. While every
     * exec is paused the socket is left unread on purpose (the server's window and then TCP
     * hold the output back); listening would wake the loop for ever for bytes nobody reads. */
    if (session_all_paused(s))
        ev &= ~UV_READABLE;
    else if (ev == 0)
        ev = UV_READABLE;
    if (ev == s->poll_events)
        return;
    s->poll_events = ev;
    int r = ev ? uv_poll_start(s->poll, ev, on_poll) : uv_poll_stop(s->poll);
    if (r != 0)
        session_fail(s, REXEC_EINTERNAL, "cannot watch the socket: %s", uv_strerror(r));
}

static void finish_done(rx_chan_user *done)
{
    while (done) {
        rx_chan_user *next = done->next;
        done->next = NULL;
        done->ops->finish(done);
        done = next;
    }
}

int rx_ssh_conn_gone(int code)
{
    return code == LIBSSH2_ERROR_SOCKET_SEND || code == LIBSSH2_ERROR_SOCKET_RECV ||
           code == LIBSSH2_ERROR_SOCKET_DISCONNECT || code == LIBSSH2_ERROR_SOCKET_TIMEOUT;
}

static void session_drive(rx_session *s)
{
    rx_chan_user *done = NULL;
    if (s->driving) {
        s->again = 1;
        return;
    }
    s->driving = 1;
    do {
        int r = ST_NEXT;
        s->again = 0;
        while (r == ST_NEXT && !s->closing) {
            switch (s->state) {
            case RX_SS_HANDSHAKE: r = st_handshake(s); break;
            case RX_SS_HOSTKEY: r = st_hostkey(s); break;
            case RX_SS_AUTH: r = st_auth(s); break;
            case RX_SS_READY: r = st_ready(s, &done); break;
            default: r = ST_AGAIN; break;
            }
        }
    } while (s->again && !s->closing);
    /* A call that ended on a dead socket (the server went away while the connection was idle,
     * and the call was dispatched before the close was seen) takes the connection with it, before
     * the calls report: otherwise the pool retried it on this same connection, and every later
     * call failed too (libuv had stopped the poll on the socket's error, so nothing else would
     * ever fail it). */
    if (!s->closing && done != NULL && s->state == RX_SS_READY && rx_ssh_conn_gone(libssh2_session_last_errno(s->ssh)))
        session_fail(s, REXEC_ECONNLOST, "the connection to the server is gone");
    /* A call that gave up on an answer (set-up deadline, backstop) leaves libssh2 mid-request:
     * the connection is hung and goes, so that the calls after it get a fresh one. */
    for (rx_chan_user *u = done; u && !s->closing; u = u->next)
        if (u->ops->hung && u->ops->hung(u))
            session_fail(s, REXEC_ECONNLOST, "the server stopped answering on this connection");
    if (!s->closing && s->state >= RX_SS_HANDSHAKE)
        session_update_poll(s);
    s->driving = 0;
    /* Callbacks last: they may start calls on this session or close it. */
    int has_done = done != NULL;
    finish_done(done);
    if (has_done && !s->closing && s->ev.on_exec_slot)
        s->ev.on_exec_slot(s->ev.ud, s);
}

/* An idle connection that turns readable has either data (read by a ping) or an EOF: the
 * server went away, and the connection is dropped now rather than failing the next call. */
static int idle_peer_gone(rx_session *s)
{
    char c;
    ssize_t n = recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    rx_session *s = p->data;
    (void)events;
    if (s->closing)
        return;
    if (s->state == RX_SS_CONNECT) {
        st_connected(s);
        return;
    }
    if (status < 0 && status != UV_EBADF) {
        session_fail(s, REXEC_ECONNLOST, "connection error: %s", uv_strerror(status));
        return;
    }
    if (s->state == RX_SS_READY && s->users == NULL && !s->pinging) {
        if (idle_peer_gone(s))
            session_fail(s, REXEC_ECONNLOST, "the server closed the connection");
        else
            s->pinging = 1; /* let libssh2 read (and answer) what arrived */
    }
    session_drive(s);
}

/* ---- public --------------------------------------------------------------------------------- */

/* libssh2's own recv; any byte read answers the keepalive probes (on_keepalive). */
static ssize_t session_recv(libssh2_socket_t fd, void *buf, size_t len, int flags, void **abstract)
{
    rx_session *s = *abstract;
    if (fd != s->fd) /* the agent's socket: libssh2 reads it through us (auth.h) */
        return rx_auth_agent_io(s->auth, 0, fd, buf, len, flags);
    ssize_t n = recv(fd, buf, len, flags);
    if (n > 0)
        s->unanswered = 0;
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    return n;
}

/* libssh2's own send, except for the agent's socket (as session_recv). */
static ssize_t session_send(libssh2_socket_t fd, const void *buf, size_t len, int flags,
                            void **abstract)
{
    rx_session *s = *abstract;
    if (fd != s->fd)
        return rx_auth_agent_io(s->auth, 1, fd, (void *)buf, len, flags);
    ssize_t n = send(fd, buf, len, flags);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    return n;
}

/* Cipher and MAC order, fastest first as measured with tests/bench/ssh_ceiling.c (AES-NI and
 * SHA-NI machines; docs/PERFORMANCE.md); the tail keeps older servers. chacha20-poly1305, aes-gcm
 * and the -etm MACs exist from libssh2 1.11, whose chacha20-poly1305 takes a packet in one call
 * (about twice the speed of its aes-gcm and aes-ctr, which go 16 bytes at a time): only the names
 * this libssh2 supports are handed to it (1.10 strips unknown names itself with an overlapping
 * memcpy). The client's order decides what is used. */
static const char *const session_ciphers[] = {
    "chacha20-poly1305@openssh.com", "aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
    "aes128-ctr", "aes256-ctr", "aes192-ctr", "aes256-cbc", "aes192-cbc", "aes128-cbc", NULL};
static const char *const session_macs[] = {
    "hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com", "hmac-sha2-256",
    "hmac-sha2-512", "hmac-sha1", NULL};

static void session_method_pref(LIBSSH2_SESSION *ssh, int cs, int sc, const char *const *want)
{
    const char **have = NULL;
    char list[512] = "";
    size_t len = 0;
    int n = libssh2_session_supported_algs(ssh, cs, &have);
    for (int i = 0; want[i] && n > 0; i++)
        for (int j = 0; j < n; j++)
            if (strcmp(want[i], have[j]) == 0 && len + strlen(want[i]) + 2 < sizeof(list))
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", len ? "," : "",
                                        want[i]);
    if (have)
        libssh2_free(ssh, (void *)have);
    if (len == 0) /* none known: libssh2's own order stays */
        return;
    libssh2_session_method_pref(ssh, cs, list);
    libssh2_session_method_pref(ssh, sc, list);
}

static void session_method_prefs(LIBSSH2_SESSION *ssh)
{
    session_method_pref(ssh, LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_CRYPT_SC, session_ciphers);
    session_method_pref(ssh, LIBSSH2_METHOD_MAC_CS, LIBSSH2_METHOD_MAC_SC, session_macs);
}

void rx_tunnel_link_unref(rx_tunnel_link *l)
{
    if (l && --l->refs == 0)
        free(l);
}

/* A socket connected already (proxy_jump): straight to HANDSHAKE, from the loop (the poll). */
static int session_start_tunnel(rx_session *s)
{
    s->fd = s->opts.tunnel_fd;
    s->poll = malloc(sizeof(*s->poll));
    if (s->poll == NULL || uv_poll_init_socket(s->loop, s->poll, s->fd) != 0) {
        free(s->poll);
        s->poll = NULL;
        return REXEC_EINTERNAL;
    }
    s->poll->data = s;
    s->open_handles++;
    s->poll_events = UV_WRITABLE;
    uv_poll_start(s->poll, UV_WRITABLE, on_poll);
    session_set_state(s, RX_SS_HANDSHAKE);
    return 0;
}

/* libssh2 reads and writes the socket through these, so that the loop sees every byte. 1.11.1
 * deprecated the void-pointer setter (a function pointer in a void * is not portable C). */
static void session_set_io(LIBSSH2_SESSION *ssh)
{
#if LIBSSH2_VERSION_NUM >= 0x010b01
    libssh2_session_callback_set2(ssh, LIBSSH2_CALLBACK_RECV, (libssh2_cb_generic *)session_recv);
    libssh2_session_callback_set2(ssh, LIBSSH2_CALLBACK_SEND, (libssh2_cb_generic *)session_send);
#else
    union {
        LIBSSH2_RECV_FUNC((*f));
        void *p;
    } recv_cb = {.f = session_recv};
    libssh2_session_callback_set(ssh, LIBSSH2_CALLBACK_RECV, recv_cb.p);
    union {
        LIBSSH2_SEND_FUNC((*f));
        void *p;
    } send_cb = {.f = session_send};
    libssh2_session_callback_set(ssh, LIBSSH2_CALLBACK_SEND, send_cb.p);
#endif
}

static int session_start(rx_session *s)
{
    if (s->opts.host->jump != NULL && s->opts.tunnel == NULL)
        return REXEC_EHOST; /* proxy_jump: reached through jump.c, never directly */
    char port[16];
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    snprintf(port, sizeof(port), "%d", s->opts.host->port);
    s->ssh = libssh2_session_init_ex(NULL, NULL, NULL, s);
    if (s->ssh == NULL)
        return REXEC_ENOMEM;
    libssh2_session_set_blocking(s->ssh, 0);
    session_method_prefs(s->ssh);
    session_set_io(s->ssh);
    s->gai.data = s;
    if (s->opts.tunnel) {
        int r = session_start_tunnel(s);
        if (r != 0)
            return r;
    } else if (uv_getaddrinfo(s->loop, &s->gai, on_resolved, s->opts.host->address, port,
                              &hints) != 0) {
        return REXEC_EHOST;
    } else {
        s->gai_pending = 1;
    }
    uint64_t ms = (uint64_t)(s->opts.connect_timeout_s * 1000);
    uv_timer_start(&s->timer, on_connect_timeout, ms ? ms : 1, 0);
    return 0;
}

static void on_first_tick(uv_timer_t *t)
{
    rx_session *s = t->data;
    session_fail(s, s->err.code, "%s", s->err.msg);
}

/* libssh2_init is int (int): uv_once takes void (void), and a cast call is undefined. */
static void ssh_global_init(void)
{
    if (libssh2_init(0) != 0)
        fprintf(stderr, "rexec: libssh2_init failed: connections will fail\n");
}

rx_session *rx_session_new(uv_loop_t *loop, const rx_session_opts *opts,
                           const rx_session_events *ev)
{
    static uv_once_t once = UV_ONCE_INIT;
    uv_once(&once, ssh_global_init);
    rx_session *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->loop = loop;
    s->opts = *opts;
    s->ev = *ev;
    s->fd = -1;
    s->state = RX_SS_RESOLVE;
    uv_timer_init(loop, &s->timer);
    uv_timer_init(loop, &s->kick);
    uv_idle_init(loop, &s->resume);
    s->timer.data = s->kick.data = s->resume.data = s;
    s->open_handles = 3;
    int r = session_start(s);
    if (r != 0) {
        /* Report from the loop, never from here: the owner is not ready for callbacks yet. */
        rx_fail(&s->err, r, "cannot start connecting: %s", rexec_strerror(r));
        uv_timer_start(&s->timer, on_first_tick, 0, 0);
    }
    return s;
}

rx_session_state rx_session_get_state(const rx_session *s) { return s->state; }
rx_session_state rx_session_failed_in(const rx_session *s) { return s->failed_in; }
const rx_host *rx_session_host(const rx_session *s) { return s->opts.host; }
LIBSSH2_SESSION *rx_session_ssh(rx_session *s) { return s->ssh; }
uv_loop_t *rx_session_loop(rx_session *s) { return s->loop; }
const rx_logger *rx_session_logger(const rx_session *s) { return s->opts.log; }
int rx_session_full(const rx_session *s) { return s->full; }
void rx_session_mark_full(rx_session *s) { s->full = 1; }

int rx_session_channels(const rx_session *s)
{
    int n = 0;
    for (const rx_chan_user *u = s->users; u; u = u->next)
        n += u->ops->holds_channel(u);
    return n;
}

rx_chan_user *rx_session_users(rx_session *s)
{
    return s->users;
}

void rx_session_attach(rx_session *s, rx_chan_user *u)
{
    rx_chan_user **pp = &s->users;
    while (*pp)
        pp = &(*pp)->next;
    u->next = NULL;
    *pp = u;
    rx_session_kick(s);
}

/* An idle handle, not a zero timer: libuv runs a timer started from a timer callback in the
 * same pass (1.44), so a kick chain would never let the poll run; an active idle handle makes
 * the poll not block, and runs once per loop iteration, after the I/O callbacks. */
static void on_resume(uv_idle_t *h)
{
    rx_session *s = h->data;
    uv_idle_stop(h);
    if (!s->closing && s->state == RX_SS_READY)
        session_drive(s);
}

static void session_resume_later(rx_session *s)
{
    if (!uv_is_active((uv_handle_t *)&s->resume))
        uv_idle_start(&s->resume, on_resume);
}

static void on_kick(uv_timer_t *t)
{
    rx_session *s = t->data;
    if (!s->closing && s->state == RX_SS_READY)
        session_drive(s);
}

void rx_session_kick(rx_session *s)
{
    if (!s->closing && s->state == RX_SS_READY)
        uv_timer_start(&s->kick, on_kick, 0, 0);
}
