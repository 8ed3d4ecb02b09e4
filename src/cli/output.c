/* What the CLI prints for a call, shared by direct runs and runs through `rexec serve`, so both
 * look the same. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"

void cli_show_check(const rexec_check_result *in, int json)
{
    rexec_check_result shown = *in, *r = &shown;
    shown.host = cli_redact(in->host);
    shown.error = cli_redact(in->error);
    shown.facts = cli_redact(in->facts ? in->facts : "");
    shown.containment = cli_redact(in->containment);
    shown.warning = cli_redact(in->warning);
    if (json) {
        char *t = rexec_check_result_to_json(r);
        printf("%s\n", t ? t : "{}");
        free(t);
    } else if (r->ok) {
        printf("%s: ok (%llu ms), containment %s\n", r->host, (unsigned long long)r->duration_ms,
               r->containment ? r->containment : "unknown");
        for (const char *p = r->facts; *p;) {
            const char *eol = strchr(p, '\n');
            int n = eol ? (int)(eol - p) : (int)strlen(p);
            printf("  %.*s\n", n, p);
            p += n + (eol != NULL);
        }
    } else {
        fprintf(stderr, "rexec: %s\n", r->error ? r->error : "check failed");
    }
    if (r->warning && !json)
        fprintf(stderr, "rexec: warning: %s\n", r->warning);
    fflush(stdout);
    free((char *)shown.host), free((char *)shown.error), free((char *)shown.facts);
    free((char *)shown.containment), free((char *)shown.warning);
}

/* Warnings always; debug lines (state transitions) only with REXEC_DEBUG (ud non-NULL). */
static void log_stderr(void *ud, int level, const char *msg)
{
    if (level == REXEC_LOG_DEBUG && ud == NULL)
        return;
    char *m = cli_redact(msg);
    fprintf(stderr, "rexec: %s: %s\n", level == REXEC_LOG_DEBUG ? "debug" : "warning", m);
    free(m);
}

int cli_ctx_new(rexec_ctx **out, uv_loop_t *loop, const char *workspace_dir, rexec_error *err)
{
    int r = rexec_ctx_new(out, loop, workspace_dir, err);
    static int debug = 1;
    cli_redact_workspace(workspace_dir);
    if (r == 0) {
        rexec_ctx_set_log(*out, log_stderr, getenv("REXEC_DEBUG") != NULL ? &debug : NULL);
        cli_redact_use(*out); /* its redactor from now on, until cli_ctx_close */
    }
    return r;
}

void cli_ctx_close(rexec_ctx *ctx)
{
    cli_redact_use(NULL);
    rexec_ctx_close(ctx, NULL, NULL);
}

/* ---- running out of file descriptors ------------------------------------------------------ */

int cli_uv_error(int rc, const char *what)
{
    char lim[32];
    if (rc == UV_EMFILE || rc == UV_ENFILE)
        return cli_error(71, "too many open files (RLIMIT_NOFILE is %s): %s: %s",
                         cli_nofile_limit(lim, sizeof(lim)), what, uv_strerror(rc));
    return cli_error(70, "%s: %s", what, uv_strerror(rc));
}

int cli_uv_loop_init(uv_loop_t *loop)
{
    int rc = uv_loop_init(loop);
    return rc == 0 ? 0 : cli_uv_error(rc, "cannot start the event loop");
}

int cli_lib_error(const rexec_error *e)
{
    char lim[32];
    if (cli_nofile_note(e->msg)[0])
        return cli_error(71, "too many open files (RLIMIT_NOFILE is %s): %s",
                         cli_nofile_limit(lim, sizeof(lim)), e->msg);
    return cli_error(rexec_err_exit_code(e->code), "%s", e->msg);
}

/* Takes up to need descriptors and gives them back: how many could be had. */
static int fds_free(int need)
{
    int fds[CLI_FDS_MAX], got = 0;
    if (need > CLI_FDS_MAX)
        need = CLI_FDS_MAX;
    fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fds[0] >= 0)
        for (got = 1; got < need; got++)
            if ((fds[got] = fcntl(fds[0], F_DUPFD_CLOEXEC, 0)) < 0)
                break;
    for (int i = 0; i < got; i++)
        close(fds[i]);
    return got;
}

int cli_fds_check(const char *what, int need)
{
    char lim[32];
    int got = fds_free(need);
    if (got >= need)
        return 0;
    return cli_error(71, "too many open files (RLIMIT_NOFILE is %s): %s needs %d free file "
                         "descriptors, %d %s free; raise the limit (ulimit -n)",
                     cli_nofile_limit(lim, sizeof(lim)), what, need, got, got == 1 ? "is" : "are");
}

long cli_fds_free(void)
{
    struct rlimit rl;
    long open_now = 0;
    DIR *d;
    struct dirent *de;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)LONG_MAX)
        return LONG_MAX;
    if ((d = opendir("/proc/self/fd")) == NULL) /* no /proc, or no descriptor for it */
        return fds_free(CLI_FDS_MAX);
    while ((de = readdir(d)) != NULL)
        open_now += de->d_name[0] != '.';
    closedir(d);
    open_now--; /* the listing's own descriptor */
    return (long)rl.rlim_cur - open_now;
}

/* ---- the one redaction path ------------------------------------------------------------------ */

static struct {
    char *dir;                /* the workspace to load secrets from */
    const rexec_ctx *ctx;     /* the loaded context, while it is open */
    rexec_redactor *own;      /* built from dir at the first use */
    int tried, loaded;        /* own was tried; it holds the workspace's secrets */
    int serve_text;           /* what is left to print came from rexec serve, redacted there */
} red;

static void redact_release(void)
{
    rexec_redactor_close(red.own);
    red.own = NULL;
    red.tried = red.loaded = 0;
}

void cli_redact_workspace(const char *dir)
{
    if (red.dir && strcmp(red.dir, dir) == 0)
        return;
    if (red.dir == NULL)
        atexit(redact_release); /* the values are wiped when rexec ends */
    free(red.dir);
    red.dir = strdup(dir);
    redact_release();
}

void cli_redact_use(const rexec_ctx *ctx)
{
    red.ctx = ctx;
}

/* The client (client.c) once its request is sent: every text still to be printed is a reply of
 * rexec serve, which redacted it with its own workspace's secrets, the only ones its calls are
 * handed, and the shapes (docs/redaction.md, "Through rexec serve"). Loading the caller's
 * workspace again (rexec.json, every parameter pattern compiled, the secret files read) would
 * cost the call ~0.7 ms and add nothing: the caller's workspace may not be serve's, one of
 * another user cannot read the secrets, and the streams never passed the client's redactor.
 * The light front (front.c), which has no redactor, prints the same. */
void cli_redact_serve_replies(void)
{
    red.serve_text = 1;
}

static void redact_load(void)
{
    rexec_error e;
    if (red.tried || red.ctx)
        return;
    red.tried = 1;
    red.loaded = red.dir && rexec_redactor_open(red.dir, &red.own, &e) == 0;
    if (!red.loaded) /* the workspace does not load: no secret is known, the shapes still are */
        (void)rexec_redactor_open(NULL, &red.own, &e);
}

int cli_redact_knows_secrets(void)
{
    redact_load();
    return red.ctx != NULL || red.loaded;
}

char *cli_redact(const char *s)
{
    char *t;
    if (s == NULL)
        return NULL;
    if (red.serve_text && red.ctx == NULL) /* serve's reply, redacted there */
        return (t = strdup(s)) ? t : strdup("[REDACTED:UNAVAILABLE]");
    redact_load();
    t = red.ctx ? rexec_ctx_redact(red.ctx, s, strlen(s), NULL)
                : rexec_redact(red.own, s, strlen(s), NULL); /* own NULL: the shapes only */
    return t ? t : strdup("[REDACTED:UNAVAILABLE]");
}

const char *cli_arg(const char *s)
{
    if (s == NULL || strlen(s) < 8 || cli_redact_knows_secrets())
        return s;
    return "[NOT SHOWN]";
}

/* Every string (values and keys) of a JSON tree, redacted in place. */
static void redact_json(cJSON *o)
{
    for (cJSON *it = o; it; it = it->next) {
        if (it->string) {
            char *k = cli_redact(it->string);
            if (!(it->type & cJSON_StringIsConst))
                free(it->string);
            it->string = k;
            it->type &= ~cJSON_StringIsConst;
        }
        if (cJSON_IsString(it) && !(it->type & cJSON_IsReference)) {
            char *v = cli_redact(it->valuestring);
            free(it->valuestring);
            it->valuestring = v;
        }
        if (it->child && !(it->type & cJSON_IsReference))
            redact_json(it->child);
    }
}

char *cli_redact_json_text(const char *text)
{
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    char *out;
    if (o == NULL)
        return text ? cli_redact(text) : NULL;
    redact_json(o);
    out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out ? out : strdup("{}");
}
