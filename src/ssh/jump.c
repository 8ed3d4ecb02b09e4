/* The proxy_jump tunnel (see jump.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jump.h"
#include "ssh_int.h"

#define JUMP_BUF (32 * 1024) /* per direction: the most a tunnel holds */

enum { J_OPEN = 0, J_PUMP, J_CLOSE, J_DONE };

struct rx_jump {
    rx_chan_user u; /* first: the session hands us back as this */
    rx_session *bs; /* the bastion's session, once attached */
    const rx_host *target;
    LIBSSH2_CHANNEL *ch;
    int fd; /* our end of the socketpair */
    uv_poll_t poll;
    int poll_events, poll_open;
    int state;
    int fd_eof, ch_eof;
    int read_blocked; /* the last channel read said EAGAIN (it may, with data queued) */
    unsigned char up[JUMP_BUF], down[JUMP_BUF]; /* up: target -> bastion; down: the reverse */
    size_t up_len, up_off, down_len, down_off;
    rx_tunnel_link *link;
};

static void jump_set_error(rx_jump *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void jump_set_error(rx_jump *j, int code, const char *fmt, ...)
{
    char msg[sizeof(j->link->err.msg)];
    va_list ap;
    if (j->link->failed)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    j->link->failed = 1;
    rx_fail(&j->link->err, code, "%s", msg);
}

/* The descriptor goes only here, once libuv no longer watches it: closed while the poll was
 * still registered, the number could be reused by another socket before the poll stopped, and
 * epoll would then be told to forget (or would report) a descriptor that is not ours. */
static void on_poll_closed(uv_handle_t *h)
{
    rx_jump *j = h->data;
    if (j->fd >= 0)
        close(j->fd);
    rx_tunnel_link_unref(j->link);
    free(j);
}

/* Closes our end (the target's session then reads EOF and fails with the link's reason): the
 * poll handle first, the descriptor in its close callback. */
static void jump_free(rx_jump *j)
{
    if (j->poll_open) {
        j->poll_open = 0;
        uv_poll_stop(&j->poll);
        uv_close((uv_handle_t *)&j->poll, on_poll_closed);
        return;
    }
    on_poll_closed((uv_handle_t *)&j->poll);
}

static void on_fd(uv_poll_t *p, int status, int events)
{
    rx_jump *j = p->data;
    (void)status, (void)events;
    if (j->bs)
        rx_session_kick(j->bs);
}

rx_jump *rx_jump_new(uv_loop_t *loop, const rx_host *target, int *session_fd, rx_tunnel_link **link,
                     rexec_error *err)
{
    int sv[2];
    rx_jump *j = calloc(1, sizeof(*j));
    rx_tunnel_link *l = calloc(1, sizeof(*l));
    if (j == NULL || l == NULL) {
        free(j), free(l);
        return rx_fail(err, REXEC_ENOMEM, "out of memory"), NULL;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        rx_fail(err, REXEC_EINTERNAL, "socketpair: %s", strerror(errno));
        free(j), free(l);
        return NULL;
    }
    j->target = target;
    j->fd = sv[1];
    j->link = l;
    l->refs = 2; /* the tunnel's and the session's */
    j->poll.data = j;
    if (uv_poll_init_socket(loop, &j->poll, j->fd) != 0) {
        close(sv[0]), close(sv[1]);
        free(j), free(l);
        return rx_fail(err, REXEC_EINTERNAL, "cannot watch the tunnel's socket"), NULL;
    }
    j->poll_open = 1;
    *session_fd = sv[0];
    *link = l;
    return j;
}

void rx_jump_abandon(rx_jump *j, const rexec_error *why)
{
    jump_set_error(j, why->code, "through proxy_jump %s: %s", j->target->jump->name, why->msg);
    jump_free(j);
}

/* ---- the channel user ----------------------------------------------------------------------- */

static int jump_open(rx_jump *j)
{
    LIBSSH2_SESSION *ssh = rx_session_ssh(j->bs);
    char m[256];
    j->ch = libssh2_channel_direct_tcpip_ex(ssh, j->target->address, j->target->port, "127.0.0.1", 0);
    if (j->ch) {
        j->state = J_PUMP;
        return RX_STEP_PROGRESS;
    }
    int code = rx_session_last_error(j->bs, m, sizeof(m));
    if (code == LIBSSH2_ERROR_EAGAIN)
        return RX_STEP_AGAIN;
    jump_set_error(j, REXEC_EHOST, "the bastion %s could not open a direct-tcpip channel to %s "
                   "port %d (proxy_jump): %s", j->target->jump->name, j->target->address,
                   j->target->port, m);
    j->state = J_DONE;
    return RX_STEP_DONE;
}

/* bastion -> target. Returns 1 on progress, 0 when blocked, -1 when the channel is gone. */
static int pump_down(rx_jump *j)
{
    int progress = 0;
    for (;;) {
        if (j->down_off < j->down_len) {
            ssize_t w = send(j->fd, j->down + j->down_off, j->down_len - j->down_off,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK ? progress : -1;
            j->down_off += (size_t)w;
            progress = 1;
            continue;
        }
        if (j->ch_eof)
            return progress;
        ssize_t n = libssh2_channel_read(j->ch, (char *)j->down, sizeof(j->down));
        /* libssh2 1.10 answers EAGAIN with data queued when its window adjust could not be
         * sent yet: "pending" must then wait for the socket, or the drive loop spins. */
        j->read_blocked = n == LIBSSH2_ERROR_EAGAIN;
        if (n > 0) {
            j->down_len = (size_t)n, j->down_off = 0;
            progress = 1;
            continue;
        }
        if ((n == 0 || n == LIBSSH2_ERROR_EAGAIN) && libssh2_channel_eof(j->ch)) {
            j->ch_eof = 1;
            shutdown(j->fd, SHUT_WR);
            return 1;
        }
        return n == LIBSSH2_ERROR_EAGAIN || n == 0 ? progress : -1;
    }
}

/* target -> bastion. Same returns. */
static int pump_up(rx_jump *j)
{
    int progress = 0;
    for (;;) {
        if (j->up_off < j->up_len) {
            ssize_t w = libssh2_channel_write(j->ch, (const char *)j->up + j->up_off,
                                              j->up_len - j->up_off);
            if (w == LIBSSH2_ERROR_EAGAIN)
                return progress;
            if (w < 0)
                return -1;
            j->up_off += (size_t)w;
            progress = 1;
            continue;
        }
        if (j->fd_eof)
            return progress;
        ssize_t n = recv(j->fd, j->up, sizeof(j->up), MSG_DONTWAIT);
        if (n > 0) {
            j->up_len = (size_t)n, j->up_off = 0;
            progress = 1;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return progress;
        j->fd_eof = 1; /* the target's session closed its end: the tunnel is done */
        return 1;
    }
}

static void jump_update_poll(rx_jump *j)
{
    int ev = 0;
    if (!j->fd_eof && j->up_off >= j->up_len)
        ev |= UV_READABLE;
    if (j->down_off < j->down_len)
        ev |= UV_WRITABLE;
    if (ev != j->poll_events) {
        j->poll_events = ev;
        if (ev)
            uv_poll_start(&j->poll, ev, on_fd);
        else
            uv_poll_stop(&j->poll);
    }
}

static int jump_close(rx_jump *j)
{
    if (j->ch) {
        int rc = libssh2_channel_close(j->ch);
        if (rc == LIBSSH2_ERROR_EAGAIN)
            return RX_STEP_AGAIN;
        libssh2_channel_free(j->ch);
        j->ch = NULL;
    }
    j->state = J_DONE;
    return RX_STEP_DONE;
}

static int jump_step(rx_chan_user *u)
{
    rx_jump *j = (rx_jump *)u;
    int r = RX_STEP_AGAIN;
    if (j->state == J_OPEN && (r = jump_open(j)) != RX_STEP_PROGRESS)
        return r;
    if (j->state == J_PUMP) {
        int d = pump_down(j), up = d < 0 ? 0 : pump_up(j);
        if (d < 0 || up < 0 || j->fd_eof || (j->ch_eof && j->down_off >= j->down_len)) {
            if (d < 0 || up < 0)
                jump_set_error(j, REXEC_ECONNLOST, "the tunnel through %s broke",
                               j->target->jump->name);
            j->state = J_CLOSE;
        } else {
            jump_update_poll(j);
            return d || up ? RX_STEP_PROGRESS : RX_STEP_AGAIN;
        }
    }
    if (j->state == J_CLOSE) {
        uv_poll_stop(&j->poll);
        j->poll_events = 0;
        return jump_close(j);
    }
    return RX_STEP_DONE;
}

static int jump_pending(rx_chan_user *u)
{
    rx_jump *j = (rx_jump *)u;
    return j->state == J_PUMP && j->down_off >= j->down_len && !j->read_blocked &&
           libssh2_poll_channel_read(j->ch, 0);
}

static int jump_holds_channel(const rx_chan_user *u)
{
    return ((const rx_jump *)u)->state != J_DONE;
}

static void jump_fail(rx_chan_user *u, int code, const char *msg)
{
    rx_jump *j = (rx_jump *)u;
    jump_set_error(j, code, "the connection to the bastion %s ended: %s", j->target->jump->name, msg);
    j->ch = NULL; /* libssh2 frees it with its session */
    j->state = J_DONE;
}

static void jump_finish(rx_chan_user *u)
{
    jump_free((rx_jump *)u);
}

static const rx_chan_ops jump_ops = {.step = jump_step, .pending = jump_pending,
                                     .holds_channel = jump_holds_channel, .fail = jump_fail,
                                     .finish = jump_finish};

void rx_jump_attach(rx_jump *j, rx_session *bastion)
{
    j->u.ops = &jump_ops;
    j->bs = bastion;
    rx_session_attach(bastion, &j->u);
}
