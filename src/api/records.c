/* The public face of the audit log (rexec.h, "The audit log"): what `rexec audit` and other
 * readers use, over the record layer's internals (src/record/audit.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "audit.h"
#include "err.h"
#include "evidence_prune.h"
#include "fsutil.h"

/* rexec.json is read here only for one key, so a cap well above any real file is enough. */
#define RECORDS_WS_FILE_MAX (4u << 20)

int rexec_audit_verify(const char *workspace_dir, const char *key_file, int flags, FILE *report,
                       rexec_error *err)
{
    return rexec_audit_verify_head(workspace_dir, key_file, NULL, flags, report, err);
}

int rexec_audit_verify_head(const char *workspace_dir, const char *key_file,
                            const char *head_json, int flags, FILE *report, rexec_error *err)
{
    rx_audit_head h;
    int r;
    if (head_json != NULL &&
        (r = rx_audit_head_parse(head_json, strlen(head_json), "--head", REXEC_EUSAGE, &h,
                                 err)) != 0)
        return r;
    return rx_audit_verify_ex(workspace_dir, key_file,
                              (flags & REXEC_AUDIT_REPORT_JSON) ? RX_AUDIT_VERIFY_JSON : 0,
                              head_json != NULL ? &h : NULL, report, err);
}

int rexec_audit_head(const char *workspace_dir, const char *key_file, int reset, char **out,
                     rexec_error *err)
{
    rx_audit_head h;
    int r = rx_audit_head_current(workspace_dir, key_file, reset, &h, err);
    *out = NULL;
    if (r == 0 && (*out = rx_audit_head_json(&h)) == NULL)
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
    return r;
}

int rexec_audit_key_file(const char *workspace_dir, char **key, rexec_error *err)
{
    char *path = rx_fs_join(workspace_dir, "rexec.json"), *text = NULL;
    size_t len = 0;
    struct stat st;
    int r = 0;
    *key = NULL;
    if (path == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (lstat(path, &st) != 0 && errno == ENOENT) /* lstat: a dangling link is refused below */
        goto out;
    if ((r = rx_fs_read_file(path, RECORDS_WS_FILE_MAX, &text, &len, REXEC_ECONFIG, err)) != 0)
        goto out;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    const cJSON *audit = cJSON_GetObjectItemCaseSensitive(doc, "audit");
    const cJSON *kf = cJSON_GetObjectItemCaseSensitive(audit, "key_file");
    if (doc == NULL)
        r = rx_fail(err, REXEC_ECONFIG, "%s: not valid JSON", path);
    else if (audit != NULL && !cJSON_IsObject(audit))
        r = rx_fail(err, REXEC_ECONFIG, "%s: audit: must be an object", path);
    else if (kf != NULL && (!cJSON_IsString(kf) || kf->valuestring[0] != '/'))
        r = rx_fail(err, REXEC_ECONFIG, "%s: audit.key_file: must be an absolute path", path);
    else if (kf != NULL && (*key = strdup(kf->valuestring)) == NULL)
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
    cJSON_Delete(doc);
out:
    free(text);
    free(path);
    return r;
}

int rexec_audit_show(const char *workspace_dir, const rexec_audit_query *q, FILE *out,
                     rexec_error *err)
{
    rx_audit_query rq = {.run_id = q->run_id, .since = q->since, .has_since = q->has_since,
                         .json = q->json, .host = q->host, .action = q->action};
    return rx_audit_show(workspace_dir, &rq, out, err);
}

int rexec_audit_parse_time(const char *s, time_t now, time_t *out)
{
    return rx_audit_parse_time(s, now, out);
}

int rexec_audit_prune(const char *workspace_dir, const char *key_file, time_t before,
                      size_t *files, size_t *records, rexec_error *err)
{
    rx_audit_prune_stats st;
    int r = rx_audit_prune(workspace_dir, key_file, before, &st, err);
    if (files)
        *files = st.files;
    if (records)
        *records = st.records;
    return r;
}

int rexec_audit_recover(const char *workspace_dir, const char *key_file, int flags,
                        FILE *report, rexec_error *err)
{
    rx_audit_recover_stats st;
    int f = ((flags & REXEC_AUDIT_RECOVER_UNREGISTERED) ? RX_AUDIT_RECOVER_UNREGISTERED : 0) |
            ((flags & REXEC_AUDIT_REPORT_JSON) ? RX_AUDIT_RECOVER_JSON : 0);
    return rx_audit_recover(workspace_dir, key_file, f, &st, report, err);
}

int rexec_evidence_prune(const char *workspace_dir, time_t before, size_t keep, size_t *removed,
                         size_t *kept, uint64_t *bytes_freed, rexec_error *err)
{
    rx_evidence_prune_stats st;
    int r = rx_evidence_prune(workspace_dir, before, keep, &st, err);
    if (removed)
        *removed = st.removed;
    if (kept)
        *kept = st.kept;
    if (bytes_freed)
        *bytes_freed = st.bytes_freed;
    return r;
}
