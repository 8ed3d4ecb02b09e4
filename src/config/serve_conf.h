/* The workspace's "serve" section: which Unix users and groups besides serve's own may connect
 * to `rexec serve`, the verbs each is granted, and the socket's mode and group (docs/gate.md,
 * "Two users"; docs/workspace.md, "serve").
 *
 * Names are kept as written: they are looked up when serve starts or reloads (an unknown one
 * stops that), so a workspace naming a user this machine lacks still loads for every other
 * command. "approve" is never a verb: approvals happen only at the operator's terminal. */
#ifndef RX_SERVE_CONF_H
#define RX_SERVE_CONF_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "rexec.h"

/* Verbs, as bits. ping is every admitted client's; the user running serve has them all. */
enum {
    RX_VERB_RUN = 1u << 0,
    RX_VERB_EVAL = 1u << 1,
    RX_VERB_CHECK = 1u << 2,
    RX_VERB_CANCEL = 1u << 3,
    RX_VERB_LIST = 1u << 4,   /* hosts, actions, groups */
    RX_VERB_RELOAD = 1u << 5,
    RX_VERB_PING = 1u << 6,
    RX_VERB_METRICS = 1u << 7,
    RX_VERB_ALL = (1u << 8) - 1
};

/* serve's socket mode when the section lists clients and gives no socket_mode: 0660 with a
 * socket_group, else 0666 (serve checks every peer's uid itself); 0600 without clients. */
#define RX_SERVE_SOCKET_MODE_OWNER 0600u

typedef struct rx_serve_client {
    char *user;     /* a user name, or NULL */
    char *group;    /* a group name (members and primary group), or NULL; exactly one is set */
    unsigned verbs; /* RX_VERB_* */
} rx_serve_client;

typedef struct rx_serve_conf {
    rx_serve_client *clients;
    size_t n_clients;
    unsigned socket_mode; /* 0: not given */
    char *socket_group;   /* NULL: serve's own group */
} rx_serve_conf;

/* Reads root's optional "serve" object into *out (zeroed when absent). REXEC_ECONFIG naming the
 * JSON path ("serve.clients[1].verbs[0]: ..."), or REXEC_ENOMEM. */
int rx_serve_conf_load(const cJSON *root, rx_serve_conf *out, rexec_error *err);
void rx_serve_conf_free(rx_serve_conf *c);

/* The verb an op needs ("run" -> RX_VERB_RUN, "hosts" -> RX_VERB_LIST, ...); 0 for an unknown op. */
unsigned rx_serve_op_verb(const char *op);

/* "run, eval, cancel" into out (cap bytes); "nothing" for 0. */
const char *rx_serve_verbs_str(unsigned verbs, char *out, size_t cap);

/* The socket mode serve applies (see RX_SERVE_SOCKET_MODE_OWNER). */
unsigned rx_serve_socket_mode(const rx_serve_conf *c);

#endif
