/* `rexec audit verify|show`: the audit log for people and scripts (docs/audit.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "rexec.h"

#define EXIT_USAGE 64


typedef struct audit_opts {
    const char *key;
    const char *run;
    const char *since;
    const char *host, *action, *before;
    const char *head; /* verify --head: a file, "-" for stdin, or the JSON itself */
    int json, reset, unregistered;
} audit_opts;

/* Parses the options after the subcommand; allowed lists the ones it takes. */
static int parse_opts(int argc, char **argv, const char *sub, int allow_show, audit_opts *o)
{
    for (int i = 2; i < argc; i++) {
        const char *v;
        int missing = 0;
        if (strcmp(argv[i], "--json") == 0)
            o->json = 1;
        else if (strcmp(sub, "head") == 0 && strcmp(argv[i], "--reset") == 0)
            o->reset = 1;
        else if (strcmp(sub, "recover") == 0 && strcmp(argv[i], "--include-unregistered") == 0)
            o->unregistered = 1;
        else if (strcmp(sub, "verify") == 0 &&
                 (v = cli_opt_value(argc, argv, &i, "--head", &missing)) != NULL)
            o->head = v;
        else if (!allow_show && (v = cli_opt_value(argc, argv, &i, "--key", &missing)) != NULL)
            o->key = v;
        else if (allow_show && (v = cli_opt_value(argc, argv, &i, "--run", &missing)) != NULL)
            o->run = v;
        else if (allow_show && (v = cli_opt_value(argc, argv, &i, "--since", &missing)) != NULL)
            o->since = v;
        else if (allow_show && (v = cli_opt_value(argc, argv, &i, "--host", &missing)) != NULL)
            o->host = v;
        else if (allow_show && (v = cli_opt_value(argc, argv, &i, "--action", &missing)) != NULL)
            o->action = v;
        else if (!allow_show && (v = cli_opt_value(argc, argv, &i, "--before", &missing)))
            o->before = v;
        else if (missing)
            return cli_error(EXIT_USAGE, "audit %s: %s needs a value", sub, argv[i]);
        else
            return cli_error(EXIT_USAGE, "audit %s: unknown argument \"%s\" (see rexec "
                                         "audit --help)", sub, cli_arg(argv[i]));
    }
    return 0;
}

#define HEAD_TEXT_MAX 4096

static int audit_key(const cli_global *g, const audit_opts *o, const char **key, char **ws_key,
                     rexec_error *err);

/* --head H: the JSON itself when it starts with "{", else a file ("-": stdin) holding it. */
static int read_head(const char *h, char **text)
{
    if (h[0] == '{')
        return (*text = strdup(h)) != NULL ? 0 : cli_error(70, "out of memory");
    FILE *f = strcmp(h, "-") == 0 ? stdin : fopen(h, "r");
    if (f == NULL)
        return cli_error(EXIT_USAGE, "audit verify: --head %s: %s", cli_arg(h),
                         strerror(errno));
    char *buf = calloc(1, HEAD_TEXT_MAX + 1);
    size_t n = buf ? fread(buf, 1, HEAD_TEXT_MAX + 1, f) : 0;
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (buf == NULL)
        return cli_error(70, "out of memory");
    if (bad || n > HEAD_TEXT_MAX) {
        free(buf);
        return cli_error(EXIT_USAGE, "audit verify: --head %s: %s", cli_arg(h),
                         bad ? "cannot be read" : "longer than a head can be");
    }
    *text = buf;
    return 0;
}

static int audit_verify_cmd(const cli_global *g, const audit_opts *o)
{
    rexec_error err = {0};
    char *ws_key = NULL, *head = NULL;
    const char *key;
    int r;

    if (o->head != NULL && (r = read_head(o->head, &head)) != 0)
        return r;
    if ((r = audit_key(g, o, &key, &ws_key, &err)) == 0)
        r = rexec_audit_verify_head(g->workspace, key ? key : ws_key, head,
                                    o->json ? REXEC_AUDIT_REPORT_JSON : 0, stdout, &err);
    free(ws_key);
    free(head);
    fflush(stdout);
    return r >= 0 ? r : cli_lib_error(&err);
}

/* Closes the intents whose writer is gone; exits like verify (0 none left open, 2 some kept
 * because their writer still runs, 1 the log does not verify). */
static int audit_recover_cmd(const cli_global *g, const audit_opts *o)
{
    rexec_error err = {0};
    char *ws_key = NULL;
    const char *key;
    int r, flags = (o->json ? REXEC_AUDIT_REPORT_JSON : 0) |
                   (o->unregistered ? REXEC_AUDIT_RECOVER_UNREGISTERED : 0);

    if ((r = audit_key(g, o, &key, &ws_key, &err)) == 0)
        r = rexec_audit_recover(g->workspace, key ? key : ws_key, flags, stdout, &err);
    free(ws_key);
    fflush(stdout);
    if (r == 1)
        return cli_error(1, "%s", err.msg);
    return r >= 0 ? r : cli_lib_error(&err);
}

static int audit_head_cmd(const cli_global *g, const audit_opts *o)
{
    rexec_error err = {0};
    char *ws_key = NULL, *out = NULL;
    const char *key;
    int r;

    if ((r = audit_key(g, o, &key, &ws_key, &err)) == 0)
        r = rexec_audit_head(g->workspace, key ? key : ws_key, o->reset, &out, &err);
    free(ws_key);
    if (r != 0)
        return cli_lib_error(&err);
    printf("%s\n", out);
    free(out);
    return 0;
}

static int audit_show_cmd(const cli_global *g, const audit_opts *o)
{
    rexec_error err = {0};
    rexec_audit_query q = {.run_id = o->run, .host = o->host, .action = o->action,
                           .json = o->json};
    if (o->since != NULL) {
        if (rexec_audit_parse_time(o->since, time(NULL), &q.since) != 0)
            return cli_error(EXIT_USAGE,
                             "audit show: --since \"%s\": expected a time like "
                             "2026-12-02T10:00:00Z or an age like 30m, 1h, 2d",
                             cli_arg(o->since));
        q.has_since = 1;
    }
    int r = rexec_audit_show(g->workspace, &q, stdout, &err);
    fflush(stdout);
    return r == 0 ? 0 : cli_lib_error(&err);
}

/* The key: --key, $REXEC_AUDIT_KEY, or rexec.json's audit.key_file (malloc'd in *ws_key). */
static int audit_key(const cli_global *g, const audit_opts *o, const char **key, char **ws_key,
                     rexec_error *err)
{
    *key = o->key ? o->key : getenv("REXEC_AUDIT_KEY");
    *ws_key = NULL;
    if (*key != NULL && **key == 0)
        *key = NULL;
    return *key == NULL ? rexec_audit_key_file(g->workspace, ws_key, err) : 0;
}

static int audit_prune_cmd(const cli_global *g, const audit_opts *o)
{
    rexec_error err = {0};
    size_t files = 0, records = 0;
    const char *key;
    char *ws_key;
    time_t before;
    int r;
    if (o->before == NULL)
        return cli_error(EXIT_USAGE, "audit prune: --before TIME is required (e.g. 90d, "
                                     "2026-01-01)");
    if (rexec_audit_parse_time(o->before, time(NULL), &before) != 0)
        return cli_error(EXIT_USAGE, "audit prune: --before \"%s\": expected a time like "
                                     "2026-12-02T10:00:00Z or an age like 90d", cli_arg(o->before));
    if ((r = audit_key(g, o, &key, &ws_key, &err)) == 0)
        r = rexec_audit_prune(g->workspace, key ? key : ws_key, before, &files, &records, &err);
    free(ws_key);
    if (r != 0)
        return cli_lib_error(&err);
    if (o->json)
        printf("{\"files\":%zu,\"records\":%zu}\n", files, records);
    else if (files == 0) /* no anchor is written then: naming one would send the reader to
                          * a file that may not exist */
    {
        char *when = cli_redact(o->before); /* what was typed, through the one redaction path */
        printf("audit: nothing to prune: no rotated audit file is older than %s (audit.log "
               "itself never is pruned)\n", when);
        free(when);
    }
    else
        printf("audit: pruned %zu rotated file(s), %zu record(s); the chain continues from "
               "audit/anchor.json\n", files, records);
    return 0;
}

/* `audit help`, or --help / -h anywhere (but not a value such as --run help). */
static int wants_help(int argc, char **argv)
{
    if (strcmp(argv[1], "help") == 0)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

int cli_audit(const cli_global *g, int argc, char **argv)
{
    audit_opts o = {0};
    int r;
    if (argc < 2)
        return cli_error(EXIT_USAGE,
                         "audit: expected verify, show, head, prune or recover (see rexec audit "
                         "--help)");
    if (wants_help(argc, argv)) {
        fputs(cli_help_text("audit"), stdout);
        return 0;
    }
    if ((r = cli_fds_check("rexec audit", CLI_FDS_AUDIT)) != 0)
        return r;
    if (strcmp(argv[1], "verify") == 0)
        return (r = parse_opts(argc, argv, "verify", 0, &o)) != 0 ? r : audit_verify_cmd(g, &o);
    if (strcmp(argv[1], "show") == 0)
        return (r = parse_opts(argc, argv, "show", 1, &o)) != 0 ? r : audit_show_cmd(g, &o);
    if (strcmp(argv[1], "prune") == 0)
        return (r = parse_opts(argc, argv, "prune", 0, &o)) != 0 ? r : audit_prune_cmd(g, &o);
    if (strcmp(argv[1], "head") == 0)
        return (r = parse_opts(argc, argv, "head", 0, &o)) != 0 ? r : audit_head_cmd(g, &o);
    if (strcmp(argv[1], "recover") == 0)
        return (r = parse_opts(argc, argv, "recover", 0, &o)) != 0 ? r : audit_recover_cmd(g, &o);
    return cli_error(EXIT_USAGE,
                     "audit: unknown subcommand \"%s\" (expected verify, show, head, prune or "
                     "recover)", cli_arg(argv[1]));
}
