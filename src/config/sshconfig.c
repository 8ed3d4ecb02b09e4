/* `ssh -G` as the one reader of ssh_config (see sshconfig.h). */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "fsutil.h"
#include "jsonx.h"
#include "sshconfig.h"

#define C REXEC_ECONFIG
#define SSH_G_MAX_OUT (256 * 1024)

extern char **environ;

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int alias_ok(const char *a)
{
    size_t n = strlen(a);
    if (n == 0 || n > 255 || a[0] == '-')
        return 0;
    return strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@%+-") == n;
}

/* Reads both pipes until EOF or the deadline. Returns 0, or -1 on timeout/overflow. */
static int drain(int out_fd, int err_fd, rx_buf *out, rx_buf *errs, double deadline)
{
    struct pollfd p[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};
    rx_buf *dst[2] = {out, errs};
    int open_fds = 2;
    char buf[4096];
    while (open_fds > 0) {
        double left = deadline - mono_now();
        if (left <= 0 || poll(p, 2, (int)(left * 1000) + 1) == 0)
            return -1;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(p[i].fd, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                p[i].fd = -1;
                open_fds--;
            } else if (rx_buf_add(dst[i], buf, (size_t)n) != 0 && i == 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* Runs argv (ssh ...) with stdin from /dev/null; its stdout into out, first stderr line into
 * why. Returns the exit status, or -1 (why set). */
static int run_capture(char *const argv[], rx_buf *out, char *why, size_t whylen)
{
    int po[2], pe[2], status = 0;
    pid_t pid;
    rx_buf errs;
    posix_spawn_file_actions_t fa;
    if (pipe2(po, O_CLOEXEC) != 0)
        return snprintf(why, whylen, "pipe: %s", strerror(errno)), -1;
    if (pipe2(pe, O_CLOEXEC) != 0) {
        close(po[0]), close(po[1]);
        return snprintf(why, whylen, "pipe: %s", strerror(errno)), -1;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]), close(pe[1]);
    if (r != 0) {
        close(po[0]), close(pe[0]);
        snprintf(why, whylen, "cannot run %s: %s (install openssh-client)", argv[0], strerror(r));
        return -1;
    }
    rx_buf_init(&errs, 4096);
    int d = drain(po[0], pe[0], out, &errs, mono_now() + RX_SSH_G_TIMEOUT_S);
    close(po[0]), close(pe[0]);
    if (d != 0)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (d != 0) {
        snprintf(why, whylen, "no answer within %.0f s (or more than %d bytes)", RX_SSH_G_TIMEOUT_S,
                 SSH_G_MAX_OUT);
        rx_buf_free(&errs);
        return -1;
    }
    const char *e = errs.data ? (const char *)errs.data : "";
    snprintf(why, whylen, "%.*s", (int)strcspn(e, "\r\n"), e);
    rx_buf_free(&errs);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* "~/x" -> "$HOME/x" (ssh -G prints IdentityFile and UserKnownHostsFile unexpanded). */
static char *expand_tilde(const char *v)
{
    const struct passwd *pw;
    const char *home = getenv("HOME");
    if (strncmp(v, "~/", 2) != 0)
        return strdup(v);
    if ((home == NULL || *home == '\0') && (pw = getpwuid(geteuid())) != NULL)
        home = pw->pw_dir;
    char *s = malloc(strlen(home ? home : "") + strlen(v));
    if (s)
        sprintf(s, "%s%s", home ? home : "", v + 1);
    return s;
}

static int set_field(rx_ssh_g *g, const char *k, const char *v)
{
    char **dst = NULL;
    if (strcmp(k, "hostname") == 0)
        dst = &g->hostname;
    else if (strcmp(k, "user") == 0)
        dst = &g->user;
    else if (strcmp(k, "proxyjump") == 0 && strcmp(v, "none") != 0)
        dst = &g->proxyjump;
    else if (strcmp(k, "port") == 0)
        g->port = atoi(v);
    else if (strcmp(k, "identitiesonly") == 0)
        g->identities_only = strcmp(v, "yes") == 0;
    else if (strcmp(k, "identityagent") == 0)
        g->agent_none = strcmp(v, "none") == 0;
    else if (strcmp(k, "identityfile") == 0 && g->n_identityfile < RX_SSH_G_MAX_FILES)
        return (g->identityfile[g->n_identityfile++] = expand_tilde(v)) ? 0 : REXEC_ENOMEM;
    else if (strcmp(k, "userknownhostsfile") == 0) {
        /* one line, several files separated by blanks */
        char *copy = strdup(v), *save = NULL;
        for (char *t = copy ? strtok_r(copy, " ", &save) : NULL; t && g->n_knownhosts < RX_SSH_G_MAX_FILES;
             t = strtok_r(NULL, " ", &save))
            g->knownhosts[g->n_knownhosts++] = expand_tilde(t);
        free(copy);
        return copy ? 0 : REXEC_ENOMEM;
    }
    if (dst == NULL)
        return 0;
    free(*dst);
    return (*dst = strdup(v)) ? 0 : REXEC_ENOMEM;
}

static int parse_g(char *text, rx_ssh_g *g)
{
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        if (sp == NULL)
            continue;
        *sp = '\0';
        line[strcspn(line, "\r")] = '\0';
        sp[1 + strcspn(sp + 1, "\r")] = '\0';
        if (set_field(g, line, sp + 1) != 0)
            return REXEC_ENOMEM;
    }
    return 0;
}

int rx_ssh_g_run(const char *alias, rx_ssh_g *out, rexec_error *err)
{
    const char *cfg = getenv("REXEC_SSH_CONFIG");
    char why[256] = "", a[260];
    rx_buf text;
    memset(out, 0, sizeof(*out));
    if (!alias_ok(alias))
        return rx_fail(err, C, "\"%s\" is not an ssh alias rexec passes to ssh -G (1-255 of "
                               "[A-Za-z0-9._@%%+-], not starting with '-')", alias);
    snprintf(a, sizeof(a), "%s", alias);
    char *argv_f[] = {"ssh", "-F", (char *)cfg, "-G", a, NULL};
    char *argv_d[] = {"ssh", "-G", a, NULL};
    rx_buf_init(&text, SSH_G_MAX_OUT);
    int st = run_capture(cfg && *cfg ? argv_f : argv_d, &text, why, sizeof(why));
    if (st != 0) {
        rx_buf_free(&text);
        if (st < 0)
            return rx_fail(err, C, "ssh -G %s: %s", alias, why);
        return rx_fail(err, C, "ssh -G %s failed (exit %d)%s%s", alias, st, *why ? ": " : "", why);
    }
    int r = text.data ? parse_g((char *)text.data, out) : 0;
    rx_buf_free(&text);
    if (r != 0)
        return rx_ssh_g_free(out), rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (out->hostname == NULL || out->port < 1 || out->port > 65535)
        return rx_ssh_g_free(out),
               rx_fail(err, C, "ssh -G %s printed no usable hostname/port", alias);
    return 0;
}

void rx_ssh_g_free(rx_ssh_g *g)
{
    free(g->hostname), free(g->user), free(g->proxyjump);
    for (int i = 0; i < g->n_identityfile; i++)
        free(g->identityfile[i]);
    for (int i = 0; i < g->n_knownhosts; i++)
        free(g->knownhosts[i]);
    memset(g, 0, sizeof(*g));
}

/* ---- import --------------------------------------------------------------------------------- */

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 64 && s[0] != '-' && s[0] != '.' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* Whether ssh would log in with the agent (sshconfig.h, rx_ssh_config_import). */
static int uses_agent(const rx_ssh_g *g)
{
    const char *sock = getenv("SSH_AUTH_SOCK");
    struct stat st;
    int any_file = 0;
    if (sock == NULL || *sock == '\0' || g->agent_none)
        return 0;
    for (int i = 0; i < g->n_identityfile; i++)
        any_file |= stat(g->identityfile[i], &st) == 0;
    return !any_file || !g->identities_only;
}

static int import_one(const char *name, rx_buf *out, int *first, rexec_error *err)
{
    rx_ssh_g g;
    char desc[1024];
    int r = rx_ssh_g_run(name, &g, err);
    if (r != 0)
        return r;
    int n = snprintf(desc, sizeof(desc), "ssh -G: %s%s%s port %d", g.user ? g.user : "",
                     g.user ? "@" : "", g.hostname, g.port);
    if (g.proxyjump && n > 0 && (size_t)n < sizeof(desc))
        snprintf(desc + n, sizeof(desc) - (size_t)n, " via %s", g.proxyjump);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "ssh_alias", name);
    if (uses_agent(&g))
        cJSON_AddStringToObject(o, "auth", "agent");
    cJSON_AddStringToObject(o, "description", desc);
    cJSON *k = cJSON_CreateString(name);
    char *js = cJSON_PrintUnformatted(o), *key = k ? cJSON_PrintUnformatted(k) : NULL;
    cJSON_Delete(o);
    cJSON_Delete(k);
    r = js && key ? rx_buf_addf(out, "%s  %s: %s", *first ? "" : ",\n", key, js) : REXEC_ENOMEM;
    *first = 0;
    free(js), free(key);
    rx_ssh_g_free(&g);
    return r;
}

/* The Host names are taken from the file's "Host" lines (only to know which names exist:
 * every value comes from ssh -G); patterns (* ? !) are not hosts and are left out. */
int rx_ssh_config_import(const char *pattern, rx_buf *out, rx_buf *notes, rexec_error *err)
{
    const char *cfg = getenv("REXEC_SSH_CONFIG");
    char path[4096], *text = NULL, *save = NULL;
    size_t len = 0;
    int r, first = 1;
    if (cfg && *cfg)
        snprintf(path, sizeof(path), "%s", cfg);
    else {
        char *p = expand_tilde("~/.ssh/config");
        snprintf(path, sizeof(path), "%s", p ? p : "");
        free(p);
    }
    if ((r = rx_fs_read_file(path, 4u << 20, &text, &len, C, err)) != 0)
        return r;
    for (char *line = strtok_r(text, "\n", &save); r == 0 && line; line = strtok_r(NULL, "\n", &save)) {
        char *s2 = NULL, *tok = strtok_r(line, " \t=\r", &s2);
        if (tok == NULL || strcasecmp(tok, "Host") != 0)
            continue;
        while (r == 0 && (tok = strtok_r(NULL, " \t\r", &s2)) != NULL) {
            if (strpbrk(tok, "*?!\"") != NULL || (pattern && fnmatch(pattern, tok, 0) != 0))
                continue;
            if (!name_ok(tok)) {
                rx_buf_addf(notes, "skipped %s: not a rexec host name (1-64 of [A-Za-z0-9._-])\n", tok);
                continue;
            }
            r = import_one(tok, out, &first, err);
        }
    }
    free(text);
    if (r == 0)
        r = rx_buf_adds(out, first ? "" : "\n");
    return r;
}

int rexec_ssh_config_import(const char *pattern, char **text, char **notes, rexec_error *err)
{
    rx_buf out, nb;
    rx_buf_init(&out, 16u << 20);
    rx_buf_init(&nb, 1u << 20);
    int r = rx_ssh_config_import(pattern, &out, &nb, err);
    if (r == 0 && (rx_buf_adds(&out, "") != 0 || rx_buf_adds(&nb, "") != 0))
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (r != 0) {
        rx_buf_free(&out), rx_buf_free(&nb);
        return r;
    }
    *text = (char *)rx_buf_steal(&out, NULL);
    *notes = (char *)rx_buf_steal(&nb, NULL);
    return 0;
}
