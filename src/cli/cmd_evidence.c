/* `rexec evidence prune`: the retention of evidence (docs/audit.md, "Retention"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "rexec.h"

#define EVIDENCE_DEFAULT_AGE "30d"

int cli_evidence(const cli_global *g, int argc, char **argv)
{
    const char *older = EVIDENCE_DEFAULT_AGE, *v;
    double keep = 0;
    int json = 0;
    time_t before;
    if (argc < 2 || strcmp(argv[1], "prune") != 0)
        return cli_error(64, "evidence: expected prune (see `rexec help evidence`)");
    for (int i = 2; i < argc; i++) {
        int missing = 0;
        char *end;
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if ((v = cli_opt_value(argc, argv, &i, "--older-than", &missing)) != NULL)
            older = v;
        else if ((v = cli_opt_value(argc, argv, &i, "--keep", &missing)) != NULL) {
            keep = strtod(v, &end);
            if (*end || end == v || !(keep >= 0 && keep <= 1e12) || keep != (double)(long long)keep)
                return cli_error(64, "evidence prune: --keep wants a count, got \"%s\"", cli_arg(v));
        } else if (missing)
            return cli_error(64, "evidence prune: %s needs a value", argv[i]);
        else
            return cli_error(64, "evidence prune: unknown argument \"%s\"", cli_arg(argv[i]));
    }
    if (rexec_audit_parse_time(older, time(NULL), &before) != 0)
        return cli_error(64, "evidence prune: --older-than \"%s\": expected an age like 30d, "
                             "12h, 1w or a time like 2026-12-01T00:00:00Z", cli_arg(older));
    size_t removed = 0, kept = 0;
    uint64_t freed = 0;
    rexec_error e;
    if (rexec_evidence_prune(g->workspace, before, (size_t)keep, &removed, &kept, &freed, &e) != 0)
        return cli_error(rexec_err_exit_code(e.code), "%s", e.msg);
    if (json)
        printf("{\"removed\":%zu,\"kept\":%zu,\"bytes_freed\":%llu}\n", removed, kept,
               (unsigned long long)freed);
    else
        printf("evidence: removed %zu run(s) (%llu bytes), kept %zu\n", removed,
               (unsigned long long)freed, kept);
    return 0;
}
