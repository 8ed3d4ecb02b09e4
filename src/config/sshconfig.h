/* ssh_config aliases, resolved by OpenSSH itself: `ssh -G ALIAS` prints the configuration ssh
 * would use for ALIAS (every Host/Match block, Include and default applied), one "key value" a
 * line. rexec reads only that output, never ssh_config files, so what rexec connects to is what
 * `ssh ALIAS` would. The config file is ssh's own default unless $REXEC_SSH_CONFIG names one
 * (passed as `ssh -F`). */
#ifndef RX_SSHCONFIG_H
#define RX_SSHCONFIG_H

#include "buf.h"
#include "rexec.h"

#define RX_SSH_G_TIMEOUT_S 5.0
#define RX_SSH_G_MAX_FILES 8

typedef struct rx_ssh_g {
    char *hostname, *user, *proxyjump; /* proxyjump NULL when "none" */
    int port;
    char *identityfile[RX_SSH_G_MAX_FILES]; /* ~ expanded */
    int n_identityfile;
    char *knownhosts[RX_SSH_G_MAX_FILES]; /* UserKnownHostsFile, ~ expanded */
    int n_knownhosts;
    int identities_only;                  /* IdentitiesOnly yes */
    int agent_none;                       /* IdentityAgent none: ssh asks no agent */
} rx_ssh_g;

/* Runs `ssh -G ALIAS` (deadline RX_SSH_G_TIMEOUT_S, output capped) and parses it. ALIAS must be
 * 1-255 of [A-Za-z0-9._@%+-], not starting with '-'. Returns 0, or REXEC_ECONFIG saying what went
 * wrong (ssh missing, its exit status and first stderr line, the deadline). */
int rx_ssh_g_run(const char *alias, rx_ssh_g *out, rexec_error *err);
void rx_ssh_g_free(rx_ssh_g *g);

/* `rexec hosts import-ssh-config [PATTERN]`: the concrete Host names of the ssh config file
 * ($REXEC_SSH_CONFIG, else ~/.ssh/config) matching the glob PATTERN (NULL: all), each resolved
 * with ssh -G, as inventory entries (JSON members) to paste under "hosts". An entry says
 * "auth": "agent" where ssh would log in with the agent's keys: SSH_AUTH_SOCK is set, IdentityAgent
 * is not none, and either no IdentityFile it lists exists or IdentitiesOnly is no (ssh then offers
 * the agent's keys first). Lines on *out; names
 * that cannot be inventory names are listed as skipped in *notes. */
int rx_ssh_config_import(const char *pattern, rx_buf *out, rx_buf *notes, rexec_error *err);

#endif
