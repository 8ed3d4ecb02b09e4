/* The "serve" section of rexec.json (serve_conf.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "jsonx.h"
#include "serve_conf.h"

#define C REXEC_ECONFIG

static const struct {
    const char *name;
    unsigned bit;
} verbs[] = {
    {"run", RX_VERB_RUN},       {"eval", RX_VERB_EVAL},     {"check", RX_VERB_CHECK},
    {"cancel", RX_VERB_CANCEL}, {"list", RX_VERB_LIST},     {"reload", RX_VERB_RELOAD},
    {"ping", RX_VERB_PING},     {"metrics", RX_VERB_METRICS}, {"approvals", RX_VERB_APPROVALS},
    {"approve", RX_VERB_APPROVE}, {"deny", RX_VERB_DENY},
};
#define N_VERBS (sizeof(verbs) / sizeof(verbs[0]))

unsigned rx_serve_op_verb(const char *op)
{
    if (strcmp(op, "hosts") == 0 || strcmp(op, "actions") == 0 || strcmp(op, "groups") == 0)
        return RX_VERB_LIST;
    if (strcmp(op, "watch") == 0)
        return RX_VERB_APPROVALS;
    for (size_t i = 0; i < N_VERBS; i++)
        if (strcmp(op, verbs[i].name) == 0 && verbs[i].bit != RX_VERB_LIST)
            return verbs[i].bit;
    return 0;
}

const char *rx_serve_verbs_str(unsigned v, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (size_t i = 0; i < N_VERBS; i++)
        if (v & verbs[i].bit) {
            int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", verbs[i].name);
            if (w < 0 || (size_t)w >= cap - n)
                break;
            n += (size_t)w;
        }
    if (n == 0)
        snprintf(out, cap, "nothing");
    return out;
}

unsigned rx_serve_socket_mode(const rx_serve_conf *c)
{
    if (c->socket_mode != 0)
        return c->socket_mode;
    if (c->n_clients == 0)
        return RX_SERVE_SOCKET_MODE_OWNER;
    return c->socket_group ? 0660u : 0666u;
}

static int verb_parse(const cJSON *it, const char *path, unsigned *out, rexec_error *err)
{
    int r = rx_json_want(it, path, cJSON_String, C, err);
    if (r != 0)
        return r;
    for (size_t i = 0; i < N_VERBS; i++)
        if (strcmp(it->valuestring, verbs[i].name) == 0) {
            *out |= verbs[i].bit;
            return 0;
        }
    return rx_json_fail(err, C, path, "\"%.40s\" is not a verb (run, eval, check, cancel, list, "
                                      "reload, ping, metrics, approvals, approve, deny)",
                                      it->valuestring);
}

static int load_name(const cJSON *o, const char *key, const char *path, char **out,
                     rexec_error *err)
{
    const char *s = NULL;
    char p[RX_JSON_PATH_MAX];
    int r = rx_json_get_string(o, key, path, 0, &s, C, err);
    if (r != 0 || s == NULL)
        return r;
    if (s[0] == 0 || s[0] == '-' || strlen(s) > 64 || strpbrk(s, ":/ \t\n") != NULL)
        return rx_json_fail(err, C, rx_json_path_key(p, sizeof(p), path, key),
                            "not a user or group name");
    return (*out = strdup(s)) == NULL ? REXEC_ENOMEM : 0;
}

static int load_client(const cJSON *o, const char *path, rx_serve_client *cl, rexec_error *err)
{
    static const char *const keys[] = {"user", "group", "verbs", NULL};
    const cJSON *arr = NULL, *it;
    char p[RX_JSON_PATH_MAX], pi[RX_JSON_PATH_MAX];
    size_t i = 0;
    int r;
    if ((r = rx_json_want(o, path, cJSON_Object, C, err)) != 0 ||
        (r = rx_json_check_keys(o, path, keys, C, err)) != 0 ||
        (r = load_name(o, "user", path, &cl->user, err)) != 0 ||
        (r = load_name(o, "group", path, &cl->group, err)) != 0 ||
        (r = rx_json_get_array(o, "verbs", path, 1, &arr, C, err)) != 0)
        return r;
    if ((cl->user == NULL) == (cl->group == NULL))
        return rx_json_fail(err, C, path, "give exactly one of \"user\" and \"group\"");
    rx_json_path_key(p, sizeof(p), path, "verbs");
    cJSON_ArrayForEach(it, arr) {
        rx_json_path_index(pi, sizeof(pi), p, i++);
        if ((r = verb_parse(it, pi, &cl->verbs, err)) != 0)
            return r;
    }
    if (cl->verbs == 0)
        return rx_json_fail(err, C, p, "grants nothing: list the verbs this client may use");
    if ((cl->verbs & RX_VERB_APPROVE) && (cl->verbs & RX_VERB_EXECUTING))
        return rx_json_fail(err, C, p, "grants \"approve\" with \"run\" or \"eval\": one user "
                            "would approve what it asks for; give approvers an entry (and a "
                            "user) of their own");
    cl->verbs |= RX_VERB_PING;
    return 0;
}

/* Two entries naming the same user add up: approve in one and run in the other is refused
 * as in one entry. (Groups are resolved when serve admits a peer: serve_peer.c.) */
static int check_approvers(const rx_serve_conf *c, rexec_error *err)
{
    char p[RX_JSON_PATH_MAX];
    for (size_t i = 0; i < c->n_clients; i++) {
        unsigned v = 0;
        if (c->clients[i].user == NULL)
            continue;
        for (size_t k = 0; k < c->n_clients; k++)
            if (c->clients[k].user && strcmp(c->clients[k].user, c->clients[i].user) == 0)
                v |= c->clients[k].verbs;
        if ((v & RX_VERB_APPROVE) && (v & RX_VERB_EXECUTING)) {
            rx_json_path_index(p, sizeof(p), "serve.clients", i);
            return rx_json_fail(err, C, p, "user \"%s\" gets \"approve\" and \"run\" or "
                                "\"eval\" from its entries: one user would approve what it "
                                "asks for", c->clients[i].user);
        }
    }
    return 0;
}

static int load_mode(const cJSON *o, rx_serve_conf *out, rexec_error *err)
{
    const char *s = NULL;
    char *end = NULL;
    int r = rx_json_get_string(o, "socket_mode", "serve", 0, &s, C, err);
    if (r != 0 || s == NULL)
        return r;
    unsigned long m = strtoul(s, &end, 8);
    if (s[0] != '0' || strlen(s) != 4 || *end != 0 || (m & 0600) != 0600 || (m & 0111) != 0)
        return rx_json_fail(err, C, "serve.socket_mode", "\"%.8s\" is not a socket mode: four "
                            "octal digits, owner read and write, no execute (\"0660\")", s);
    out->socket_mode = (unsigned)m;
    return 0;
}

int rx_serve_conf_load(const cJSON *root, rx_serve_conf *out, rexec_error *err)
{
    static const char *const keys[] = {"clients", "socket_mode", "socket_group", NULL};
    const cJSON *o = NULL, *arr = NULL, *it;
    char pi[RX_JSON_PATH_MAX];
    int r;
    memset(out, 0, sizeof(*out));
    if ((r = rx_json_get_object(root, "serve", "", 0, &o, C, err)) != 0 || o == NULL)
        return r;
    if ((r = rx_json_check_keys(o, "serve", keys, C, err)) != 0 ||
        (r = load_mode(o, out, err)) != 0 ||
        (r = load_name(o, "socket_group", "serve", &out->socket_group, err)) != 0 ||
        (r = rx_json_get_array(o, "clients", "serve", 0, &arr, C, err)) != 0 || arr == NULL)
        return r;
    size_t n = (size_t)cJSON_GetArraySize(arr);
    if (n > 0 && (out->clients = calloc(n, sizeof(*out->clients))) == NULL)
        return REXEC_ENOMEM;
    cJSON_ArrayForEach(it, arr) {
        rx_json_path_index(pi, sizeof(pi), "serve.clients", out->n_clients);
        r = load_client(it, pi, &out->clients[out->n_clients], err);
        out->n_clients++;
        if (r != 0)
            return r;
    }
    return check_approvers(out, err);
}

#define NOTIFY_ARGS_MAX 64
#define NOTIFY_TIMEOUT_MAX 600.0

static int notify_argv(const cJSON *arr, rx_serve_conf *c, rexec_error *err)
{
    const char *path = "approvals.notify.command";
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    const cJSON *it;
    if (n == 0 || n > NOTIFY_ARGS_MAX)
        return rx_json_fail(err, C, path, "give the program and its arguments (1 to %d strings)",
                            NOTIFY_ARGS_MAX);
    if ((c->notify_argv = calloc(n + 1, sizeof(char *))) == NULL)
        return REXEC_ENOMEM;
    cJSON_ArrayForEach(it, arr) {
        char pi[RX_JSON_PATH_MAX];
        rx_json_path_index(pi, sizeof(pi), path, i);
        if (!cJSON_IsString(it) || (i == 0 && it->valuestring[0] != '/'))
            return rx_json_fail(err, C, pi, i == 0 ? "the program: an absolute path (no shell "
                                "runs it)" : "expected a string");
        if ((c->notify_argv[i++] = strdup(it->valuestring)) == NULL)
            return REXEC_ENOMEM;
    }
    return 0;
}

int rx_notify_conf_load(const cJSON *root, rx_serve_conf *c, rexec_error *err)
{
    static const char *const keys[] = {"notify", NULL};
    static const char *const nkeys[] = {"command", "timeout_s", NULL};
    const cJSON *o = NULL, *n = NULL, *arr = NULL;
    double t = 10;
    int r;
    c->notify_timeout_s = 10;
    if ((r = rx_json_get_object(root, "approvals", "", 0, &o, C, err)) != 0 || o == NULL)
        return r;
    if ((r = rx_json_check_keys(o, "approvals", keys, C, err)) != 0 ||
        (r = rx_json_get_object(o, "notify", "approvals", 0, &n, C, err)) != 0 || n == NULL)
        return r;
    if ((r = rx_json_check_keys(n, "approvals.notify", nkeys, C, err)) != 0 ||
        (r = rx_json_get_array(n, "command", "approvals.notify", 1, &arr, C, err)) != 0 ||
        (r = rx_json_get_number(n, "timeout_s", "approvals.notify", 0, &t, C, err)) != 0)
        return r;
    if (!(t > 0 && t <= NOTIFY_TIMEOUT_MAX))
        return rx_json_fail(err, C, "approvals.notify.timeout_s", "from 0 (excluded) to %g s",
                            NOTIFY_TIMEOUT_MAX);
    c->notify_timeout_s = t;
    return notify_argv(arr, c, err);
}

void rx_serve_conf_free(rx_serve_conf *c)
{
    for (size_t i = 0; c && c->notify_argv && c->notify_argv[i]; i++)
        free(c->notify_argv[i]);
    if (c)
        free(c->notify_argv);
    for (size_t i = 0; c && i < c->n_clients; i++) {
        free(c->clients[i].user);
        free(c->clients[i].group);
    }
    if (c) {
        free(c->clients);
        free(c->socket_group);
        memset(c, 0, sizeof(*c));
    }
}
