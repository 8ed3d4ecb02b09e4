/* Private to src/ssh/: the only header that includes libssh2.h. Modules above the ssh layer
 * see connections and calls through session.h, exec.h and pool.h, never libssh2 types. */
#ifndef RX_SSH_INT_H
#define RX_SSH_INT_H

#include <stddef.h>

#include <libssh2.h>

#include "session.h"

/* 1 when a libssh2 error code says the connection itself is gone (as opposed to a refusal by
 * the server): the call that met it may go to a fresh connection if nothing was sent. */
int rx_ssh_conn_gone(int code);

/* The session's libssh2 handle. */
LIBSSH2_SESSION *rx_session_ssh(rx_session *s);

/* libssh2's last error on s: its message into buf ("unknown libssh2 error" when it has none)
 * and its code as the return value. The one place that reads libssh2_session_last_error. */
int rx_session_last_error(rx_session *s, char *buf, size_t n);

/* A channel open was refused for lack of room (sshd MaxSessions). */
void rx_session_mark_full(rx_session *s);

#endif
