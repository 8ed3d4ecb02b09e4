/* `rexec hosts`, `rexec actions` and `rexec check`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "rexec.h"

static int want_json(int argc, char **argv, const char *cmd)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else
            return -cli_error(64, "%s: unexpected argument \"%s\" (see `rexec help %s`)", cmd,
                              cli_arg(argv[i]), cmd);
    }
    return json;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "-";
}

static void print_hosts(const cJSON *list)
{
    const cJSON *h;
    printf("%-16s %-24s %-6s %-12s %-12s %-6s %s\n", "HOST", "ADDRESS", "PORT", "USER",
           "HOST_KEY", "ALLOW", "APPROVE");
    cJSON_ArrayForEach(h, list) {
        const char *hk = str(h, "host_key");
        printf("%-16s %-24s %-6d %-12s %-12s %-6s %s\n", str(h, "name"), str(h, "address"),
               cJSON_GetObjectItemCaseSensitive(h, "port")->valueint, str(h, "user"),
               strncmp(hk, "SHA256:", 7) == 0 ? "pinned" : hk, str(h, "allow"),
               str(h, "approve"));
    }
}

static void print_actions(const cJSON *list)
{
    const cJSON *a, *p;
    printf("%-24s %-5s %-32s %s\n", "ACTION", "RISK", "PARAMS", "SECRETS");
    cJSON_ArrayForEach(a, list) {
        char params[512] = "", secrets[512] = "";
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(a, "params"))
            snprintf(params + strlen(params), sizeof(params) - strlen(params), "%s%s:%s",
                     params[0] ? " " : "", str(p, "name"), str(p, "type"));
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(a, "secrets"))
            snprintf(secrets + strlen(secrets), sizeof(secrets) - strlen(secrets), "%s%s",
                     secrets[0] ? "," : "", p->valuestring);
        printf("%-24s %-5s %-32s %s\n", str(a, "name"), str(a, "risk"), params[0] ? params : "-",
               secrets[0] ? secrets : "-");
    }
}

static void print_groups(const cJSON *list)
{
    const cJSON *g, *h;
    printf("%-24s %s\n", "GROUP", "HOSTS");
    cJSON_ArrayForEach(g, list) {
        char hosts[1024] = "";
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(g, "hosts"))
            snprintf(hosts + strlen(hosts), sizeof(hosts) - strlen(hosts), "%s%s",
                     hosts[0] ? "," : "", h->valuestring);
        printf("%-24s %s\n", str(g, "name"), hosts[0] ? hosts : "-");
    }
}

/* hosts, actions and groups: a listing from the workspace alone, no connection. */
static int list_cmd(const cli_global *g, int argc, char **argv, const char *what)
{
    uv_loop_t loop;
    rexec_ctx *ctx;
    rexec_error e;
    int json = want_json(argc, argv, argv[0]), rc = 0;
    if (json < 0)
        return -json;
    if ((rc = cli_fds_check(argv[0], CLI_FDS_LIST)) != 0 || (rc = cli_uv_loop_init(&loop)) != 0)
        return rc;
    if (cli_ctx_new(&ctx, &loop, g->workspace, &e) != 0) {
        uv_loop_close(&loop);
        return cli_lib_error(&e);
    }
    /* rexec.json as written (secrets by name): whoever can list it can read the file, and the
     * shapes would mangle a template such as curl -H 'Authorization: Bearer $TOKEN' */
    char *text = rexec_ctx_list_json(ctx, what);
    cJSON *list = text ? cJSON_Parse(text) : NULL;
    if (list == NULL)
        rc = cli_error(70, "out of memory");
    else if (json)
        printf("%s\n", text);
    else if (strcmp(what, "hosts") == 0)
        print_hosts(list);
    else if (strcmp(what, "groups") == 0)
        print_groups(list);
    else
        print_actions(list);
    cJSON_Delete(list);
    free(text);
    cli_ctx_close(ctx);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return rc;
}

/* Prints entries to paste into rexec.json; reads no workspace. */
static int import_ssh_config(int argc, char **argv)
{
    char *text = NULL, *notes = NULL;
    rexec_error e;
    if (argc > 3)
        return cli_error(64, "hosts import-ssh-config: at most one PATTERN (see `rexec help hosts`)");
    if (rexec_ssh_config_import(argc == 3 ? argv[2] : NULL, &text, &notes, &e) != 0)
        return cli_error(rexec_err_exit_code(e.code), "%s", e.msg);
    char *n = cli_redact(notes), *t = cli_redact(text); /* the ssh config's own text */
    fputs(n, stderr);
    if (*text == '\0')
        fprintf(stderr, "rexec: no Host in the ssh config matches\n");
    fputs(t, stdout);
    free(n), free(t);
    int empty = *text == '\0';
    free(text), free(notes);
    return empty ? 1 : 0;
}

int cli_hosts(const cli_global *g, int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "import-ssh-config") == 0)
        return import_ssh_config(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "import-ansible") == 0)
        return cli_import_ansible(argc, argv);
    return list_cmd(g, argc, argv, "hosts");
}

/* ---- the catalog's templates: `rexec actions --lint`, and `rexec check` when it does not load -- */

/* Every action's template problem ("rexec: actions.X.command: line L, column C: ..." on stderr,
 * or the JSON object on stdout), then whether the workspace loads. 0 when the catalog has no
 * problem and the workspace loads, else 78. quiet_ok: say nothing when all is well. */
static int show_lint(const char *workspace, int json, int quiet_ok)
{
    char *raw = NULL, *text;
    rexec_error e;
    cJSON *o, *p;
    if (rexec_catalog_lint(workspace, &raw, &e) != 0)
        return cli_lib_error(&e);
    text = cli_redact_json_text(raw);
    free(raw);
    if ((o = text ? cJSON_Parse(text) : NULL) == NULL) {
        free(text);
        return cli_error(70, "out of memory");
    }
    int loads = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "loads"));
    const cJSON *problems = cJSON_GetObjectItemCaseSensitive(o, "problems");
    int n = cJSON_GetArraySize(problems), rc = loads && n == 0 ? 0 : 78, named = 0;
    cJSON_ArrayForEach(p, problems) /* the loader stopped at one of them, or at something else */
        named |= !loads && strstr(str(o, "error"), str(p, "error")) != NULL;
    if (json) {
        printf("%s\n", text);
    } else {
        cJSON_ArrayForEach(p, problems)
            fprintf(stderr, "rexec: %s\n", str(p, "error"));
        if (!loads && !named)
            fprintf(stderr, "rexec: the workspace does not load: %s\n", str(o, "error"));
        if (n > 0)
            fprintf(stderr, "rexec: %d action(s) with a template problem: the workspace does not "
                            "load until each is fixed (docs/workspace.md, \"Where a placeholder "
                            "may stand\")\n", n);
        else if (loads && !quiet_ok)
            printf("%d action(s), no template problem\n",
                   (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "actions")));
    }
    fflush(stdout);
    cJSON_Delete(o);
    free(text);
    return rc;
}

int cli_actions(const cli_global *g, int argc, char **argv)
{
    int lint = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--lint") == 0)
            lint = 1;
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else
            return cli_error(64, "actions: unexpected argument \"%s\" (see `rexec help actions`)",
                             cli_arg(argv[i]));
    }
    if (!lint)
        return list_cmd(g, argc, argv, "actions");
    int rc = cli_fds_check("rexec actions --lint", CLI_FDS_LIST);
    return rc ? rc : show_lint(g->workspace, json, 0);
}

int cli_groups(const cli_global *g, int argc, char **argv)
{
    return list_cmd(g, argc, argv, "groups");
}

/* ---- check ---------------------------------------------------------------------------------- */

typedef struct check_run {
    int json;
    int worst;
    size_t pending;
    rexec_ctx *ctx;
} check_run;

static void on_checked(void *ud, const rexec_check_result *r)
{
    check_run *k = ud;
    cli_show_check(r, k->json);
    fflush(stdout);
    if (r->exit_status > k->worst)
        k->worst = r->exit_status;
    if (--k->pending == 0)
        cli_ctx_close(k->ctx);
}

/* A host whose check could not start counts as done, with the library's error. */
static void check_not_started(check_run *k, const rexec_error *e)
{
    int code = cli_lib_error(e);
    if (code > k->worst)
        k->worst = code;
    if (--k->pending == 0)
        cli_ctx_close(k->ctx);
}

/* Names every workspace secret that did not resolve: it cannot be redacted until it does. */
static void warn_unresolved(const rexec_ctx *ctx)
{
    const char *u = rexec_ctx_unresolved_secrets(ctx);
    for (const char *p = u; p && *p;) {
        const char *eol = strchr(p, '\n');
        int len = eol ? (int)(eol - p) : (int)strlen(p);
        char *line = strndup(p, (size_t)len), *m = line ? cli_redact(line) : NULL;
        fprintf(stderr, "rexec: warning: %s (not redacted until it resolves)\n", m ? m : "?");
        free(line), free(m);
        p += len + (eol != NULL);
    }
}

int cli_check(const cli_global *g, int argc, char **argv)
{
    uv_loop_t loop;
    rexec_error e;
    check_run k = {0};
    const char **names = NULL, *targets = NULL;
    size_t n = 0;
    const char *socket = g->socket;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            k.json = 1;
        else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
            socket = argv[++i];
        else if (targets == NULL && argv[i][0] != '-')
            targets = argv[i];
        else
            return cli_error(64, "check: unexpected argument \"%s\"", cli_arg(argv[i]));
    }
    if (targets == NULL)
        return cli_error(64, "usage: rexec check TARGETS [--json]");
    if (socket)
        return cli_client_call(socket, "check", NULL, targets, k.json, 0);
    if ((k.worst = cli_fds_check("rexec check", CLI_FDS_CHECK)) != 0 ||
        (k.worst = cli_uv_loop_init(&loop)) != 0)
        return k.worst;
    if (cli_ctx_new(&k.ctx, &loop, g->workspace, &e) != 0) {
        uv_loop_close(&loop);
        if (e.code != REXEC_ECONFIG)
            return cli_lib_error(&e);
        /* the same report as `rexec actions --lint`: every template problem, not the first */
        int rc = show_lint(g->workspace, k.json, 1);
        return rc ? rc : cli_lib_error(&e);
    }
    warn_unresolved(k.ctx);
    if (rexec_ctx_targets(k.ctx, targets, &names, &n, &e) != 0) {
        k.worst = cli_error(rexec_err_exit_code(e.code), "%s", e.msg);
        cli_ctx_close(k.ctx);
    }
    k.pending = n;
    for (size_t i = 0; i < n; i++)
        if (rexec_check_start(k.ctx, names[i], on_checked, &k, &e) != 0)
            check_not_started(&k, &e); /* the others still run; the context still closes */
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(names);
    return k.worst;
}
