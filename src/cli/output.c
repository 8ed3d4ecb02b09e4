/* What the CLI prints for a call, shared by direct runs and runs through `rexec serve`, so both
 * look the same. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Several hosts: each line becomes "[host] line", so interleaved output stays readable. */
void cli_prefix_write(cli_prefixer *p, int stream, const void *data, size_t len)
{
    int idx = stream == REXEC_STDOUT ? 0 : 1;
    const char *d = data;
    for (size_t i = 0; i < len; i++) {
        char *b = realloc(p->partial[idx], p->len[idx] + 1);
        if (b == NULL)
            return;
        p->partial[idx] = b;
        b[p->len[idx]++] = d[i];
        if (d[i] == '\n') {
            dprintf(idx + 1, "[%s] %.*s", p->host, (int)p->len[idx], b);
            p->len[idx] = 0;
        }
    }
}

void cli_prefix_flush(cli_prefixer *p)
{
    for (int idx = 0; idx < 2; idx++) {
        if (p->len[idx])
            dprintf(idx + 1, "[%s] %.*s\n", p->host, (int)p->len[idx], p->partial[idx]);
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

void cli_show_result(const rexec_result *res, int json, int eval)
{
    if (json) {
        char *text = rexec_result_to_json(res);
        if (text) {
            cli_write_all(1, text, strlen(text));
            cli_write_all(1, "\n", 1);
        }
        free(text);
        return;
    }
    if (res->error)
        dprintf(2, "rexec: %s\n", res->error);
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
        dprintf(1, "%s: %s (%s, %s)%s%s\n", res->host, res->decision,
                res->reason ? res->reason : "-", res->effective_risk ? res->effective_risk : "-",
                res->rendered ? "\n  would run: " : "", res->rendered ? res->rendered : "");
}

void cli_show_check(const rexec_check_result *r, int json)
{
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
    fprintf(stderr, "rexec: %s: %s\n", level == REXEC_LOG_DEBUG ? "debug" : "warning", msg);
}

int cli_ctx_new(rexec_ctx **out, uv_loop_t *loop, const char *workspace_dir, rexec_error *err)
{
    int r = rexec_ctx_new(out, loop, workspace_dir, err);
    static int debug = 1;
    if (r == 0)
        rexec_ctx_set_log(*out, log_stderr, getenv("REXEC_DEBUG") != NULL ? &debug : NULL);
    return r;
}
