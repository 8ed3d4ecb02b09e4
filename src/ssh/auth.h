/* The AUTH state of a session: a key file (with its passphrase from a workspace secret), or an
 * ssh-agent through libssh2's agent API. Each call is one non-blocking step over libssh2.
 *
 * libssh2 1.10 talks to the agent with blocking reads and writes through the session's own
 * send/recv callbacks (and loses partial progress on EAGAIN, so it cannot be made
 * non-blocking). The session routes those callbacks for the agent's socket to rx_auth_agent_io,
 * which waits with poll() up to a deadline: a stuck agent holds the loop for at most
 * RX_AGENT_TIMEOUT_S per step, then fails the connection with a message saying so. */
#ifndef RX_AUTH_H
#define RX_AUTH_H

#include "ssh_int.h"
#include <sys/types.h>

#include "rexec.h"
#include "workspace.h"

#define RX_AGENT_TIMEOUT_S 5.0

typedef struct rx_auth rx_auth;

rx_auth *rx_auth_new(void); /* NULL on ENOMEM */
/* Disconnects the agent, wipes the passphrase. NULL is fine. */
void rx_auth_free(rx_auth *a);

enum { RX_AUTH_AGAIN = 0, RX_AUTH_DONE = 1, RX_AUTH_FAILED = -1 };

/* One step of authenticating as h->user. RX_AUTH_AGAIN: call again when the socket is ready.
 * RX_AUTH_FAILED: err says why (code REXEC_EAUTH, or REXEC_ECONFIG for an unreadable secret);
 * the message never holds the passphrase. */
int rx_auth_step(rx_auth *a, LIBSSH2_SESSION *ssh, const rx_host *h, double timeout_s,
                 rexec_error *err);

/* The session's send/recv on a descriptor that is not its own socket (the agent's): blocking
 * with a deadline. Returns bytes or -errno (-ETIMEDOUT past the deadline). */
ssize_t rx_auth_agent_io(rx_auth *a, int sending, int fd, void *buf, size_t len, int flags);

#endif
