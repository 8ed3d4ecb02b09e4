/* rexec.json, loaded strictly: unknown keys, wrong types, unknown names and templates naming
 * undeclared parameters are all REXEC_ECONFIG with the JSON path at fault. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "err.h"
#include "fsutil.h"
#include "jsonx.h"
#include "redact.h"
#include "template.h"
#include "scope.h"
#include "sshconfig.h"
#include "workspace.h"

#define WS_MAX_BYTES (4 * 1024 * 1024)
#define WS_MAX_SECRET_BYTES (64 * 1024)
#define C REXEC_ECONFIG

/* ---- names ---------------------------------------------------------------------------------- */

static const char *const risk_names[] = {"L0", "L1", "L2", "L3"};
static const char *const cont_names[] = {"none", "process-group", "cgroup", "pid-namespace"};
static const char *const ptype_names[] = {"string", "int", "enum", "url",
                                          "host",   "cidr", "path", "shell"};

const char *rx_risk_name(rx_risk r) { return r <= RX_L3 ? risk_names[r] : "?"; }
const char *rx_containment_name(rx_containment c) { return c <= RX_CONT_PID_NAMESPACE ? cont_names[c] : "?"; }
const char *rx_ptype_name(rx_ptype t) { return t <= RX_P_SHELL ? ptype_names[t] : "?"; }

static int name_index(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

int rx_risk_parse(const char *s, rx_risk *out)
{
    int i = name_index(s, risk_names, 4);
    if (i >= 0)
        *out = (rx_risk)i;
    return i >= 0 ? 0 : -1;
}

int rx_containment_parse(const char *s, rx_containment *out)
{
    int i = name_index(s, cont_names, 4);
    if (i >= 0)
        *out = (rx_containment)i;
    return i >= 0 ? 0 : -1;
}

/* Host, group and action names: they appear in TARGETS ("a,b", "@g") and in messages. */
static int valid_name(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || s[0] == '-' || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* ---- small typed helpers over jsonx --------------------------------------------------------- */

static int dup_str(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return src && *dst == NULL ? REXEC_ENOMEM : 0;
}

static int get_dup(const cJSON *o, const char *key, const char *path, int required, char **out,
                   rexec_error *err)
{
    const char *s = NULL;
    int r = rx_json_get_string(o, key, path, required, &s, C, err);
    return r ? r : dup_str(out, s);
}

static int get_enum(const cJSON *o, const char *key, const char *path, const char *const *names,
                    int n, int *out, rexec_error *err)
{
    const char *s = NULL;
    char p[RX_JSON_PATH_MAX];
    int r = rx_json_get_string(o, key, path, 0, &s, C, err);
    if (r || s == NULL)
        return r;
    int i = name_index(s, names, n);
    if (names == cont_names && i == RX_CONT_CGROUP)
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, key),
                            "cgroup containment is not available yet: use \"pid-namespace\" or "
                            "\"process-group\"");
    if (i < 0) {
        char list[200] = "";
        for (int k = 0; k < n; k++)
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", k ? ", " : "",
                     names[k]);
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, key),
                            "\"%s\" is not one of: %s", s, list);
    }
    *out = i;
    return 0;
}

static int get_risk(const cJSON *o, const char *key, const char *path, rx_risk *out,
                    rexec_error *err)
{
    int v = (int)*out;
    int r = get_enum(o, key, path, risk_names, 4, &v, err);
    *out = (rx_risk)v;
    return r;
}

/* An array of strings, copied. */
static int get_strings(const cJSON *o, const char *key, const char *path, char ***out, size_t *n,
                       rexec_error *err)
{
    const cJSON *arr = NULL, *it;
    char p[RX_JSON_PATH_MAX], pi[RX_JSON_PATH_MAX];
    int r = rx_json_get_array(o, key, path, 0, &arr, C, err);
    if (r || arr == NULL)
        return r;
    rx_json_path_key(p, sizeof(p), path, key);
    size_t cnt = (size_t)cJSON_GetArraySize(arr), i = 0;
    *out = calloc(cnt + 1, sizeof(char *));
    if (*out == NULL)
        return REXEC_ENOMEM;
    cJSON_ArrayForEach(it, arr) {
        rx_json_path_index(pi, sizeof(pi), p, i);
        if ((r = rx_json_want(it, pi, cJSON_String, C, err)) != 0)
            return r;
        if (((*out)[i++] = strdup(it->valuestring)) == NULL)
            return REXEC_ENOMEM;
        *n = i;
    }
    return 0;
}

static int get_seconds(const cJSON *o, const char *key, const char *path, double min, double *out,
                       rexec_error *err)
{
    double v = *out;
    char p[RX_JSON_PATH_MAX];
    int r = rx_json_get_number(o, key, path, 0, &v, C, err);
    if (r || cJSON_GetObjectItemCaseSensitive(o, key) == NULL)
        return r;
    if (v < min || v > 604800)
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, key),
                            "%g is outside %g..604800 seconds", v, min);
    *out = v;
    return 0;
}

static int get_u64(const cJSON *o, const char *key, const char *path, long long min,
                   long long max, uint64_t *out, rexec_error *err)
{
    long long v = (long long)*out;
    int r = rx_json_get_int(o, key, path, 0, min, max, &v, C, err);
    *out = (uint64_t)v;
    return r;
}

static int get_intv(const cJSON *o, const char *key, const char *path, long long min,
                    long long max, int *out, rexec_error *err)
{
    long long v = *out;
    int r = rx_json_get_int(o, key, path, 0, min, max, &v, C, err);
    *out = (int)v;
    return r;
}

/* ---- hosts ---------------------------------------------------------------------------------- */

static int load_hostkey_policy(const cJSON *o, const char *path, rx_host *h, rexec_error *err)
{
    const char *s = NULL;
    char p[RX_JSON_PATH_MAX];
    int r = rx_json_get_string(o, "host_key", path, 0, &s, C, err);
    if (r || s == NULL)
        return r;
    if (strcmp(s, "strict") == 0)
        h->hostkey = RX_HK_STRICT;
    else if (strcmp(s, "accept-new") == 0)
        h->hostkey = RX_HK_ACCEPT_NEW;
    else if (strncmp(s, "SHA256:", 7) == 0 && strlen(s) == 50) {
        h->hostkey = RX_HK_PINNED;
        return dup_str(&h->fingerprint, s);
    } else
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, "host_key"),
                            "expected \"strict\", \"accept-new\" or a SHA256:<43 base64 chars> "
                            "fingerprint");
    return 0;
}

/* Like ssh: no "user" means the user rexec runs as. */
static int host_default_user(rx_host *h, const char *path, rexec_error *err)
{
    char p[RX_JSON_PATH_MAX];
    if (h->user)
        return 0;
    const struct passwd *pw = getpwuid(geteuid());
    if (pw == NULL || pw->pw_name == NULL)
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, "user"),
                            "missing, and the current user (uid %u) has no name to default to",
                            (unsigned)geteuid());
    return dup_str(&h->user, pw->pw_name);
}

/* The first of files that exists (ssh -G lists defaults that may not), or NULL. */
static const char *first_existing(char *const *files, int n)
{
    for (int i = 0; i < n; i++)
        if (access(files[i], R_OK) == 0)
            return files[i];
    return NULL;
}

/* "ssh_alias": what rexec.json leaves out comes from `ssh -G ALIAS` (sshconfig.h): HostName,
 * Port, User, IdentityFile (the first that exists), UserKnownHostsFile (the first that exists,
 * read besides the workspace's known_hosts) and ProxyJump (an inventory host's name or alias). */
static int host_from_alias(const cJSON *o, const char *path, rx_host *h, rexec_error *err)
{
    char p[RX_JSON_PATH_MAX];
    rx_ssh_g g;
    rx_json_path_key(p, sizeof(p), path, "ssh_alias");
    int r = rx_ssh_g_run(h->ssh_alias, &g, err);
    if (r != 0)
        return r == REXEC_ENOMEM ? r : rx_fail_prefix(err, "%s: ", p);
    const char *idf = first_existing(g.identityfile, g.n_identityfile);
    const char *khf = first_existing(g.knownhosts, g.n_knownhosts);
    if (cJSON_GetObjectItemCaseSensitive(o, "port") == NULL)
        h->port = g.port;
    if ((h->address == NULL && (r = dup_str(&h->address, g.hostname)) != 0) ||
        (h->user == NULL && (r = dup_str(&h->user, g.user)) != 0) ||
        (h->proxy_jump == NULL && (r = dup_str(&h->proxy_jump, g.proxyjump)) != 0) ||
        (khf && (r = dup_str(&h->known_hosts_extra, khf)) != 0))
        goto out;
    if (h->key == NULL && h->auth == RX_AUTH_KEY) {
        if (idf == NULL)
            r = rx_json_fail(err, C, p, "ssh -G %s names no IdentityFile that exists (%d "
                             "listed%s%s); give \"key\" or use \"auth\": \"agent\"",
                             h->ssh_alias, g.n_identityfile, g.n_identityfile ? ", first " : "",
                             g.n_identityfile ? g.identityfile[0] : "");
        else
            r = dup_str(&h->key, idf);
    }
out:
    rx_ssh_g_free(&g);
    return r;
}

/* The inventory host a proxy_jump (or an alias's ProxyJump, "[user@]host[:port]") names: by
 * name, else by ssh_alias. */
static const rx_host *jump_host(const rx_ws *ws, const char *spec)
{
    char name[256];
    const char *at = strrchr(spec, '@');
    snprintf(name, sizeof(name), "%s", at ? at + 1 : spec);
    char *colon = strrchr(name, ':');
    if (colon && name[0] != '[')
        *colon = '\0';
    const rx_host *h = rx_ws_host(ws, name);
    for (size_t i = 0; h == NULL && i < ws->n_hosts; i++)
        if (ws->hosts[i].ssh_alias && strcmp(ws->hosts[i].ssh_alias, name) == 0)
            h = &ws->hosts[i];
    return h;
}

/* proxy_jump names an inventory host; chains end within RX_MAX_JUMPS hops and never loop. */
static int check_host_jumps(rx_ws *ws, rexec_error *err)
{
    char p[RX_JSON_PATH_MAX], pk[RX_JSON_PATH_MAX];
    for (size_t i = 0; i < ws->n_hosts; i++) {
        rx_host *h = &ws->hosts[i];
        if (h->proxy_jump == NULL)
            continue;
        rx_json_path_key(p, sizeof(p), "hosts", h->name);
        rx_json_path_key(pk, sizeof(pk), p, "proxy_jump");
        if (strchr(h->proxy_jump, ',') != NULL)
            return rx_json_fail(err, C, pk, "\"%s\" has several hops: make each hop an inventory "
                                "host with its own proxy_jump", h->proxy_jump);
        if ((h->jump = jump_host(ws, h->proxy_jump)) == NULL)
            return rx_json_fail(err, C, pk, "\"%s\" is not an inventory host (add it under "
                                "\"hosts\", e.g. {\"ssh_alias\": \"%s\"})", h->proxy_jump,
                                h->proxy_jump);
    }
    for (size_t i = 0; i < ws->n_hosts; i++) {
        int hops = 0;
        for (const rx_host *j = ws->hosts[i].jump; j; j = j->jump)
            if (++hops > RX_MAX_JUMPS || j == &ws->hosts[i]) {
                rx_json_path_key(p, sizeof(p), "hosts", ws->hosts[i].name);
                rx_json_path_key(pk, sizeof(pk), p, "proxy_jump");
                if (j == &ws->hosts[i])
                    return rx_json_fail(err, C, pk, "the chain of jumps comes back to %s",
                                        ws->hosts[i].name);
                return rx_json_fail(err, C, pk, "more than %d jumps to reach %s", RX_MAX_JUMPS,
                                    ws->hosts[i].name);
            }
    }
    return 0;
}

/* key_passphrase names a declared secret; checked once "secrets" is loaded. */
static int check_host_secrets(rx_ws *ws, rexec_error *err)
{
    char p[RX_JSON_PATH_MAX], pk[RX_JSON_PATH_MAX];
    for (size_t i = 0; i < ws->n_hosts; i++) {
        const rx_host *h = &ws->hosts[i];
        if (h->key_passphrase && rx_ws_secret(ws, h->key_passphrase) == NULL) {
            rx_json_path_key(p, sizeof(p), "hosts", h->name);
            return rx_json_fail(err, C, rx_json_path_key(pk, sizeof(pk), p, "key_passphrase"),
                                "unknown secret \"%s\" (declare it under \"secrets\")",
                                h->key_passphrase);
        }
    }
    return 0;
}

static int load_host(rx_ws *ws, const cJSON *o, const char *path, rx_host *h, rexec_error *err)
{
    static const char *const keys[] = {"address", "port", "user", "key", "auth",
                                       "key_passphrase", "host_key", "allow", "approve",
                                       "max_channels", "max_connections", "containment",
                                       "ssh_alias", "proxy_jump", "description", "runner",
                                       "key_permissions", NULL};
    static const char *const auth_names[] = {"key", "agent"};
    static const char *const perm_names[] = {"strict", "ignore"}; /* src/ssh/auth.c */
    int perms = 0;
    char *key = NULL, p[RX_JSON_PATH_MAX];
    int r, cont = RX_CONT_PID_NAMESPACE, auth = RX_AUTH_KEY;
    int alias = cJSON_GetObjectItemCaseSensitive(o, "ssh_alias") != NULL;
    h->port = 22;
    h->allow = RX_L1;
    h->approve = RX_L2;
    h->ws = ws;
    h->runner = 1;
    if ((r = rx_json_check_keys(o, path, keys, C, err)) != 0 ||
        (r = get_dup(o, "ssh_alias", path, 0, &h->ssh_alias, err)) != 0 ||
        (r = get_dup(o, "address", path, !alias, &h->address, err)) != 0 ||
        (r = get_intv(o, "port", path, 1, 65535, &h->port, err)) != 0 ||
        (r = get_dup(o, "user", path, 0, &h->user, err)) != 0 ||
        (r = get_enum(o, "auth", path, auth_names, 2, &auth, err)) != 0 ||
        (r = get_dup(o, "key", path, auth == RX_AUTH_KEY && !alias, &key, err)) != 0 ||
        (r = get_dup(o, "key_passphrase", path, 0, &h->key_passphrase, err)) != 0 ||
        (r = get_enum(o, "key_permissions", path, perm_names, 2, &perms, err)) != 0 ||
        (r = get_dup(o, "proxy_jump", path, 0, &h->proxy_jump, err)) != 0 ||
        (r = load_hostkey_policy(o, path, h, err)) != 0 ||
        (r = get_risk(o, "allow", path, &h->allow, err)) != 0 ||
        (r = get_risk(o, "approve", path, &h->approve, err)) != 0 ||
        (r = get_intv(o, "max_channels", path, 1, 64, &h->max_channels, err)) != 0 ||
        (r = get_intv(o, "max_connections", path, 1, 8, &h->max_connections, err)) != 0 ||
        (r = get_enum(o, "containment", path, cont_names, 4, &cont, err)) != 0 ||
        (r = rx_json_get_bool(o, "runner", path, 0, &h->runner, C, err)) != 0)
        goto out;
    h->max_containment = (rx_containment)cont;
    h->key_perms_ignore = perms == 1;
    if (cJSON_GetObjectItemCaseSensitive(o, "approve") == NULL && h->approve < h->allow)
        h->approve = h->allow; /* "allow": "L3" alone means everything runs */
    if (h->approve < h->allow) {
        r = rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, "approve"),
                         "%s is below allow (%s)", rx_risk_name(h->approve),
                         rx_risk_name(h->allow));
        goto out;
    }
    if ((rx_auth_method)auth == RX_AUTH_AGENT && h->key_passphrase) {
        r = rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, "key_passphrase"),
                         "not used with \"auth\": \"agent\" (the agent holds the key unlocked)");
        goto out;
    }
    h->auth = (rx_auth_method)auth;
    if (key && (h->key = rx_fs_join(ws->dir, key)) == NULL)
        r = REXEC_ENOMEM;
    if (r == 0 && h->ssh_alias)
        r = host_from_alias(o, path, h, err);
    if (r == 0)
        r = host_default_user(h, path, err);
out:
    free(key);
    return r;
}

static int load_hosts(rx_ws *ws, const cJSON *root, rexec_error *err)
{
    const cJSON *hosts = NULL, *it;
    char p[RX_JSON_PATH_MAX];
    int r = rx_json_get_object(root, "hosts", "", 1, &hosts, C, err);
    if (r)
        return r;
    ws->hosts = calloc((size_t)cJSON_GetArraySize(hosts) + 1, sizeof(rx_host));
    if (ws->hosts == NULL)
        return REXEC_ENOMEM;
    cJSON_ArrayForEach(it, hosts) {
        rx_host *h = &ws->hosts[ws->n_hosts++];
        rx_json_path_key(p, sizeof(p), "hosts", it->string);
        if (!valid_name(it->string, 64))
            return rx_json_fail(err, C, p, "a host name is 1-64 of [A-Za-z0-9._-]");
        if ((r = dup_str(&h->name, it->string)) != 0 ||
            (r = rx_json_want(it, p, cJSON_Object, C, err)) != 0 ||
            (r = load_host(ws, it, p, h, err)) != 0)
            return r;
    }
    return 0;
}

static int load_groups(rx_ws *ws, const cJSON *root, rexec_error *err)
{
    const cJSON *groups = NULL, *it;
    char p[RX_JSON_PATH_MAX], pi[RX_JSON_PATH_MAX];
    int r = rx_json_get_object(root, "groups", "", 0, &groups, C, err);
    if (r || groups == NULL)
        return r;
    ws->groups = calloc((size_t)cJSON_GetArraySize(groups) + 1, sizeof(rx_group));
    if (ws->groups == NULL)
        return REXEC_ENOMEM;
    cJSON_ArrayForEach(it, groups) {
        rx_group *g = &ws->groups[ws->n_groups++];
        rx_json_path_key(p, sizeof(p), "groups", it->string);
        if (!valid_name(it->string, 64))
            return rx_json_fail(err, C, p, "a group name is 1-64 of [A-Za-z0-9._-]");
        if ((r = dup_str(&g->name, it->string)) != 0 ||
            (r = get_strings(groups, it->string, "groups", &g->hosts, &g->n_hosts, err)) != 0)
            return r;
        for (size_t i = 0; i < g->n_hosts; i++)
            if (rx_ws_host(ws, g->hosts[i]) == NULL)
                return rx_json_fail(err, C, rx_json_path_index(pi, sizeof(pi), p, i),
                                    "unknown host \"%s\"", g->hosts[i]);
    }
    return 0;
}

/* ---- scope and secrets ---------------------------------------------------------------------- */

static int load_scope(rx_ws *ws, const cJSON *root, rexec_error *err)
{
    static const char *const keys[] = {"cidrs", "domains", NULL};
    const cJSON *scope = NULL;
    char **list = NULL, pi[RX_JSON_PATH_MAX];
    size_t n = 0;
    int r;
    if ((ws->scope = rx_scope_new()) == NULL)
        return REXEC_ENOMEM;
    if ((r = rx_json_get_object(root, "scope", "", 0, &scope, C, err)) != 0 || scope == NULL)
        return r;
    if ((r = rx_json_check_keys(scope, "scope", keys, C, err)) != 0)
        return r;
    for (int kind = 0; kind < 2 && r == 0; kind++) {
        const char *key = kind ? "domains" : "cidrs";
        r = get_strings(scope, key, "scope", &list, &n, err);
        for (size_t i = 0; r == 0 && i < n; i++) {
            r = kind ? rx_scope_add_domain(ws->scope, list[i], err)
                     : rx_scope_add_cidr(ws->scope, list[i], err);
            if (r && r != REXEC_ENOMEM) {
                snprintf(pi, sizeof(pi), "scope.%s[%zu]: ", key, i);
                rx_fail_prefix(err, "%s", pi);
            }
        }
        for (size_t i = 0; list && i < n; i++)
            free(list[i]);
        free(list);
        list = NULL;
        n = 0;
    }
    return r;
}

static int load_secret(const rx_ws *ws, const cJSON *o, const char *path, rx_secret_source *s,
                       rexec_error *err)
{
    static const char *const keys[] = {"env", "file", NULL};
    const char *why;
    char *file = NULL;
    int r;
    if (!rx_secret_name_ok(s->name, &why))
        return rx_json_fail(err, C, path, "secret name refused: %s", why);
    if ((r = rx_json_want(o, path, cJSON_Object, C, err)) != 0 ||
        (r = rx_json_check_keys(o, path, keys, C, err)) != 0 ||
        (r = get_dup(o, "env", path, 0, &s->env, err)) != 0 ||
        (r = get_dup(o, "file", path, 0, &file, err)) != 0)
        goto out;
    if ((s->env == NULL) == (file == NULL)) {
        r = rx_json_fail(err, C, path, "give exactly one of \"env\" or \"file\"");
        goto out;
    }
    if (file && (s->file = rx_fs_join(ws->dir, file)) == NULL)
        r = REXEC_ENOMEM;
out:
    free(file);
    return r;
}

static int load_secrets(rx_ws *ws, const cJSON *root, rexec_error *err)
{
    const cJSON *secrets = NULL, *it;
    char p[RX_JSON_PATH_MAX];
    int r = rx_json_get_object(root, "secrets", "", 0, &secrets, C, err);
    if (r || secrets == NULL)
        return r;
    ws->secrets = calloc((size_t)cJSON_GetArraySize(secrets) + 1, sizeof(rx_secret_source));
    if (ws->secrets == NULL)
        return REXEC_ENOMEM;
    cJSON_ArrayForEach(it, secrets) {
        rx_secret_source *s = &ws->secrets[ws->n_secrets++];
        rx_json_path_key(p, sizeof(p), "secrets", it->string);
        if ((r = dup_str(&s->name, it->string)) != 0 || (r = load_secret(ws, it, p, s, err)) != 0)
            return r;
    }
    return 0;
}

/* ---- actions -------------------------------------------------------------------------------- */

static int param_name_ok(const char *s)
{
    if (!(s[0] == '_' || ((s[0] | 32) >= 'a' && (s[0] | 32) <= 'z')) || strlen(s) > 64)
        return 0;
    for (const char *c = s; *c; c++)
        if (!(*c == '_' || (*c >= '0' && *c <= '9') || ((*c | 32) >= 'a' && (*c | 32) <= 'z')))
            return 0;
    return 1;
}

/* Which keys a parameter of a type may carry: a misplaced one is a mistake worth reporting. */
static int param_keys_for_type(const cJSON *o, const char *path, rx_ptype t, rexec_error *err)
{
    static const char *const string_keys[] = {"type", "pattern", "max_len", "default",
                                              "description", NULL};
    static const char *const int_keys[] = {"type", "min", "max", "default", "description", NULL};
    static const char *const enum_keys[] = {"type", "values", "default", "description", NULL};
    static const char *const target_keys[] = {"type", "in_scope", "max_len", "default",
                                              "description", NULL};
    static const char *const other_keys[] = {"type", "max_len", "default", "description", NULL};
    const char *const *keys = other_keys;
    if (t == RX_P_STRING)
        keys = string_keys;
    else if (t == RX_P_INT)
        keys = int_keys;
    else if (t == RX_P_ENUM)
        keys = enum_keys;
    else if (t == RX_P_URL || t == RX_P_HOST || t == RX_P_CIDR)
        keys = target_keys;
    return rx_json_check_keys(o, path, keys, C, err);
}

static int param_pattern(const cJSON *o, const char *path, rx_param_spec *ps, rexec_error *err)
{
    char p[RX_JSON_PATH_MAX], msg[200];
    int r = get_dup(o, "pattern", path, 0, &ps->pattern, err);
    if (r || ps->pattern == NULL)
        return r;
    int rc = regcomp(&ps->re, ps->pattern, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        regerror(rc, &ps->re, msg, sizeof(msg));
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, "pattern"),
                            "not a POSIX extended regular expression: %s", msg);
    }
    ps->has_re = 1;
    return 0;
}

/* "default": a string, or an integer for int parameters; kept as text like a caller's value. */
static int param_default(const cJSON *o, const char *path, rx_param_spec *ps, rexec_error *err)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "default");
    char p[RX_JSON_PATH_MAX], num[32];
    long long v;
    if (d == NULL)
        return 0;
    ps->required = 0;
    if (ps->type == RX_P_INT && cJSON_IsNumber(d)) {
        int r = rx_json_get_int(o, "default", path, 1, LLONG_MIN / 2, LLONG_MAX / 2, &v, C, err);
        if (r)
            return r;
        snprintf(num, sizeof(num), "%lld", v);
        return dup_str(&ps->default_value, num);
    }
    if (!cJSON_IsString(d))
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, "default"),
                            "expected a string, got %s", rx_json_type_name(d));
    return dup_str(&ps->default_value, d->valuestring);
}

static int load_param(const cJSON *o, const char *path, rx_param_spec *ps, rexec_error *err)
{
    int t = -1, r;
    long long mx = 0;
    ps->required = 1;
    if ((r = rx_json_want(o, path, cJSON_Object, C, err)) != 0 ||
        (r = get_enum(o, "type", path, ptype_names, 8, &t, err)) != 0)
        return r;
    if (t < 0)
        return rx_json_fail(err, C, path, "missing \"type\"");
    ps->type = (rx_ptype)t;
    if ((r = param_keys_for_type(o, path, ps->type, err)) != 0 ||
        (r = param_pattern(o, path, ps, err)) != 0 ||
        (r = rx_json_get_int(o, "max_len", path, 0, 1, 1 << 20, &mx, C, err)) != 0 ||
        (r = rx_json_get_bool(o, "in_scope", path, 0, &ps->in_scope, C, err)) != 0 ||
        (r = get_strings(o, "values", path, &ps->enum_values, &ps->n_enum, err)) != 0 ||
        (r = get_dup(o, "description", path, 0, &ps->description, err)) != 0)
        return r;
    ps->max_len = (size_t)mx;
    ps->has_min = cJSON_GetObjectItemCaseSensitive(o, "min") != NULL;
    ps->has_max = cJSON_GetObjectItemCaseSensitive(o, "max") != NULL;
    if ((r = rx_json_get_int(o, "min", path, 0, LLONG_MIN / 2, LLONG_MAX / 2, &ps->min, C, err)) ||
        (r = rx_json_get_int(o, "max", path, 0, LLONG_MIN / 2, LLONG_MAX / 2, &ps->max, C, err)))
        return r;
    if (ps->type == RX_P_ENUM && ps->n_enum == 0)
        return rx_json_fail(err, C, path, "an enum parameter needs a non-empty \"values\" list");
    if (ps->has_min && ps->has_max && ps->min > ps->max)
        return rx_json_fail(err, C, path, "min is above max");
    return param_default(o, path, ps, err);
}

static int load_params(const cJSON *o, const char *path, rx_action *a, rexec_error *err)
{
    const cJSON *params = NULL, *it;
    char p[RX_JSON_PATH_MAX];
    int r = rx_json_get_object(o, "params", path, 0, &params, C, err);
    if (r || params == NULL)
        return r;
    /* + 2: a put action's content_sha256 and content_size (transfer.c) */
    a->params = calloc((size_t)cJSON_GetArraySize(params) + 3, sizeof(rx_param_spec));
    if (a->params == NULL)
        return REXEC_ENOMEM;
    cJSON_ArrayForEach(it, params) {
        rx_param_spec *ps = &a->params[a->n_params++];
        rx_json_path_key(p, sizeof(p), path, "params");
        rx_json_path_key(p, sizeof(p), p, it->string);
        if (!param_name_ok(it->string))
            return rx_json_fail(err, C, p, "a parameter name must match ^[A-Za-z_][A-Za-z0-9_]*$");
        if ((r = dup_str(&ps->name, it->string)) != 0 || (r = load_param(it, p, ps, err)) != 0)
            return r;
    }
    return 0;
}

/* The effective risk floors and scope rules that follow from an action's own declarations. */
static void action_floors(rx_action *a)
{
    for (size_t i = 0; i < a->n_params; i++) {
        rx_param_spec *ps = &a->params[i];
        if (ps->type == RX_P_SHELL && a->risk < RX_L3)
            a->risk_floor_reason = "shell parameter", a->risk = RX_L3;
        /* a network action may reach only in-scope targets, whatever the operator wrote */
        if (a->network && (ps->type == RX_P_URL || ps->type == RX_P_HOST || ps->type == RX_P_CIDR))
            ps->in_scope = 1;
    }
}

static int action_secrets(const rx_ws *ws, const cJSON *o, const char *path, rx_action *a,
                          rexec_error *err)
{
    char p[RX_JSON_PATH_MAX], pi[RX_JSON_PATH_MAX];
    int r = get_strings(o, "secrets", path, &a->secrets, &a->n_secrets, err);
    rx_json_path_key(p, sizeof(p), path, "secrets");
    for (size_t i = 0; r == 0 && i < a->n_secrets; i++)
        if (rx_ws_secret(ws, a->secrets[i]) == NULL)
            r = rx_json_fail(err, C, rx_json_path_index(pi, sizeof(pi), p, i),
                             "unknown secret \"%s\" (declare it under \"secrets\")", a->secrets[i]);
    return r;
}

/* Every {name} in the template must be a declared parameter (the renderer expands it). */
static int check_text(void *ctx, const char *text, size_t n)
{
    (void)ctx, (void)text, (void)n;
    return 0;
}

static int check_param(void *ctx, const char *name, size_t n)
{
    const rx_action *a = ((void **)ctx)[0];
    rexec_error *err = ((void **)ctx)[1];
    if (rx_ws_param_index(a, name, n) < 0)
        return rx_fail(err, REXEC_ECONFIG,
                       "actions.%s.command: {%.*s} names no declared parameter (write {{ for a "
                       "literal brace)",
                       a->name, (int)n, name);
    return 0;
}

rx_tmpl_kind rx_ws_param_kind(void *action, const char *name, size_t n)
{
    const rx_action *a = action;
    int i = rx_ws_param_index(a, name, n);
    if (i < 0)
        return RX_TK_DATA;
    switch (a->params[i].type) {
    case RX_P_INT: return RX_TK_INT;
    case RX_P_ENUM: return RX_TK_ENUM;
    case RX_P_SHELL: return RX_TK_SHELL;
    default: return RX_TK_DATA;
    }
}

int rx_ws_check_template(const rx_action *a, rexec_error *err)
{
    void *ctx[2] = {(void *)a, err};
    unsigned char *forms = NULL;
    size_t n = 0;
    rx_tmpl_diag d;
    int r = rx_template_walk(a->command, check_text, check_param, ctx);
    if (r != 0)
        return r;
    r = rx_template_forms(a->command, rx_ws_param_kind, (void *)a, &forms, &n, &d);
    free(forms);
    if (r < 0)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (r > 0 && d.flow)
        return rx_fail(err, REXEC_ECONFIG,
                       "actions.%s.command: line %zu, column %zu: a {placeholder} %s: line %zu, "
                       "column %zu (docs/workspace.md, \"Where a placeholder may stand\")",
                       a->name, d.line, d.col, d.why, d.ref_line, d.ref_col);
    if (r > 0 && d.unsure)
        return rx_fail(err, REXEC_ECONFIG,
                       "actions.%s.command: line %zu, column %zu: the template %s; a template "
                       "with {placeholders} must be one rexec can read with certainty "
                       "(docs/workspace.md, \"Where a placeholder may stand\")",
                       a->name, d.line, d.col, d.why);
    if (r > 0)
        return rx_fail(err, REXEC_ECONFIG,
                       "actions.%s.command: line %zu, column %zu: a {placeholder} %s "
                       "(docs/workspace.md, \"Where a placeholder may stand\")",
                       a->name, d.line, d.col, d.why);
    return 0;
}

static int load_action(const rx_ws *ws, const cJSON *o, const char *path, rx_action *a,
                       rexec_error *err)
{
    static const char *const keys[] = {"risk", "command", "params", "secrets", "network",
                                       "state_changing", "timeout_s", "max_output_bytes",
                                       "containment", "cwd", "description", "on_cap", "stdin",
                                       "put", "get", "binary", "keep_bytes", NULL};
    static const char *const on_cap_names[] = {"keep", "kill"};
    static const char *const stdin_names[] = {"staged", "piped"};
    int r, risk = -1, cont = RX_CONT_NONE, on_cap = 0, stdin_mode = 0;
    if ((r = rx_json_want(o, path, cJSON_Object, C, err)) != 0 ||
        (r = rx_json_check_keys(o, path, keys, C, err)) != 0 ||
        (r = get_enum(o, "risk", path, risk_names, 4, &risk, err)) != 0 ||
        (r = get_dup(o, "command", path, !rx_ws_is_transfer(o), &a->command, err)) != 0 ||
        (r = load_params(o, path, a, err)) != 0 ||
        (r = action_secrets(ws, o, path, a, err)) != 0 ||
        (r = rx_json_get_bool(o, "network", path, 0, &a->network, C, err)) != 0 ||
        (r = rx_json_get_bool(o, "state_changing", path, 0, &a->state_changing, C, err)) != 0 ||
        (r = get_seconds(o, "timeout_s", path, 0.001, &a->timeout_s, err)) != 0 ||
        (r = get_u64(o, "max_output_bytes", path, 0, 1LL << 40, &a->max_output_bytes, err)) ||
        (r = get_enum(o, "containment", path, cont_names, 4, &cont, err)) != 0 ||
        (r = get_enum(o, "on_cap", path, on_cap_names, 2, &on_cap, err)) != 0 ||
        (r = get_enum(o, "stdin", path, stdin_names, 2, &stdin_mode, err)) != 0 ||
        (r = get_dup(o, "cwd", path, 0, &a->cwd, err)) != 0 ||
        (r = get_dup(o, "description", path, 0, &a->description, err)) != 0)
        return r;
    if (risk < 0)
        return rx_json_fail(err, C, path, "missing \"risk\" (L0, L1, L2 or L3)");
    a->risk = a->declared_risk = (rx_risk)risk;
    a->containment = (rx_containment)cont;
    a->on_cap_kill = on_cap == 1;
    a->stdin_piped = stdin_mode == 1;
    if ((r = rx_ws_load_transfer(o, path, a, err)) != 0)
        return r;
    if (a->state_changing && a->risk < RX_L2)
        a->risk_floor_reason = "state_changing", a->risk = RX_L2;
    action_floors(a);
    return rx_ws_check_template(a, err);
}

static int load_actions(rx_ws *ws, const cJSON *root, rexec_error *err)
{
    const cJSON *actions = NULL, *it;
    char p[RX_JSON_PATH_MAX];
    int r = rx_json_get_object(root, "actions", "", 0, &actions, C, err);
    if (r || actions == NULL)
        return r;
    ws->actions = calloc((size_t)cJSON_GetArraySize(actions) + 1, sizeof(rx_action));
    if (ws->actions == NULL)
        return REXEC_ENOMEM;
    cJSON_ArrayForEach(it, actions) {
        rx_action *a = &ws->actions[ws->n_actions++];
        rx_json_path_key(p, sizeof(p), "actions", it->string);
        if (!valid_name(it->string, 128))
            return rx_json_fail(err, C, p, "an action name is 1-128 of [A-Za-z0-9._-]");
        if ((r = dup_str(&a->name, it->string)) != 0 || (r = load_action(ws, it, p, a, err)) != 0)
            return r;
    }
    return 0;
}

/* ---- limits and the whole file -------------------------------------------------------------- */

static int load_limits(rx_ws *ws, const cJSON *root, rexec_error *err)
{
    static const char *const keys[] = {"timeout_s", "kill_after_s", "max_output_bytes",
                                       "connect_timeout_s", "parallel", "max_channels",
                                       "keepalive_s", "approval_ttl_s", "max_stdin_bytes",
                                       "max_result_bytes", "runner_idle_s", NULL};
    const cJSON *o = NULL;
    rx_limits *l = &ws->limits;
    int r;
    *l = (rx_limits){.timeout_s = 120, .kill_after_s = 5, .max_output_bytes = 1 << 20,
                     .connect_timeout_s = 10, .parallel = 16, .max_channels = RX_DEFAULT_MAX_CHANNELS,
                     .keepalive_s = 15, .approval_ttl_s = 900, .max_stdin_bytes = 16 << 20,
                     .max_result_bytes = 1 << 20, .runner_idle_s = 30};
    if ((r = rx_json_get_object(root, "limits", "", 0, &o, C, err)) != 0 || o == NULL)
        return r;
    if ((r = rx_json_check_keys(o, "limits", keys, C, err)) != 0 ||
        (r = get_seconds(o, "timeout_s", "limits", 0.001, &l->timeout_s, err)) != 0 ||
        (r = get_seconds(o, "kill_after_s", "limits", 0, &l->kill_after_s, err)) != 0 ||
        (r = get_u64(o, "max_output_bytes", "limits", 0, 1LL << 40, &l->max_output_bytes, err)) ||
        (r = get_seconds(o, "connect_timeout_s", "limits", 0.01, &l->connect_timeout_s, err)) ||
        (r = get_intv(o, "parallel", "limits", 1, 4096, &l->parallel, err)) != 0 ||
        (r = get_intv(o, "max_channels", "limits", 1, 64, &l->max_channels, err)) != 0 ||
        (r = get_seconds(o, "keepalive_s", "limits", 0, &l->keepalive_s, err)) != 0 ||
        (r = get_seconds(o, "approval_ttl_s", "limits", 1, &l->approval_ttl_s, err)) != 0 ||
        (r = get_u64(o, "max_stdin_bytes", "limits", 0, 1LL << 34, &l->max_stdin_bytes, err)) ||
        (r = get_u64(o, "max_result_bytes", "limits", 0, 1LL << 32, &l->max_result_bytes, err)) ||
        (r = get_seconds(o, "runner_idle_s", "limits", 0.1, &l->runner_idle_s, err)) != 0)
        return r;
    return 0;
}

/* "syslog": true (the system's /dev/log), false, or the absolute path of a datagram socket. */
static int load_audit_syslog(rx_ws *ws, const cJSON *v, rexec_error *err)
{
    const char *path = NULL;
    if (v == NULL || cJSON_IsFalse(v) || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsTrue(v))
        path = "/dev/log";
    else if (cJSON_IsString(v) && v->valuestring[0] == '/' && strlen(v->valuestring) < 108)
        path = v->valuestring;
    else
        return rx_json_fail(err, C, "audit.syslog",
                            "must be true, false or the absolute path of a syslog socket "
                            "(shorter than 108 bytes)");
    if ((ws->audit_syslog = strdup(path)) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    return 0;
}

static int load_audit(rx_ws *ws, const cJSON *root, rexec_error *err)
{
    static const char *const keys[] = {"key_file", "syslog", NULL};
    const cJSON *o = NULL;
    int r = rx_json_get_object(root, "audit", "", 0, &o, C, err);
    if (r || o == NULL)
        return r;
    if ((r = rx_json_check_keys(o, "audit", keys, C, err)) != 0 ||
        (r = get_dup(o, "key_file", "audit", 0, &ws->audit_key_file, err)) != 0)
        return r;
    if (ws->audit_key_file && ws->audit_key_file[0] != '/')
        return rx_json_fail(err, C, "audit.key_file", "must be an absolute path outside the "
                                                      "workspace");
    return load_audit_syslog(ws, cJSON_GetObjectItemCaseSensitive(o, "syslog"), err);
}

static int load_root(rx_ws *ws, const cJSON *root, rexec_error *err)
{
    static const char *const keys[] = {"hosts", "groups", "scope", "secrets", "actions",
                                       "limits", "audit", "serve", "description", "approvals",
                                       NULL};
    int r;
    if ((r = rx_json_want(root, "", cJSON_Object, C, err)) != 0 ||
        (r = rx_json_check_keys(root, "", keys, C, err)) != 0 ||
        (r = load_limits(ws, root, err)) != 0 || (r = load_hosts(ws, root, err)) != 0 ||
        (r = load_groups(ws, root, err)) != 0 || (r = load_scope(ws, root, err)) != 0 ||
        (r = load_secrets(ws, root, err)) != 0 || (r = check_host_secrets(ws, err)) != 0 ||
        (r = check_host_jumps(ws, err)) != 0 ||
        (r = load_actions(ws, root, err)) != 0 ||
        (r = load_audit(ws, root, err)) != 0 ||
        (r = rx_serve_conf_load(root, &ws->serve, err)) != 0 ||
        (r = rx_notify_conf_load(root, &ws->serve, err)) != 0)
        return r;
    return 0;
}

int rx_ws_load(rx_ws **out, const char *dir, rexec_error *err)
{
    char *path = NULL, *text = NULL, real[PATH_MAX];
    size_t len = 0;
    cJSON *root = NULL;
    int r;
    rx_ws *ws = calloc(1, sizeof(*ws));
    if (ws == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (realpath(dir, real) == NULL) {
        r = rx_fail(err, C, "workspace %s: %s", dir, strerror(errno));
        goto out;
    }
    if ((ws->dir = strdup(real)) == NULL || (path = rx_fs_join(real, "rexec.json")) == NULL ||
        (ws->known_hosts = rx_fs_join(real, "known_hosts")) == NULL) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
        goto out;
    }
    if ((r = rx_fs_check(real, 0, C, err)) != 0 || (r = rx_fs_check(path, 0, C, err)) != 0 ||
        (access(ws->known_hosts, F_OK) == 0 && (r = rx_fs_check(ws->known_hosts, 0, C, err)) != 0) ||
        (r = rx_fs_read_file(path, WS_MAX_BYTES, &text, &len, C, err)) != 0)
        goto out;
    if ((r = rx_json_parse_strict(text, len, WS_MAX_BYTES, C, &root, err)) != 0 ||
        (r = load_root(ws, root, err)) != 0) {
        if (r == REXEC_ENOMEM)
            rx_fail(err, r, "out of memory");
        rx_fail_prefix(err, "%s: ", path);
        goto out;
    }
out:
    cJSON_Delete(root);
    free(text);
    free(path);
    if (r != 0)
        rx_ws_free(ws);
    else
        *out = ws;
    return r;
}

/* ---- release -------------------------------------------------------------------------------- */

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static void free_action(rx_action *a)
{
    for (size_t i = 0; i < a->n_params; i++) {
        rx_param_spec *ps = &a->params[i];
        if (ps->has_re)
            regfree(&ps->re);
        free(ps->name);
        free(ps->pattern);
        free(ps->default_value);
        free(ps->description);
        free_strv(ps->enum_values, ps->n_enum);
    }
    free(a->params);
    free_strv(a->secrets, a->n_secrets);
    free(a->name);
    free(a->command);
    free(a->cwd);
    free(a->description);
    free(a->xfer_path);
}

void rx_ws_free(rx_ws *ws)
{
    if (ws == NULL)
        return;
    for (size_t i = 0; i < ws->n_hosts; i++) {
        rx_host *h = &ws->hosts[i];
        free(h->name), free(h->address), free(h->user), free(h->key), free(h->fingerprint);
        free(h->key_passphrase), free(h->ssh_alias), free(h->proxy_jump);
        free(h->known_hosts_extra);
    }
    for (size_t i = 0; i < ws->n_groups; i++) {
        free(ws->groups[i].name);
        free_strv(ws->groups[i].hosts, ws->groups[i].n_hosts);
    }
    for (size_t i = 0; i < ws->n_secrets; i++) {
        free(ws->secrets[i].name), free(ws->secrets[i].env), free(ws->secrets[i].file);
    }
    for (size_t i = 0; i < ws->n_actions; i++)
        free_action(&ws->actions[i]);
    free(ws->hosts), free(ws->groups), free(ws->secrets), free(ws->actions);
    rx_scope_free(ws->scope);
    free(ws->dir), free(ws->known_hosts), free(ws->audit_key_file);
    free(ws->audit_syslog);
    rx_serve_conf_free(&ws->serve);
    free(ws);
}

void rx_ws_release_actions(rx_ws *ws)
{
    for (size_t i = 0; i < ws->n_actions; i++)
        free_action(&ws->actions[i]);
    free(ws->actions);
    ws->actions = NULL;
    ws->n_actions = 0;
}

/* ---- lookups -------------------------------------------------------------------------------- */

const rx_host *rx_ws_host(const rx_ws *ws, const char *name)
{
    for (size_t i = 0; i < ws->n_hosts; i++)
        if (strcmp(ws->hosts[i].name, name) == 0)
            return &ws->hosts[i];
    return NULL;
}

int rx_ws_param_index(const rx_action *a, const char *name, size_t n)
{
    for (size_t i = 0; i < a->n_params; i++)
        if (strlen(a->params[i].name) == n && memcmp(a->params[i].name, name, n) == 0)
            return (int)i;
    return -1;
}

const rx_action *rx_ws_action(const rx_ws *ws, const char *name)
{
    for (size_t i = 0; i < ws->n_actions; i++)
        if (strcmp(ws->actions[i].name, name) == 0)
            return &ws->actions[i];
    return NULL;
}

const rx_group *rx_ws_group(const rx_ws *ws, const char *name)
{
    for (size_t i = 0; i < ws->n_groups; i++)
        if (strcmp(ws->groups[i].name, name) == 0)
            return &ws->groups[i];
    return NULL;
}

const rx_secret_source *rx_ws_secret(const rx_ws *ws, const char *name)
{
    for (size_t i = 0; i < ws->n_secrets; i++)
        if (strcmp(ws->secrets[i].name, name) == 0)
            return &ws->secrets[i];
    return NULL;
}

static int targets_add(const char ***names, size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*names)[i], name) == 0)
            return 0;
    const char **v = realloc(*names, (*n + 1) * sizeof(*v));
    if (v == NULL)
        return REXEC_ENOMEM;
    v[(*n)++] = name;
    *names = v;
    return 0;
}

static int targets_one(const rx_ws *ws, const char *item, const char ***names, size_t *n,
                       rexec_error *err)
{
    int r = 0;
    if (item[0] == '@') {
        const rx_group *g = rx_ws_group(ws, item + 1);
        if (g == NULL)
            return rx_fail(err, C, "unknown group \"%s\" (see the \"groups\" of rexec.json)",
                           item + 1);
        for (size_t i = 0; r == 0 && i < g->n_hosts; i++)
            r = targets_add(names, n, rx_ws_host(ws, g->hosts[i])->name);
        return r;
    }
    const rx_host *h = rx_ws_host(ws, item);
    if (h == NULL)
        return rx_fail(err, C, "unknown host \"%s\" (`rexec hosts` lists the inventory)", item);
    return targets_add(names, n, h->name);
}

int rx_ws_targets(const rx_ws *ws, const char *targets, const char ***names, size_t *n,
                  rexec_error *err)
{
    char *copy = strdup(targets), *save = NULL;
    int r = copy ? 0 : REXEC_ENOMEM;
    *names = NULL;
    *n = 0;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; r == 0 && t;
         t = strtok_r(NULL, ",", &save))
        r = targets_one(ws, t, names, n, err);
    free(copy);
    if (r == 0 && *n == 0)
        r = rx_fail(err, REXEC_EUSAGE, "no target host given");
    if (r != 0) {
        free(*names);
        *names = NULL;
        *n = 0;
    }
    return r == REXEC_ENOMEM ? rx_fail(err, r, "out of memory") : r;
}

/* ---- secret values -------------------------------------------------------------------------- */

static int secret_check(const char *name, const rx_buf *v, rexec_error *err)
{
    if (memchr(v->data, 0, v->len))
        return rx_fail(err, C, "secret %s holds a NUL byte", name);
    if (v->len < RX_SECRET_MIN_LEN)
        return rx_fail(err, C,
                       "secret %s is shorter than %d bytes: too short to redact reliably, "
                       "refusing to hand it out",
                       name, RX_SECRET_MIN_LEN);
    return 0;
}

int rx_ws_secret_value(const rx_ws *ws, const char *name, rx_buf *out, rexec_error *err)
{
    const rx_secret_source *s = rx_ws_secret(ws, name);
    char *data = NULL;
    size_t len = 0;
    int r;
    rx_buf_init(out, WS_MAX_SECRET_BYTES);
    if (s == NULL)
        return rx_fail(err, C, "unknown secret %s", name);
    if (s->env) {
        const char *v = getenv(s->env);
        if (v == NULL)
            return rx_fail(err, C, "secret %s: environment variable %s is not set", name, s->env);
        r = rx_buf_adds(out, v);
    } else {
        if ((r = rx_fs_check(s->file, 1, C, err)) != 0 ||
            (r = rx_fs_read_file(s->file, WS_MAX_SECRET_BYTES, &data, &len, C, err)) != 0)
            return rx_fail_prefix(err, "secret %s: ", name);
        /* A file's one trailing newline is an editor's, not part of the secret. */
        if (len > 0 && data[len - 1] == '\n')
            len--;
        r = rx_buf_add(out, data, len);
        OPENSSL_cleanse(data, len);
        free(data);
    }
    if (r != 0)
        return rx_fail(err, C, "secret %s is larger than %d bytes", name, WS_MAX_SECRET_BYTES);
    return secret_check(name, out, err);
}
