/* proxy_jump: a host reached through a direct-tcpip channel of a connection to its bastion.
 *
 * libssh2 needs a socket, so the target's session gets one end of a socketpair; the other end is
 * pumped by the loop to and from the bastion's channel (two bounded buffers: a full one stops
 * reading its source, which is the back-pressure). The tunnel is a channel user of the bastion's
 * session (session.h), so it counts against that connection's channel budget and the pool shares
 * the bastion connection among every host behind it. Both sessions verify their own host key. */
#ifndef RX_JUMP_H
#define RX_JUMP_H

#include <uv.h>

#include "err.h"
#include "session.h"
#include "workspace.h"

typedef struct rx_jump rx_jump;

/* A tunnel to target (through target->jump), not attached yet. *session_fd: the socket for the
 * target's session (it owns it from then on); *link: a new reference for the target's session.
 * Returns NULL on failure (err set). */
rx_jump *rx_jump_new(uv_loop_t *loop, const rx_host *target, int *session_fd, rx_tunnel_link **link,
                     rexec_error *err);

/* Opens the channel on bastion (READY) and pumps until either side closes. */
void rx_jump_attach(rx_jump *j, rx_session *bastion);

/* The bastion could not be reached: the tunnel ends (the target's session fails, saying why)
 * and j is freed. */
void rx_jump_abandon(rx_jump *j, const rexec_error *why);

#endif
