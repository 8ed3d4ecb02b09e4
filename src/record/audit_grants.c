/* Whether the audit log shows a grant as used (audit.h, rx_audit_grant_used).
 *
 * A grant's .used file lives in approvals/, which a caller of the operator's own user could
 * rename back; the audit log is hash-chained (and keyed where configured), so a record that a
 * call ran on the grant cannot be taken back without the chain saying so. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "audit.h"
#include "err.h"
#include "fsutil.h"

/* The line records a call that ran on grant id: a "grant_id" member equal to id, with reason
 * ALLOW_GRANT. The substring test is only a filter (a quote inside a value is stored escaped, so
 * no value can fake the member); the parse decides. */
static int line_uses(const char *line, size_t len, const char *needle, const char *id,
                     const char *host)
{
    if (memmem(line, len, needle, strlen(needle)) == NULL)
        return 0;
    cJSON *o = cJSON_ParseWithLength(line, len);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "grant_id");
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(o, "reason");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "host");
    int used = cJSON_IsString(g) && strcmp(g->valuestring, id) == 0 && cJSON_IsString(why) &&
               strcmp(why->valuestring, "ALLOW_GRANT") == 0 &&
               (host == NULL || (cJSON_IsString(h) && strcmp(h->valuestring, host) == 0));
    cJSON_Delete(o);
    return used;
}

static int file_uses(const char *path, const char *needle, const char *id, const char *host,
                     int *used, rexec_error *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return errno == ENOENT ? 0 : rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
    while (!*used && (n = getline(&line, &cap, f)) > 0)
        if (line[n - 1] == '\n') /* a line still being written is not a record yet */
            *used = line_uses(line, (size_t)n - 1, needle, id, host);
    int bad = ferror(f);
    free(line);
    fclose(f);
    return bad ? rx_fail(err, REXEC_EAUDIT, "%s: cannot read the audit log", path) : 0;
}

int rx_audit_grant_used(const char *ws_dir, const char *grant_id, const char *host, time_t since,
                        int *used, rexec_error *err)
{
    char needle[128], **names = NULL;
    size_t n = 0;
    int r;
    char *dir = rx_fs_join(ws_dir, "audit");
    *used = 0;
    if (dir == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    snprintf(needle, sizeof(needle), "\"grant_id\":\"%.64s\"", grant_id);
    if ((r = rx_audit_rotated(dir, &names, &n, err)) != 0)
        goto out;
    /* newest first: a use is at most a grant's lifetime old */
    for (size_t i = n; r == 0 && !*used && i-- > 0;) {
        if (rx_audit_rotated_time(names[i]) + 1 < since)
            break;
        char *p = rx_fs_join(dir, names[i]);
        r = p ? file_uses(p, needle, grant_id, host, used, err) : rx_fail(err, REXEC_ENOMEM, "out of memory");
        free(p);
    }
    if (r == 0 && !*used) {
        char *p = rx_fs_join(dir, "audit.log");
        r = p ? file_uses(p, needle, grant_id, host, used, err) : rx_fail(err, REXEC_ENOMEM, "out of memory");
        free(p);
    }
out:
    rx_audit_names_free(names, n);
    free(dir);
    return r;
}
