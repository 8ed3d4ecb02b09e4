/* `rexec hosts import-ansible INVENTORY [--groups]`: inventory entries from an Ansible inventory,
 * printed like `hosts import-ssh-config` (one "name": {...} member a line, to paste under
 * "hosts"; with --groups the groups, to paste under "groups"). INVENTORY is the JSON of
 * `ansible-inventory --list` (a file, or - for stdin), or any inventory ansible-inventory reads
 * (INI, YAML, a directory): then `ansible-inventory -i INVENTORY --list` is run. Reads no
 * workspace. What rexec has no field for is named on stderr, never silently dropped; a
 * password variable is named, never its value. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"

#define INVENTORY_MAX (64u << 20)  /* JSON text read or taken from ansible-inventory */
#define ANSIBLE_TIMEOUT_S 120      /* a dynamic inventory may be slow, never endless */
#define GROUP_DEPTH_MAX 32         /* children of children...: a cycle ends here */

extern char **environ;

typedef struct text {
    char *data;
    size_t len;
} text;

static int text_add(text *t, const char *p, size_t n)
{
    if (t->len + n > INVENTORY_MAX)
        return -1;
    char *d = realloc(t->data, t->len + n + 1);
    if (d == NULL)
        return -1;
    memcpy(d + t->len, p, n);
    t->data = d, t->len += n, d[t->len] = 0;
    return 0;
}

/* All of fd into t (at most INVENTORY_MAX); deadline: monotonic seconds, or 0 for none. */
static int read_fd(int fd, text *t, double deadline)
{
    char buf[65536];
    for (;;) {
        if (deadline > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            double left = deadline - ((double)ts.tv_sec + ts.tv_nsec / 1e9);
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) == 0)
                return -ETIMEDOUT;
        }
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n == 0)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (text_add(t, buf, (size_t)n) != 0)
            return -EFBIG;
    }
}

/* `ansible-inventory -i path --list` into t; its stderr is the user's (its warnings). */
static int run_ansible_inventory(const char *path, text *t)
{
    int fds[2], rc, status;
    pid_t pid;
    char *argv[] = {"ansible-inventory", "-i", (char *)path, "--list", NULL};
    posix_spawn_file_actions_t fa;
    struct timespec ts;
    if (pipe(fds) != 0)
        return cli_error(71, "import-ansible: pipe: %s", strerror(errno));
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", 0, 0);
    rc = posix_spawnp(&pid, "ansible-inventory", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return cli_error(78, "import-ansible: cannot run ansible-inventory: %s (install "
                             "ansible-core, or give the JSON of `ansible-inventory --list`)",
                         strerror(rc));
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    rc = read_fd(fds[0], t, (double)ts.tv_sec + ts.tv_nsec / 1e9 + ANSIBLE_TIMEOUT_S);
    close(fds[0]);
    if (rc != 0)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (rc != 0)
        return cli_error(78, "import-ansible: ansible-inventory -i %s --list: %s", path,
                         rc == -ETIMEDOUT ? "no answer within 120 s" : strerror(-rc));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return cli_error(78, "import-ansible: ansible-inventory -i %s --list failed (exit %d; "
                             "its message is above)", path,
                         WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}

/* The inventory's JSON: the file itself when it is JSON ("-": stdin), else ansible-inventory's. */
static int load_inventory(const char *path, cJSON **root)
{
    text t = {0};
    int fd = strcmp(path, "-") == 0 ? 0 : -1, rc = 0;
    struct stat st;
    /* ansible-inventory only warns about a source it cannot find, and lists nothing */
    if (fd < 0 && stat(path, &st) != 0)
        return cli_error(78, "import-ansible: %s: %s", path, strerror(errno));
    if (fd < 0 && S_ISREG(st.st_mode))
        fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        rc = read_fd(fd, &t, 0);
        if (fd != 0)
            close(fd);
        if (rc != 0)
            return free(t.data), cli_error(78, "import-ansible: %s: %s", path, strerror(-rc));
    }
    const char *p = t.data ? t.data + strspn(t.data, " \t\r\n") : "";
    if (*p != '{' && strcmp(path, "-") != 0) { /* INI, YAML, a directory, a script */
        free(t.data), t = (text){0};
        if ((rc = run_ansible_inventory(path, &t)) != 0)
            return free(t.data), rc;
    }
    *root = t.data ? cJSON_Parse(t.data) : NULL;
    free(t.data);
    if (!cJSON_IsObject(*root))
        return cJSON_Delete(*root), cli_error(78, "import-ansible: %s: not the JSON object of "
                                                  "`ansible-inventory --list`", path);
    return 0;
}

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 64 && s[0] != '-' && s[0] != '.' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    char *m = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&m, fmt, ap);
    va_end(ap);
    if (r < 0)
        return;
    char *shown = cli_redact(m);
    fprintf(stderr, "rexec: import-ansible: %s\n", shown);
    free(shown), free(m);
}

/* A host variable as text (the first of names that is set); NULL when absent. A Jinja template
 * is not a value ansible-inventory resolved: named on stderr and left out. */
static const char *var(const cJSON *vars, const char *host, const char *const *names, char *num,
                       size_t numlen)
{
    for (; *names; names++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(vars, *names);
        if (cJSON_IsNumber(v)) {
            snprintf(num, numlen, "%d", v->valueint);
            return num;
        }
        if (cJSON_IsString(v) && strstr(v->valuestring, "{{") != NULL) {
            note("%s: %s is a template ansible resolves at run time: left out", host, *names);
            return NULL;
        }
        if (cJSON_IsString(v))
            return v->valuestring;
    }
    return NULL;
}

/* "~/x" as the user's home would make it. */
static char *expand_home(const char *p)
{
    const char *home = getenv("HOME");
    const struct passwd *pw;
    char *out = NULL;
    if (strncmp(p, "~/", 2) != 0)
        return strdup(p);
    if ((home == NULL || *home == 0) && (pw = getpwuid(geteuid())) != NULL)
        home = pw->pw_dir;
    return asprintf(&out, "%s%s", home ? home : "", p + 1) < 0 ? NULL : out;
}

/* The next word of ssh arguments (blanks split, '...' and "..." quote); NULL at the end. */
static char *next_word(const char **s, char *buf, size_t len)
{
    size_t n = 0;
    char q = 0;
    *s += strspn(*s, " \t");
    if (**s == 0)
        return NULL;
    for (; **s && (q || (**s != ' ' && **s != '\t')); (*s)++) {
        if (!q && (**s == '\'' || **s == '"'))
            q = **s;
        else if (q && **s == q)
            q = 0;
        else if (n + 1 < len)
            buf[n++] = **s;
    }
    buf[n] = 0;
    return buf;
}

/* The ProxyJump of ssh arguments (-J X, -JX, -o ProxyJump=X, -oProxyJump=X), or "". */
static void proxy_jump_of(const char *args, char *out, size_t len)
{
    char w[1024];
    int want_j = 0, want_o = 0;
    out[0] = 0;
    while (args && next_word(&args, w, sizeof(w))) {
        const char *v = NULL;
        if (want_j)
            v = w;
        else if (want_o || strncmp(w, "-o", 2) == 0) {
            const char *o = want_o ? w : w + 2;
            if (*o == 0) {
                want_o = 1;
                continue;
            }
            if (strncasecmp(o, "ProxyJump", 9) == 0 && (o[9] == '=' || o[9] == ' '))
                v = o + 10;
        } else if (strncmp(w, "-J", 2) == 0) {
            want_j = w[2] == 0;
            v = w[2] ? w + 2 : NULL;
        }
        want_o = 0, want_j = want_j && v == NULL;
        if (v)
            snprintf(out, len, "%s", v);
    }
}

/* X = [user@]host[:port][,...]: the host of its last hop ("ssh://" and the port dropped). */
static void jump_host(const char *x, char *out, size_t len)
{
    const char *last = strrchr(x, ',');
    last = last ? last + 1 : x;
    if (strncmp(last, "ssh://", 6) == 0)
        last += 6;
    const char *at = strrchr(last, '@');
    snprintf(out, len, "%s", at ? at + 1 : last);
    out[strcspn(out, ":/")] = 0;
}

/* Each setting's variables, the one that wins first: ansible's ssh plugin takes the last of its
 * list that is set (ansible_host, then ansible_ssh_host, ...). */
static const char *const HOST_VARS[] = {"ansible_ssh_host", "ansible_host", NULL};
static const char *const PORT_VARS[] = {"ansible_ssh_port", "ansible_port", NULL};
static const char *const USER_VARS[] = {"ansible_ssh_user", "ansible_user", NULL};
static const char *const KEY_VARS[] = {"ansible_ssh_private_key_file", "ansible_private_key_file", NULL};
static const char *const ARGS_VARS[] = {"ansible_ssh_common_args", NULL};
static const char *const EXTRA_VARS[] = {"ansible_ssh_extra_args", NULL};

/* The inventory name of the jump host h: a host of that name, else the host whose address it is. */
static const char *jump_name(const cJSON *hostvars, const char *h)
{
    const cJSON *it;
    if (cJSON_GetObjectItemCaseSensitive(hostvars, h) != NULL)
        return h;
    cJSON_ArrayForEach(it, hostvars) /* quietly: each host's own entry names its templates */
        for (const char *const *n = HOST_VARS; *n; n++) {
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(it, *n);
            if (cJSON_IsString(a)) {
                if (strcmp(a->valuestring, h) == 0)
                    return it->string;
                break;
            }
        }
    return NULL;
}

static void add_proxy_jump(cJSON *o, const cJSON *hostvars, const cJSON *vars, const char *name)
{
    char num[32], pj[1024] = "", host[1024];
    const char *args = var(vars, name, ARGS_VARS, num, sizeof(num));
    const char *extra = var(vars, name, EXTRA_VARS, num, sizeof(num));
    proxy_jump_of(args, pj, sizeof(pj));
    if (!pj[0])
        proxy_jump_of(extra, pj, sizeof(pj));
    if ((args && strcasestr(args, "ProxyCommand")) || (extra && strcasestr(extra, "ProxyCommand")))
        note("%s: a ProxyCommand in its ssh arguments is not followed (rexec jumps with "
             "\"proxy_jump\" only)", name);
    if (!pj[0] || strcasecmp(pj, "none") == 0)
        return;
    jump_host(pj, host, sizeof(host));
    if (strchr(pj, ','))
        note("%s: ProxyJump %s has several hops: the last one is kept (give that host its own "
             "\"proxy_jump\")", name, pj);
    const char *j = jump_name(hostvars, host);
    if (j == NULL)
        note("%s: its ProxyJump host %s is not in the inventory: add it under \"hosts\"", name, host);
    cJSON_AddStringToObject(o, "proxy_jump", j ? j : host);
}

/* The key ansible gives, else what ssh would use: the agent, else a default key file. */
static void add_key(cJSON *o, const cJSON *vars, const char *name)
{
    static const char *const defaults[] = {"~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa"};
    char num[32];
    const char *k = var(vars, name, KEY_VARS, num, sizeof(num)), *sock = getenv("SSH_AUTH_SOCK");
    struct stat st;
    char *path = NULL;
    if (k && (path = expand_home(k)) != NULL) {
        cJSON_AddStringToObject(o, "key", path);
        free(path);
        return;
    }
    if (sock && *sock) {
        cJSON_AddStringToObject(o, "auth", "agent");
        return;
    }
    for (size_t i = 0; i < sizeof(defaults) / sizeof(*defaults); i++, free(path))
        if ((path = expand_home(defaults[i])) != NULL && stat(path, &st) == 0) {
            cJSON_AddStringToObject(o, "key", path);
            free(path);
            return;
        }
    note("%s: no ansible_ssh_private_key_file, no ssh-agent and no ~/.ssh/id_* key: give "
         "\"key\"", name);
}

static cJSON *host_entry(const cJSON *hostvars, const char *name)
{
    static const char *const secret_vars[] = {"ansible_password", "ansible_ssh_pass",
                                              "ansible_ssh_password", NULL};
    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(hostvars, name);
    char num[32];
    const char *addr = var(vars, name, HOST_VARS, num, sizeof(num));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "address", addr ? addr : name);
    const char *port = var(vars, name, PORT_VARS, num, sizeof(num));
    if (port && atoi(port) >= 1 && atoi(port) <= 65535)
        cJSON_AddNumberToObject(o, "port", atoi(port));
    else if (port)
        note("%s: ansible_port \"%s\" is not a port: left out", name, port);
    const char *user = var(vars, name, USER_VARS, num, sizeof(num));
    if (user)
        cJSON_AddStringToObject(o, "user", user);
    add_key(o, vars, name);
    add_proxy_jump(o, hostvars, vars, name);
    for (const char *const *s = secret_vars; *s; s++)
        if (cJSON_GetObjectItemCaseSensitive(vars, *s))
            note("%s: %s is not used (rexec logs in with keys only)", name, *s);
    cJSON_AddStringToObject(o, "description", "from the Ansible inventory");
    return o;
}

/* Prints `  "name": VALUE` members, one a line, comma-separated; returns how many. */
static int print_member(const char *name, cJSON *value, int n)
{
    char *v = cJSON_PrintUnformatted(value), *shown = v ? cli_redact(v) : NULL;
    cJSON *k = cJSON_CreateString(name);
    char *key = k ? cJSON_PrintUnformatted(k) : NULL, *skey = key ? cli_redact(key) : NULL;
    if (shown && skey)
        printf("%s  %s: %s", n ? ",\n" : "", skey, shown);
    free(v), free(shown), free(key), free(skey);
    cJSON_Delete(k);
    cJSON_Delete(value);
    return n + 1;
}

/* _meta.hostvars: every host's variables, as ansible-inventory resolved them. */
static const cJSON *hostvars_of(const cJSON *root)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "_meta"),
                                            "hostvars");
}

/* Every host name: the keys of _meta.hostvars, then any group member not among them. */
static void collect_hosts(const cJSON *root, cJSON *names)
{
    const cJSON *g, *h;
    const cJSON *hv = hostvars_of(root);
    cJSON_ArrayForEach(h, hv)
        cJSON_AddItemToObject(names, h->string, cJSON_CreateTrue());
    cJSON_ArrayForEach(g, root)
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(g, "hosts"))
            if (cJSON_IsString(h) && !cJSON_GetObjectItemCaseSensitive(names, h->valuestring))
                cJSON_AddItemToObject(names, h->valuestring, cJSON_CreateTrue());
}

/* A host rexec can have: a rexec name, reached over ssh. quiet: say nothing when it is not. */
static int importable(const cJSON *hostvars, const char *name, int quiet)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(hostvars, name), "ansible_connection");
    if (!name_ok(name)) {
        if (!quiet)
            note("skipped %s: not a rexec host name (1-64 of [A-Za-z0-9._-])", name);
        return 0;
    }
    if (cJSON_IsString(c) && strcmp(c->valuestring, "ssh") != 0 &&
        strcmp(c->valuestring, "paramiko") != 0) {
        if (!quiet)
            note("skipped %s: ansible_connection is %s, not ssh", name, c->valuestring);
        return 0;
    }
    return 1;
}

static int print_hosts(const cJSON *root)
{
    cJSON *names = cJSON_CreateObject();
    const cJSON *h, *hv = hostvars_of(root);
    int n = 0;
    collect_hosts(root, names);
    cJSON_ArrayForEach(h, names)
        if (importable(hv, h->string, 0))
            n = print_member(h->string, host_entry(hv, h->string), n);
    cJSON_Delete(names);
    return n;
}

/* The hosts of group g and of its children, each once, into out (an object used as a set). */
static void group_members(const cJSON *root, const cJSON *g, cJSON *out, int depth)
{
    const cJSON *h;
    if (depth > GROUP_DEPTH_MAX)
        return;
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(g, "hosts"))
        if (cJSON_IsString(h) && !cJSON_GetObjectItemCaseSensitive(out, h->valuestring))
            cJSON_AddItemToObject(out, h->valuestring, cJSON_CreateTrue());
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(g, "children"))
        if (cJSON_IsString(h))
            group_members(root, cJSON_GetObjectItemCaseSensitive(root, h->valuestring), out,
                          depth + 1);
}

/* Groups, children flattened (rexec groups list hosts), each with the hosts the host listing
 * imports; Ansible's implicit all and ungrouped and groups left with no host are left out. */
static int print_groups(const cJSON *root)
{
    const cJSON *g, *h;
    int n = 0;
    cJSON_ArrayForEach(g, root) {
        if (strcmp(g->string, "_meta") == 0 || strcmp(g->string, "all") == 0 ||
            strcmp(g->string, "ungrouped") == 0)
            continue;
        if (!name_ok(g->string)) {
            note("skipped group %s: not a rexec group name (1-64 of [A-Za-z0-9._-])", g->string);
            continue;
        }
        cJSON *set = cJSON_CreateObject(), *list = cJSON_CreateArray();
        group_members(root, g, set, 0);
        cJSON_ArrayForEach(h, set)
            if (importable(hostvars_of(root), h->string, 1))
                cJSON_AddItemToArray(list, cJSON_CreateString(h->string));
        cJSON_Delete(set);
        if (cJSON_GetArraySize(list) > 0)
            n = print_member(g->string, list, n);
        else
            cJSON_Delete(list);
    }
    return n;
}

int cli_import_ansible(int argc, char **argv)
{
    const char *path = NULL;
    int groups = 0, rc;
    cJSON *root = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--groups") == 0)
            groups = 1;
        else if (path == NULL && (argv[i][0] != '-' || strcmp(argv[i], "-") == 0))
            path = argv[i];
        else
            return cli_error(64, "hosts import-ansible: unexpected argument \"%s\" (see `rexec "
                                 "help hosts`)", cli_arg(argv[i]));
    }
    if (path == NULL)
        return cli_error(64, "usage: rexec hosts import-ansible INVENTORY [--groups] (INVENTORY: "
                             "the JSON of `ansible-inventory --list`, - for stdin, or an "
                             "inventory ansible-inventory reads)");
    if ((rc = load_inventory(path, &root)) != 0)
        return rc;
    int n = groups ? print_groups(root) : print_hosts(root);
    cJSON_Delete(root);
    if (n == 0)
        fprintf(stderr, "rexec: import-ansible: no %s in the inventory\n", groups ? "group" : "host");
    else
        printf("\n");
    fflush(stdout);
    return n ? 0 : 1;
}
