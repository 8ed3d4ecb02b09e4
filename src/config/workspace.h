/* The workspace: rexec.json (inventory, groups, scope, secret sources, catalog, limits), loaded
 * strictly; every error names the JSON path at fault and is REXEC_ECONFIG (exit 78). */
#ifndef RX_WORKSPACE_H
#define RX_WORKSPACE_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "rexec.h"
#include "serve_conf.h"
#include "template.h"

struct rx_scope;

typedef enum rx_risk { RX_L0 = 0, RX_L1, RX_L2, RX_L3 } rx_risk;

/* Weakest to strongest; an action may require a minimum. */
typedef enum rx_containment {
    RX_CONT_NONE = 0,
    RX_CONT_PROCESS_GROUP,
    RX_CONT_CGROUP,
    RX_CONT_PID_NAMESPACE
} rx_containment;

typedef enum rx_ptype {
    RX_P_STRING = 0,
    RX_P_INT,
    RX_P_ENUM,
    RX_P_URL,
    RX_P_HOST,
    RX_P_CIDR,
    RX_P_PATH,
    RX_P_SHELL
} rx_ptype;

typedef struct rx_param_spec {
    char *name;
    rx_ptype type;
    char *pattern; /* POSIX ERE, anchored by the operator; NULL if none */
    regex_t re;
    int has_re;
    size_t max_len;      /* bytes; 0 = the default (4096) */
    long long min, max;  /* int range (inclusive) */
    int has_min, has_max;
    char **enum_values;
    size_t n_enum;
    int in_scope;        /* url/host/cidr: the target must be inside the workspace scope */
    int required;        /* default 1; 0 when the parameter has a default */
    char *default_value; /* used when the caller omits the parameter */
    char *description;
} rx_param_spec;

/* A file action (docs/workspace.md "put and get"): its command is rendered by the loader. */
typedef enum rx_transfer { RX_XFER_NONE = 0, RX_XFER_PUT, RX_XFER_GET } rx_transfer;

typedef struct rx_action {
    char *name;
    char *description;
    rx_risk risk;               /* effective: the declared risk raised to its floors */
    rx_risk declared_risk;
    const char *risk_floor_reason; /* "state_changing", "shell parameter" or NULL */
    int network;
    int state_changing;
    char **secrets; /* names from the workspace's "secrets" */
    size_t n_secrets;
    char *command;  /* template: {name} placeholders */
    rx_param_spec *params;
    size_t n_params;
    double timeout_s;          /* 0 = limits.timeout_s */
    uint64_t max_output_bytes; /* 0 = limits.max_output_bytes */
    int on_cap_kill;           /* "on_cap": "kill": stop the command once output passes the cap */
    int stdin_piped;           /* "stdin": "piped": the command reads its stdin as it arrives */
    rx_containment containment; /* the minimum this action accepts */
    char *cwd;                  /* working directory on the VM; NULL = the login directory */
    rx_transfer transfer;       /* "put" / "get": command is the fixed remote/put.sh call */
    char *xfer_path;            /* the file's path template ("/srv/app/{name}.tar") */
    uint64_t xfer_max_bytes;    /* put: the largest file (instead of limits.max_stdin_bytes) */
    int binary;                 /* get: stdout skips the redactor (no secret handed out) */
    int keep_bytes;             /* get: evidence keeps the bytes, not only their sha256 */
} rx_action;

typedef enum rx_hostkey_policy { RX_HK_STRICT = 0, RX_HK_ACCEPT_NEW, RX_HK_PINNED } rx_hostkey_policy;

#define RX_MAX_JUMPS 4 /* proxy_jump hops to reach a host */

typedef enum rx_auth_method { RX_AUTH_KEY = 0, RX_AUTH_AGENT } rx_auth_method;

struct rx_ws;

typedef struct rx_host {
    char *name;
    char *address;
    int port;
    char *user;               /* default: the user rexec runs as */
    char *key;                /* absolute path: the private key (auth "key"), or the public key
                                 of the agent identity to use (auth "agent"; NULL = any) */
    rx_auth_method auth;
    char *key_passphrase;     /* name of the secret holding the key's passphrase, or NULL */
    int key_perms_ignore;     /* "key_permissions": "ignore": a group/other-readable key is used */
    const struct rx_ws *ws;   /* the workspace the host belongs to (its secrets) */
    char *ssh_alias;          /* resolved with `ssh -G` at load (sshconfig.h), or NULL */
    char *known_hosts_extra;  /* the alias's UserKnownHostsFile, read besides known_hosts */
    char *proxy_jump;         /* the inventory host to jump through, or NULL */
    const struct rx_host *jump; /* proxy_jump resolved (after load) */
    rx_hostkey_policy hostkey;
    char *fingerprint;        /* RX_HK_PINNED: "SHA256:<base64>" */
    rx_risk allow;            /* highest level that runs without approval */
    rx_risk approve;          /* highest level that runs with a grant */
    int max_channels;         /* concurrent channels per connection (below sshd MaxSessions) */
    int max_connections;      /* connections to open to this host when channels run out */
    rx_containment max_containment; /* the strongest containment calls may use here */
    int runner;               /* calls reuse channels through runners (remote/runner.sh) */
} rx_host;

typedef struct rx_group {
    char *name;
    char **hosts;
    size_t n_hosts;
} rx_group;

typedef struct rx_secret_source {
    char *name;
    char *env;  /* environment variable, or NULL */
    char *file; /* absolute path, or NULL */
} rx_secret_source;

/* Channels per connection when neither the host nor limits.max_channels says (below OpenSSH's
 * MaxSessions default of 10, which the check and the pool's learning also respect). */
#define RX_DEFAULT_MAX_CHANNELS 8

typedef struct rx_limits {
    double timeout_s;          /* default 120 */
    double kill_after_s;       /* default 5 */
    uint64_t max_output_bytes; /* per stream, default 1 MiB */
    double connect_timeout_s;  /* default 10 */
    int parallel;              /* fan-out default, 16 */
    int max_channels;          /* default per host, 8 */
    double keepalive_s;        /* default 15 */
    double approval_ttl_s;     /* default 900 */
    uint64_t max_stdin_bytes;  /* default 16 MiB */
    uint64_t max_result_bytes; /* per stream kept in a --json/serve result, default 1 MiB */
    double runner_idle_s;      /* an idle runner closes after this long, default 30 */
} rx_limits;

typedef struct rx_ws {
    char *dir;            /* absolute workspace directory */
    char *known_hosts;    /* dir/known_hosts */
    rx_host *hosts;
    size_t n_hosts;
    rx_group *groups;
    size_t n_groups;
    rx_secret_source *secrets;
    size_t n_secrets;
    rx_action *actions;
    size_t n_actions;
    struct rx_scope *scope;
    rx_limits limits;
    char *audit_key_file; /* HMAC key for the audit chain (outside the workspace), or NULL */
    char *audit_syslog;   /* the socket every audit line is copied to ("/dev/log"), or NULL */
    rx_serve_conf serve;  /* who besides its own user may use rexec serve, and for what */
    size_t users;         /* the api's count of calls started under this workspace */
} rx_ws;

/* Loads dir/rexec.json. Returns 0 and a new workspace in *out, or REXEC_ECONFIG with err->msg
 * naming the JSON path ("actions.svc.restart.params.unit.pattern: ..."). */
int rx_ws_load(rx_ws **out, const char *dir, rexec_error *err);
void rx_ws_free(rx_ws *ws);
/* Frees the action catalog of a workspace a reload replaced once no call uses it any more (its
 * compiled parameter patterns are most of its memory); hosts and the rest stay, since warm
 * connections are known by their rx_host. n_actions becomes 0. */
void rx_ws_release_actions(rx_ws *ws);

/* transfer.c: file actions. 1 when the action object declares "put" or "get" (then it has no
 * "command"). rx_ws_load_transfer reads "put" / "get" / "binary" / "keep_bytes" of an action
 * whose params and secrets are loaded: checks them, sets a->command to the fixed call of
 * remote/put.sh or remote/get.sh and adds a put's two content parameters (a->params has room for
 * them). REXEC_ECONFIG naming the JSON path at fault. */
struct cJSON;
int rx_ws_is_transfer(const struct cJSON *o);
int rx_ws_load_transfer(const struct cJSON *o, const char *path, rx_action *a, rexec_error *err);

/* Lookups; NULL when absent. */
const rx_host *rx_ws_host(const rx_ws *ws, const char *name);
const rx_action *rx_ws_action(const rx_ws *ws, const char *name);
const rx_group *rx_ws_group(const rx_ws *ws, const char *name);
const rx_secret_source *rx_ws_secret(const rx_ws *ws, const char *name);

/* Index in a->params of the parameter named by the n bytes at name (not NUL-terminated), or -1. */
int rx_ws_param_index(const rx_action *a, const char *name, size_t n);

/* Checks an action's template as the loader does: every {name} must be a declared parameter.
 * REXEC_ECONFIG naming the action and placeholder otherwise. */
int rx_ws_check_template(const rx_action *a, rexec_error *err);
/* What the parameter {name} (n bytes) of the action holds, for rx_template_forms (template.h). */
rx_tmpl_kind rx_ws_param_kind(void *action, const char *name, size_t n);

/* Expands TARGETS ("h1", "h1,h2", "@group") into host names (borrowed pointers, deduplicated, in
 * order). Returns 0, or REXEC_ECONFIG naming an unknown host or group, or REXEC_EUSAGE for an
 * empty list. The caller frees *names (not the strings). */
int rx_ws_targets(const rx_ws *ws, const char *targets, const char ***names, size_t *n,
                  rexec_error *err);

/* Reads a secret's value from its source into out (a wiped buffer). Refuses a value shorter
 * than RX_SECRET_MIN_LEN, holding NUL, or missing: REXEC_ECONFIG naming the secret, never the
 * value. */
int rx_ws_secret_value(const rx_ws *ws, const char *name, rx_buf *out, rexec_error *err);

const char *rx_risk_name(rx_risk r);
int rx_risk_parse(const char *s, rx_risk *out);
const char *rx_containment_name(rx_containment c);
int rx_containment_parse(const char *s, rx_containment *out);
const char *rx_ptype_name(rx_ptype t);

#endif
