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
    {"ping", RX_VERB_PING},     {"metrics", RX_VERB_METRICS},
};
#define N_VERBS (sizeof(verbs) / sizeof(verbs[0]))

unsigned rx_serve_op_verb(const char *op)
{
    if (strcmp(op, "hosts") == 0 || strcmp(op, "actions") == 0 || strcmp(op, "groups") == 0)
        return RX_VERB_LIST;
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
    if (strcmp(it->valuestring, "approve") == 0)
        return rx_json_fail(err, C, path, "\"approve\" cannot be granted: a challenge is "
                                          "approved only at the operator's terminal (rexec "
                                          "approve), never through serve");
    for (size_t i = 0; i < N_VERBS; i++)
        if (strcmp(it->valuestring, verbs[i].name) == 0) {
            *out |= verbs[i].bit;
            return 0;
        }
    return rx_json_fail(err, C, path, "\"%.40s\" is not a verb (run, eval, check, cancel, list, "
                                      "reload, ping, metrics)", it->valuestring);
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
    cl->verbs |= RX_VERB_PING;
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
    return 0;
}

void rx_serve_conf_free(rx_serve_conf *c)
{
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
