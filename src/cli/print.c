/* What the CLI prints and reads that needs nothing of the library beyond rexec.h's types and
 * rexec_result_to_json: shared by the full program and by the light front (front.c), which is
 * linked without libcrypto, libssh2 and libuv (docs/architecture.md, "Linking the rexec
 * executable"). The full program's own output helpers are in output.c. */
#include <errno.h>
#include <stdio.h>
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

/* "rexec: <msg>" on stderr, and with --json the {"error", "exit_status"} object on stdout;
 * msg is redacted already. */
void cli_error_show(int code, const char *msg, int json)
{
    fprintf(stderr, "rexec: %s\n", msg);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "error", msg);
        cJSON_AddNumberToObject(o, "exit_status", code);
        char *t = cJSON_PrintUnformatted(o);
        if (t)
            printf("%s\n", t);
        fflush(stdout);
        free(t);
        cJSON_Delete(o);
    }
}

/* ---- running out of file descriptors ------------------------------------------------------ */

/* The soft RLIMIT_NOFILE as text ("8", "unlimited"), for messages that must say which limit
 * was hit: "Too many open files" alone does not tell an operator what to raise. */
const char *cli_nofile_limit(char *buf, size_t n)
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

const char *cli_nofile_note(const char *msg)
{
    static char note[96];
    char lim[32];
    if (msg == NULL || (strstr(msg, strerror(EMFILE)) == NULL &&
                        strstr(msg, strerror(ENFILE)) == NULL) ||
        strstr(msg, "RLIMIT_NOFILE") != NULL)
        return "";
    snprintf(note, sizeof(note), " (too many open files: RLIMIT_NOFILE is %s)",
             cli_nofile_limit(lim, sizeof(lim)));
    return note;
}
