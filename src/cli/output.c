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

void cli_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a closed pipe: nothing sensible left to do with the bytes */
        c += w;
        n -= (size_t)w;
    }
}

/* "[host] " then the bytes, with write(2): output may hold NUL bytes, which a printf %.*s
 * would stop at. */
static void prefixed_line(int fd, const char *host, const char *data, size_t len)
{
    cli_write_all(fd, "[", 1);
    cli_write_all(fd, host, strlen(host));
    cli_write_all(fd, "] ", 2);
    cli_write_all(fd, data, len);
}

/* Several hosts: each line becomes "[host] line", so interleaved output stays readable. A line
 * is kept until its newline comes. */
void cli_prefix_write(cli_prefixer *p, int stream, const void *data, size_t len)
{
    int idx = stream == REXEC_STDOUT ? 0 : 1;
    const char *d = data, *end = d + len;
    while (d < end) {
        const char *nl = memchr(d, '\n', (size_t)(end - d));
        size_t take = nl ? (size_t)(nl - d) + 1 : (size_t)(end - d);
        char *b = realloc(p->partial[idx], p->len[idx] + take);
        if (b == NULL)
            return;
        p->partial[idx] = b;
        memcpy(b + p->len[idx], d, take);
        p->len[idx] += take;
        d += take;
        if (nl) {
            prefixed_line(idx + 1, p->host, b, p->len[idx]);
            p->len[idx] = 0;
        }
    }
}

void cli_prefix_flush(cli_prefixer *p)
{
    for (int idx = 0; idx < 2; idx++) {
        if (p->len[idx]) {
            prefixed_line(idx + 1, p->host, p->partial[idx], p->len[idx]);
            cli_write_all(idx + 1, "\n", 1);
        }
        free(p->partial[idx]);
        p->partial[idx] = NULL;
        p->len[idx] = 0;
    }
}

/* --json: the result object; otherwise what a person needs beyond the streams. */
void cli_note_one_user(void)
{
    dprintf(2, "rexec: note: the challenge was written by this user, who can also read approvals/ "
               "and approve it: approvals are only as strong as that user's discipline. Run "
               "callers as another user through rexec serve (docs/gate.md, \"Two users\")\n");
}

/* The result's text fields through cli_redact (the streams are the library's, or serve's,
 * redacted already): a direct call's host and action are what the caller typed. */
#define RESULT_TEXT_FIELDS(X)                                                                   \
    X(run_id) X(host) X(action) X(decision) X(reason) X(effective_risk) X(signal)               \
    X(stdout_sha256) X(containment) X(evidence) X(challenge_id) X(rendered) X(error) X(batch_id)

/* eval's line: "lab1: ALLOW (ALLOW_LEVEL, L0)"; a reason that only repeats the decision
 * (REQUIRES_APPROVAL) is left out: "lab1: REQUIRES_APPROVAL (L2)". */
static void show_decision(const rexec_result *res)
{
    const char *risk = res->effective_risk ? res->effective_risk : "-";
    if (res->reason && strcmp(res->reason, res->decision) != 0)
        dprintf(1, "%s: %s (%s, %s)", res->host, res->decision, res->reason, risk);
    else
        dprintf(1, "%s: %s (%s)", res->host, res->decision, risk);
    dprintf(1, "%s%s\n", res->rendered ? "\n  would run: " : "", res->rendered ? res->rendered : "");
}

/* In text mode, whether the result prints anything of its own (a plain success prints none). */
static int text_says_something(const rexec_result *res, int eval)
{
    return res->error || res->challenge_id || res->timed_out || res->truncated ||
           (eval && res->decision);
}

void cli_show_result(const rexec_result *in, int json, int eval)
{
    rexec_result shown = *in, *res = &shown;
    if (!json && !text_says_something(in, eval))
        return; /* nothing to redact: no redactor is built */
#define REDACT_FIELD_(f) shown.f = cli_redact(in->f);
    RESULT_TEXT_FIELDS(REDACT_FIELD_)
#undef REDACT_FIELD_
    if (json) {
        char *text = rexec_result_to_json(res);
        if (text) {
            cli_write_all(1, text, strlen(text));
            cli_write_all(1, "\n", 1);
        }
        free(text);
    } else {
        if (res->error)
            dprintf(2, "rexec: %s%s\n", res->error, cli_nofile_note(res->error));
        if (res->challenge_id)
            dprintf(2, "rexec: approval required: challenge %s\n"
                       "rexec: an operator runs `rexec approve %s` at a terminal, then call again "
                       "with --grant %s\n",
                    res->challenge_id, res->challenge_id, res->challenge_id);
        if (res->timed_out)
            dprintf(2, "rexec: %s: the action hit its timeout and was stopped\n", res->host);
        if (res->truncated)
            dprintf(2, "rexec: %s: output truncated at max_output_bytes\n", res->host);
        if (eval && res->decision)
            show_decision(res);
    }
#define FREE_FIELD_(f) free((char *)shown.f);
    RESULT_TEXT_FIELDS(FREE_FIELD_)
#undef FREE_FIELD_
}

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

const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != 0)
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
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

/* The soft RLIMIT_NOFILE as text ("8", "unlimited"), for messages that must say which limit
 * was hit: "Too many open files" alone does not tell an operator what to raise. */
static const char *nofile_limit(char *buf, size_t n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        snprintf(buf, n, "unknown");
    else if (rl.rlim_cur == RLIM_INFINITY)
        snprintf(buf, n, "unlimited");
    else
        snprintf(buf, n, "%llu", (unsigned long long)rl.rlim_cur);
    return buf;
}

int cli_uv_error(int rc, const char *what)
{
    char lim[32];
    if (rc == UV_EMFILE || rc == UV_ENFILE)
        return cli_error(71, "too many open files (RLIMIT_NOFILE is %s): %s: %s",
                         nofile_limit(lim, sizeof(lim)), what, uv_strerror(rc));
    return cli_error(70, "%s: %s", what, uv_strerror(rc));
}

int cli_uv_loop_init(uv_loop_t *loop)
{
    int rc = uv_loop_init(loop);
    return rc == 0 ? 0 : cli_uv_error(rc, "cannot start the event loop");
}

const char *cli_nofile_note(const char *msg)
{
    static char note[96];
    char lim[32];
    if (msg == NULL || (strstr(msg, strerror(EMFILE)) == NULL &&
                        strstr(msg, strerror(ENFILE)) == NULL) ||
        strstr(msg, "RLIMIT_NOFILE") != NULL)
        return "";
    snprintf(note, sizeof(note), " (too many open files: RLIMIT_NOFILE is %s)",
             nofile_limit(lim, sizeof(lim)));
    return note;
}

int cli_lib_error(const rexec_error *e)
{
    char lim[32];
    if (cli_nofile_note(e->msg)[0])
        return cli_error(71, "too many open files (RLIMIT_NOFILE is %s): %s",
                         nofile_limit(lim, sizeof(lim)), e->msg);
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
                     nofile_limit(lim, sizeof(lim)), what, need, got, got == 1 ? "is" : "are");
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
 * handed (docs/redaction.md, "Through rexec serve"). Loading the caller's workspace again
 * (rexec.json, every parameter pattern compiled, the secret files read) would cost the call
 * ~0.7 ms and add nothing: the caller's workspace may not be serve's, and one of another user
 * cannot read the secrets. What serve sent still passes the shapes (a redactor without secrets:
 * no file is read); a redactor already built is kept. */
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
    red.loaded = !red.serve_text && red.dir && rexec_redactor_open(red.dir, &red.own, &e) == 0;
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
