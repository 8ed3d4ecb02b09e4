/* Approvals: challenge and grant files and their state changes (the operator's confirmation at a
 * terminal is src/api/approve_tty.c). Layout of approvals/ (dir 0700, files 0600):
 *
 *     ch-<16 hex>.json   pending challenge, or approved grant ("state")
 *     ch-<16 hex>.used   a consumed grant (renamed from .json: the rename is the single use)
 *     .<name>.<pid>.tmp  a file being written (renamed into place when complete)
 *
 * State changes of an existing id (approve, consume, prune) hold flock on the directory, so an
 * approval can never rewrite a grant that a racing caller just consumed. Creation needs no lock:
 * the id is 64 random bits. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "approvals.h"
#include "buf.h"
#include "err.h"
#include "fsutil.h"
#include "jsonx.h"

#define AP_VERSION 1
#define AP_DEFAULT_TTL 900
#define AP_NAME_MAX 48   /* "ch-<16 hex>.json" and its temporary name fit */

static int64_t (*ap_clock)(void);

int64_t rx_approvals_now(void)
{
    return ap_clock != NULL ? ap_clock() : (int64_t)time(NULL);
}

void rx_approvals_set_clock(int64_t (*now)(void))
{
    ap_clock = now;
}

int rx_approval_id_ok(const char *id)
{
    if (id == NULL || strncmp(id, "ch-", 3) != 0 || strlen(id) != RX_APPROVAL_ID_LEN)
        return 0;
    return strspn(id + 3, "0123456789abcdef") == RX_APPROVAL_ID_LEN - 3;
}

const char *rx_approval_state_name(rx_approval_state s)
{
    static const char *const names[] = {"pending", "approved", "used", "denied", "withdrawn"};
    return (unsigned)s <= RX_AP_WITHDRAWN ? names[s] : "?";
}

int rx_challenge_expired(const rx_challenge *c, int64_t now)
{
    return (c->state == RX_AP_PENDING || c->state == RX_AP_APPROVED) && now >= c->expires;
}

int64_t rx_approvals_ttl(const rx_ws *ws)
{
    double t = ws->limits.approval_ttl_s;
    return t >= 1 ? (int64_t)(t + 0.5) : AP_DEFAULT_TTL;
}

void rx_approval_time_str(int64_t t, char out[32])
{
    struct tm tm;
    time_t tt = (time_t)t;
    if (gmtime_r(&tt, &tm) == NULL || strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, 32, "@%lld", (long long)t);
}

static int ap_time_parse(const char *s, int64_t *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (end == NULL || *end != 0)
        return -1;
    *out = (int64_t)timegm(&tm);
    return 0;
}

/* ---- The directory ---------------------------------------------------------------------- */

typedef struct ap_dir {
    char path[PATH_MAX]; /* <workspace>/approvals, for messages */
    int fd;
} ap_dir;

/* Opens approvals/ (creating it 0700 when create) without following a symlink, and checks it
 * is ours and private. Returns 0, 1 when it does not exist and !create, or REXEC_EAUDIT. */
static int ap_dir_open(const rx_ws *ws, int create, ap_dir *d, rexec_error *err)
{
    int r;
    d->fd = -1;
    if ((size_t)snprintf(d->path, sizeof(d->path), "%s/%s", ws->dir, RX_APPROVALS_DIR) >=
        sizeof(d->path))
        return rx_fail(err, REXEC_EAUDIT, "%s: workspace path too long", ws->dir);
    if (create && (r = rx_fs_mkdir_private(d->path, REXEC_EAUDIT, err)) != 0)
        return r;
    d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->fd < 0 && errno == ENOENT && !create)
        return 1;
    if (d->fd < 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: %s", d->path, rx_fs_open_dir_why(d->path, errno));
    if ((r = rx_fs_check_fd(d->fd, d->path, 1, REXEC_EAUDIT, err)) != 0) {
        close(d->fd);
        d->fd = -1;
    }
    return r;
}

static void ap_dir_close(ap_dir *d)
{
    if (d->fd >= 0)
        close(d->fd); /* also releases the lock */
    d->fd = -1;
}

static int ap_lock(const ap_dir *d, rexec_error *err)
{
    while (flock(d->fd, LOCK_EX) != 0)
        if (errno != EINTR)
            return rx_fail(err, REXEC_EAUDIT, "%s: cannot lock: %s", d->path, strerror(errno));
    return 0;
}

/* Writes doc to name whole or not at all: a temporary file (0600), fsync, rename, fsync dir;
 * without durable, no fsync (a record of something another step already made durable). */
static int ap_write_how(const ap_dir *d, const char *name, const cJSON *doc, int durable,
                        rexec_error *err)
{
    char tmp[AP_NAME_MAX + 32];
    int fd = -1, r = 0;
    char *text = cJSON_Print(doc);

    snprintf(tmp, sizeof(tmp), ".%s.%ld.tmp", name, (long)getpid());
    if (text == NULL)
        return rx_fail(err, REXEC_ENOMEM, "%s/%s: out of memory", d->path, name);
    unlinkat(d->fd, tmp, 0); /* left by a crashed process that had our pid */
    if ((r = rx_fs_create_private(d->fd, tmp, &fd, REXEC_EAUDIT, err)) != 0) {
        rx_fail_prefix(err, "%s/", d->path);
        goto out;
    }
    if (rx_fs_write_all(fd, text, strlen(text)) != 0 || rx_fs_write_all(fd, "\n", 1) != 0 ||
        (durable && fsync(fd) != 0) || renameat(d->fd, tmp, d->fd, name) != 0) {
        r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", d->path, name, strerror(errno));
        unlinkat(d->fd, tmp, 0);
        goto out;
    }
    if (durable && fsync(d->fd) != 0 && errno != EINVAL)
        r = rx_fail(err, REXEC_EAUDIT, "%s: fsync: %s", d->path, strerror(errno));
out:
    if (fd >= 0)
        close(fd);
    free(text);
    return r;
}

static int ap_write(const ap_dir *d, const char *name, const cJSON *doc, rexec_error *err)
{
    return ap_write_how(d, name, doc, 1, err);
}

/* Reads name from approvals/ (a private regular file, not a symlink). Returns 0, 1 when it
 * does not exist, or REXEC_EAUDIT / REXEC_ENOMEM. */
static int ap_read(const ap_dir *d, const char *name, char **text, size_t *len, rexec_error *err)
{
    char path[PATH_MAX + AP_NAME_MAX], chunk[4096];
    rx_buf b;
    /* O_NONBLOCK: a FIFO planted under a challenge's name must not hang us before the check */
    int r = 0, fd = openat(d->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    snprintf(path, sizeof(path), "%s/%s", d->path, name);
    if (fd < 0 && errno == ENOENT)
        return 1;
    if (fd < 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: %s", path,
                       errno == ELOOP ? "is a symbolic link: refusing to use it" : strerror(errno));
    rx_buf_init(&b, RX_APPROVAL_MAX_FILE);
    if ((r = rx_fs_check_fd(fd, path, 1, REXEC_EAUDIT, err)) != 0)
        goto out;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0)
                r = rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
            break;
        }
        if ((r = rx_buf_add(&b, chunk, (size_t)n)) != 0) {
            r = rx_fail(err, r == REXEC_ENOMEM ? r : REXEC_EAUDIT, "%s: larger than %u bytes",
                        path, RX_APPROVAL_MAX_FILE);
            break;
        }
    }
    if (r == 0 && (*text = (char *)rx_buf_steal(&b, len)) == NULL)
        r = rx_fail(err, REXEC_EAUDIT, "%s: empty file", path);
out:
    rx_buf_free(&b);
    close(fd);
    return r;
}

/* ---- The document ----------------------------------------------------------------------- */

static int add_str(cJSON *o, const char *key, const char *v)
{
    return (v ? cJSON_AddStringToObject(o, key, v) : cJSON_AddNullToObject(o, key)) != NULL;
}

static int add_time(cJSON *o, const char *key, int64_t t)
{
    char s[32];
    rx_approval_time_str(t, s);
    return add_str(o, key, s);
}

/* A value as the file may hold it: through the workspace's redactor (a secret typed into a
 * parameter or rendered into the command never reaches approvals/ or the approval prompt). */
static int add_redacted(cJSON *o, const char *key, const rx_redactor *r, const char *p,
                        size_t len)
{
    rx_buf b;
    if (p == NULL)
        return add_str(o, key, NULL);
    rx_buf_init(&b, len * 2 + 4096);
    int ok = (r ? rx_redact_buf(r, p, len, &b) : rx_buf_add(&b, p, len)) == 0 &&
             rx_buf_addc(&b, 0) == 0 && add_str(o, key, (const char *)b.data);
    rx_buf_free(&b);
    return ok;
}

/* A parameter value is bytes with a length; validation refused NUL, so it is a C string. */
static int add_bytes(cJSON *o, const char *key, const rx_redactor *r, const char *p, size_t len)
{
    return add_redacted(o, key, r, p ? p : "", len);
}

static int ap_build_lists(cJSON *doc, const rx_challenge_in *in)
{
    cJSON *params = cJSON_AddObjectToObject(doc, "params");
    int ok = params != NULL;
    for (size_t i = 0; ok && i < in->n_params; i++)
        ok = add_bytes(params, in->params[i].name, in->redactor, in->params[i].value,
                       in->params[i].value_len);
    if (ok && in->has_stdin) {
        cJSON *s = cJSON_AddObjectToObject(doc, "stdin");
        ok = s != NULL && cJSON_AddNumberToObject(s, "bytes", (double)in->stdin_len) != NULL &&
             add_str(s, "sha256", in->stdin_sha256);
    } else if (ok) {
        ok = cJSON_AddNullToObject(doc, "stdin") != NULL;
    }
    cJSON *secrets = ok ? cJSON_AddArrayToObject(doc, "secrets") : NULL;
    ok = secrets != NULL;
    for (size_t i = 0; ok && i < in->n_secrets; i++) {
        cJSON *s = cJSON_CreateString(in->secrets[i]);
        ok = s != NULL && cJSON_AddItemToArray(secrets, s);
    }
    return ok;
}

/* Who asked (a serve client's uid and user), and the request's id in the audit log. */
static int ap_build_requester(cJSON *doc, const rx_challenge_in *in)
{
    if (in->request_id && !add_str(doc, "request_id", in->request_id))
        return 0;
    if (in->requester_uid < 0)
        return 1;
    cJSON *o = cJSON_AddObjectToObject(doc, "requester");
    return o != NULL && cJSON_AddNumberToObject(o, "uid", (double)in->requester_uid) != NULL &&
           add_str(o, "user", in->requester_user);
}

static cJSON *ap_build(const rx_challenge_in *in, const char *id, const char *code, int64_t now,
                       int64_t ttl)
{
    static const char *const risks[] = {"L0", "L1", "L2", "L3"};
    cJSON *doc = cJSON_CreateObject();
    int ok = doc != NULL && cJSON_AddNumberToObject(doc, "version", AP_VERSION) != NULL &&
             add_str(doc, "id", id) && add_str(doc, "state", "pending") &&
             add_time(doc, "created", now) && add_time(doc, "expires", now + ttl) &&
             add_str(doc, "host", in->host) && add_str(doc, "action", in->action) &&
             add_str(doc, "risk", risks[in->risk & 3]) &&
             add_str(doc, "declared_risk", risks[in->declared_risk & 3]) &&
             add_str(doc, "risk_why", in->risk_why) &&
             add_str(doc, "request_hash", in->request_hash) &&
             add_redacted(doc, "rendered", in->redactor, in->rendered,
                          in->rendered ? strlen(in->rendered) : 0) &&
             ap_build_lists(doc, in) && ap_build_requester(doc, in) &&
             add_str(doc, "code", code);
    if (!ok) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

static int get_time(const cJSON *o, const char *key, int required, int64_t *out, rexec_error *err)
{
    const char *s = NULL;
    int r = rx_json_get_string(o, key, "", required, &s, REXEC_EAUDIT, err);
    if (r == 0 && s != NULL && ap_time_parse(s, out) != 0)
        r = rx_json_fail(err, REXEC_EAUDIT, key, "not a time (YYYY-MM-DDTHH:MM:SSZ)");
    return r;
}

/* A member that may be absent or null; anything else must be a string. */
static int get_opt_str(const cJSON *o, const char *key, const char **out, rexec_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (it == NULL || cJSON_IsNull(it))
        return 0;
    return rx_json_get_string(o, key, "", 0, out, REXEC_EAUDIT, err);
}

static int parse_params(const cJSON *doc, rx_challenge *c, rexec_error *err)
{
    const cJSON *p = NULL, *it;
    int r = rx_json_get_object(doc, "params", "", 1, &p, REXEC_EAUDIT, err);
    size_t n = r == 0 ? (size_t)cJSON_GetArraySize(p) : 0;
    if (r != 0)
        return r;
    c->param_names = calloc(n + 1, sizeof(char *));
    c->param_values = calloc(n + 1, sizeof(char *));
    if (c->param_names == NULL || c->param_values == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    cJSON_ArrayForEach(it, p) {
        if (!cJSON_IsString(it))
            return rx_json_fail(err, REXEC_EAUDIT, "params", "expected strings");
        c->param_names[c->n_params] = it->string;
        c->param_values[c->n_params++] = it->valuestring;
    }
    return 0;
}

static int parse_secrets(const cJSON *doc, rx_challenge *c, rexec_error *err)
{
    const cJSON *a = NULL, *it;
    int r = rx_json_get_array(doc, "secrets", "", 1, &a, REXEC_EAUDIT, err);
    if (r != 0)
        return r;
    c->secrets = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(char *));
    if (c->secrets == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    cJSON_ArrayForEach(it, a) {
        if (!cJSON_IsString(it))
            return rx_json_fail(err, REXEC_EAUDIT, "secrets", "expected names");
        c->secrets[c->n_secrets++] = it->valuestring;
    }
    return 0;
}

static int parse_stdin(const cJSON *doc, rx_challenge *c, rexec_error *err)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(doc, "stdin");
    long long n = 0;
    int r;
    if (s == NULL || cJSON_IsNull(s))
        return 0;
    if ((r = rx_json_want(s, "stdin", cJSON_Object, REXEC_EAUDIT, err)) != 0 ||
        (r = rx_json_get_int(s, "bytes", "stdin", 1, 0, RX_JSON_MAX_SAFE_INT, &n, REXEC_EAUDIT,
                             err)) != 0 ||
        (r = rx_json_get_string(s, "sha256", "stdin", 1, &c->stdin_sha256, REXEC_EAUDIT, err)))
        return r;
    c->has_stdin = 1;
    c->stdin_len = (uint64_t)n;
    return 0;
}

static int parse_state(const cJSON *doc, int used, rx_challenge *c, rexec_error *err)
{
    const char *st = NULL;
    int r = rx_json_get_string(doc, "state", "", 1, &st, REXEC_EAUDIT, err);
    if (r != 0)
        return r;
    if (strcmp(st, "pending") == 0)
        c->state = RX_AP_PENDING;
    else if (strcmp(st, "approved") == 0)
        c->state = RX_AP_APPROVED;
    else if (strcmp(st, "used") == 0)
        c->state = RX_AP_USED;
    else if (strcmp(st, "denied") == 0)
        c->state = RX_AP_DENIED;
    else if (strcmp(st, "withdrawn") == 0)
        c->state = RX_AP_WITHDRAWN;
    else
        return rx_json_fail(err, REXEC_EAUDIT, "state", "unknown state");
    if (used) /* the name decides: a .used file is used, whatever its body says */
        c->state = RX_AP_USED;
    return 0;
}

/* An optional uid: absent or null is -1. */
static int get_opt_uid(const cJSON *o, const char *key, long *out, rexec_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    long long v = -1;
    int r = 0;
    if (it != NULL && !cJSON_IsNull(it))
        r = rx_json_get_int(o, key, "", 1, 0, 0xffffffffLL, &v, REXEC_EAUDIT, err);
    *out = (long)v;
    return r;
}

static int parse_decisions(const cJSON *doc, rx_challenge *c, rexec_error *err)
{
    int r;
    if ((r = get_opt_uid(doc, "approved_uid", &c->approved_uid, err)) != 0 ||
        (r = get_opt_str(doc, "approved_via", &c->approved_via, err)) != 0 ||
        (r = get_opt_str(doc, "comment", &c->comment, err)) != 0 ||
        (r = get_time(doc, "denied_at", 0, &c->denied_at, err)) != 0 ||
        (r = get_opt_str(doc, "denied_by", &c->denied_by, err)) != 0 ||
        (r = get_opt_uid(doc, "denied_uid", &c->denied_uid, err)) != 0 ||
        (r = get_opt_str(doc, "denied_via", &c->denied_via, err)) != 0)
        return r;
    return get_opt_str(doc, "deny_reason", &c->deny_reason, err);
}

static int parse_requester(const cJSON *doc, rx_challenge *c, rexec_error *err)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(doc, "requester");
    int r = get_opt_str(doc, "request_id", &c->request_id, err);
    c->requester_uid = -1;
    if (r != 0 || o == NULL || cJSON_IsNull(o))
        return r;
    if ((r = rx_json_want(o, "requester", cJSON_Object, REXEC_EAUDIT, err)) != 0 ||
        (r = get_opt_uid(o, "uid", &c->requester_uid, err)) != 0)
        return r;
    return get_opt_str(o, "user", &c->requester_user, err);
}

/* "targets": [{"host", "request_hash", "rendered", "used"}]: a fan-out's hosts. */
static int parse_targets(const cJSON *doc, rx_challenge *c, rexec_error *err)
{
    const cJSON *a = NULL, *it;
    int r = rx_json_get_array(doc, "targets", "", 0, &a, REXEC_EAUDIT, err);
    if (r != 0 || a == NULL)
        return r;
    size_t n = (size_t)cJSON_GetArraySize(a);
    if ((c->targets = calloc(n + 1, sizeof(*c->targets))) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    cJSON_ArrayForEach(it, a) {
        rx_challenge_target *t = &c->targets[c->n_targets++];
        if ((r = rx_json_want(it, "targets", cJSON_Object, REXEC_EAUDIT, err)) != 0 ||
            (r = rx_json_get_string(it, "host", "targets", 1, &t->host, REXEC_EAUDIT, err)) ||
            (r = rx_json_get_string(it, "request_hash", "targets", 1, &t->request_hash,
                                    REXEC_EAUDIT, err)) != 0 ||
            (r = get_opt_str(it, "rendered", &t->rendered, err)) != 0 ||
            (r = rx_json_get_bool(it, "used", "targets", 0, &t->used, REXEC_EAUDIT, err)) != 0)
            return r;
    }
    return 0;
}

static int parse_doc(const cJSON *doc, const char *id, int used, rx_challenge *c,
                     rexec_error *err)
{
    static const char *const keys[] = {
        "version", "id", "state", "created", "expires", "host", "action", "risk",
        "declared_risk", "risk_why", "request_hash", "rendered", "params", "stdin", "secrets",
        "code", "approved_at", "approved_by", "approved_tty", "used_at", "approved_uid",
        "approved_via", "comment", "denied_at", "denied_by", "denied_uid", "denied_via",
        "deny_reason", "requester", "request_id", "targets", NULL};
    const char *fid = NULL;
    long long v = 0;
    int r;
    if ((r = rx_json_want(doc, "", cJSON_Object, REXEC_EAUDIT, err)) != 0 ||
        (r = rx_json_check_keys(doc, "", keys, REXEC_EAUDIT, err)) != 0 ||
        (r = rx_json_get_int(doc, "version", "", 1, 1, 1000, &v, REXEC_EAUDIT, err)) != 0 ||
        (r = rx_json_get_string(doc, "id", "", 1, &fid, REXEC_EAUDIT, err)) != 0 ||
        (r = parse_state(doc, used, c, err)) != 0 ||
        (r = get_time(doc, "created", 1, &c->created, err)) != 0 ||
        (r = get_time(doc, "expires", 1, &c->expires, err)) != 0 ||
        (r = get_time(doc, "approved_at", 0, &c->approved_at, err)) != 0 ||
        (r = get_time(doc, "used_at", 0, &c->used_at, err)) != 0 ||
        (r = rx_json_get_string(doc, "host", "", 1, &c->host, REXEC_EAUDIT, err)) != 0 ||
        (r = rx_json_get_string(doc, "action", "", 1, &c->action, REXEC_EAUDIT, err)) != 0 ||
        (r = rx_json_get_string(doc, "risk", "", 1, &c->risk, REXEC_EAUDIT, err)) != 0 ||
        (r = get_opt_str(doc, "declared_risk", &c->declared_risk, err)) != 0 ||
        (r = get_opt_str(doc, "risk_why", &c->risk_why, err)) != 0 ||
        (r = rx_json_get_string(doc, "request_hash", "", 1, &c->request_hash, REXEC_EAUDIT,
                                err)) != 0 ||
        (r = get_opt_str(doc, "rendered", &c->rendered, err)) != 0 ||
        (r = parse_params(doc, c, err)) != 0 || (r = parse_stdin(doc, c, err)) != 0 ||
        (r = parse_secrets(doc, c, err)) != 0 ||
        (r = rx_json_get_string(doc, "code", "", 1, &c->code, REXEC_EAUDIT, err)) != 0 ||
        (r = get_opt_str(doc, "approved_by", &c->approved_by, err)) != 0 ||
        (r = get_opt_str(doc, "approved_tty", &c->approved_tty, err)) != 0 ||
        (r = parse_decisions(doc, c, err)) != 0 || (r = parse_requester(doc, c, err)) != 0 ||
        (r = parse_targets(doc, c, err)) != 0)
        return r;
    if (v != AP_VERSION)
        return rx_json_fail(err, REXEC_EAUDIT, "version", "unsupported version %lld", v);
    if (strcmp(fid, id) != 0) /* a file copied under another name is not that challenge */
        return rx_json_fail(err, REXEC_EAUDIT, "id", "does not match the file name");
    return 0;
}

void rx_challenge_free(rx_challenge *c)
{
    if (c == NULL)
        return;
    free(c->param_names);
    free(c->param_values);
    free(c->secrets);
    free(c->targets);
    cJSON_Delete(c->tree);
    memset(c, 0, sizeof(*c));
}

/* Loads <id>.json, else <id>.used, from an open approvals/. REXEC_EDENIED when neither exists. */
static int ap_load_in(const ap_dir *d, const char *id, rx_challenge *c, rexec_error *err)
{
    char name[AP_NAME_MAX], *text = NULL;
    size_t len = 0;
    int used = 0, r;
    cJSON *doc = NULL;

    memset(c, 0, sizeof(*c));
    snprintf(name, sizeof(name), "%s.json", id);
    if ((r = ap_read(d, name, &text, &len, err)) == 1) {
        used = 1;
        snprintf(name, sizeof(name), "%s.used", id);
        r = ap_read(d, name, &text, &len, err);
    }
    if (r == 1)
        return rx_fail(err, REXEC_EDENIED, "no challenge or grant %s in %s", id, d->path);
    if (r != 0)
        return r;
    r = rx_json_parse_strict(text, len, RX_APPROVAL_MAX_FILE, REXEC_EAUDIT, &doc, err);
    free(text);
    if (r == 0) {
        c->tree = doc;
        snprintf(c->id, sizeof(c->id), "%s", id);
        r = parse_doc(doc, id, used, c, err);
    }
    if (r != 0) {
        rx_fail_prefix(err, "%s/%s: not a valid challenge: ", d->path, name);
        rx_challenge_free(c);
    }
    return r;
}

int rx_approvals_load(const rx_ws *ws, const char *id, rx_challenge *out, rexec_error *err)
{
    char q[96];
    ap_dir d;
    int r;

    memset(out, 0, sizeof(*out));
    if (!rx_approval_id_ok(id))
        return rx_fail(err, REXEC_EDENIED, "%s is not an approval id (ch- and 16 hex digits)",
                       rx_msg_quote(q, sizeof(q), id ? id : "", id ? strlen(id) : 0, 40));
    if ((r = ap_dir_open(ws, 0, &d, err)) == 1)
        return rx_fail(err, REXEC_EDENIED, "no challenge or grant %s in %s", id, d.path);
    if (r == 0)
        r = ap_load_in(&d, id, out, err);
    ap_dir_close(&d);
    return r;
}

/* ---- Creating, approving, consuming ----------------------------------------------------- */

static int ap_random(unsigned char *p, size_t n, rexec_error *err)
{
    if (RAND_bytes(p, (int)n) != 1)
        return rx_fail(err, REXEC_EINTERNAL, "approvals: no random bytes from OpenSSL");
    return 0;
}

/* An id from 8 random bytes, a code from 6 more: Crockford's base32 (no I, L, O, U) so that
 * what the operator reads is what they type; 256 is a multiple of 32, so no bias. */
static void ap_names(const unsigned char rnd[14], char id[RX_APPROVAL_ID_LEN + 1],
                     char code[RX_APPROVAL_CODE_LEN + 1])
{
    static const char b32[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    memcpy(id, "ch-", 3);
    rx_hex_encode(rnd, 8, id + 3);
    for (int i = 0, o = 0; i < 6; i++, o++) {
        if (i == 3)
            code[o++] = '-';
        code[o] = b32[rnd[8 + i] & 31];
    }
    code[RX_APPROVAL_CODE_LEN] = 0;
}

int rx_approvals_create(const rx_ws *ws, const rx_challenge_in *in,
                        char id_out[RX_APPROVAL_ID_LEN + 1], rexec_error *err)
{
    unsigned char rnd[14];
    char id[RX_APPROVAL_ID_LEN + 1], code[RX_APPROVAL_CODE_LEN + 1], name[AP_NAME_MAX];
    cJSON *doc = NULL;
    ap_dir d = {.fd = -1};
    int r;

    if ((r = ap_random(rnd, sizeof(rnd), err)) != 0)
        return r;
    ap_names(rnd, id, code);
    if ((doc = ap_build(in, id, code, rx_approvals_now(), rx_approvals_ttl(ws))) == NULL) {
        r = rx_fail(err, REXEC_ENOMEM, "approvals: out of memory");
        goto out;
    }
    snprintf(name, sizeof(name), "%s.json", id);
    if (in->before_write && (r = in->before_write(in->ud, id, err)) != 0)
        goto out; /* no record of it, so no challenge either */
    if ((r = ap_dir_open(ws, 1, &d, err)) != 0 || (r = ap_write(&d, name, doc, err)) != 0)
        goto out;
    memcpy(id_out, id, sizeof(id));
out:
    OPENSSL_cleanse(rnd, sizeof(rnd));
    OPENSSL_cleanse(code, sizeof(code));
    cJSON_Delete(doc);
    ap_dir_close(&d);
    return r;
}

/* Sets o[key] = v, taking v (freed when it cannot be added). */
static int set_member(cJSON *o, const char *key, cJSON *v)
{
    int ok = v != NULL && (cJSON_GetObjectItemCaseSensitive(o, key) != NULL
                               ? cJSON_ReplaceItemInObjectCaseSensitive(o, key, v)
                               : cJSON_AddItemToObject(o, key, v));
    if (!ok)
        cJSON_Delete(v);
    return ok;
}

static int set_time(cJSON *o, const char *key, int64_t t)
{
    char s[32];
    rx_approval_time_str(t, s);
    return set_member(o, key, cJSON_CreateString(s));
}

/* Why a closed challenge (denied, withdrawn) can never be approved or used. */
static int ap_closed(const rx_challenge *c, rexec_error *err)
{
    if (c->state == RX_AP_WITHDRAWN)
        return rx_fail(err, REXEC_EDENIED, "challenge %s was withdrawn (%s)", c->id,
                       c->deny_reason ? c->deny_reason : "its caller stopped waiting");
    return rx_fail(err, REXEC_EDENIED, "challenge %s was denied by %s%s%s", c->id,
                   c->denied_by ? c->denied_by : "?", c->deny_reason ? ": " : "",
                   c->deny_reason ? c->deny_reason : "");
}

int rx_approvals_approvable(const rx_challenge *c, const char *expect_hash, rexec_error *err)
{
    char t[32];
    if (c->state == RX_AP_USED)
        return rx_fail(err, REXEC_EDENIED, "grant %s was already used", c->id);
    if (c->state == RX_AP_DENIED || c->state == RX_AP_WITHDRAWN)
        return ap_closed(c, err);
    if (rx_challenge_expired(c, rx_approvals_now())) {
        rx_approval_time_str(c->expires, t);
        return rx_fail(err, REXEC_EDENIED, "%s %s expired at %s", c->state == RX_AP_APPROVED ?
                       "grant" : "challenge", c->id, t);
    }
    if (c->state == RX_AP_APPROVED)
        return 1;
    if (expect_hash != NULL && strcmp(expect_hash, c->request_hash) != 0)
        return rx_fail(err, REXEC_EDENIED, "challenge %s changed while it was shown: not "
                       "approved", c->id);
    return 0;
}

static int set_uid(cJSON *o, const char *key, long uid)
{
    return set_member(o, key, uid >= 0 ? cJSON_CreateNumber((double)uid) : cJSON_CreateNull());
}

static int set_str(cJSON *o, const char *key, const char *v)
{
    return set_member(o, key, v ? cJSON_CreateString(v) : cJSON_CreateNull());
}

/* The members a decision writes. */
static int ap_mark(cJSON *doc, const rx_approval_decision *d, int64_t now, int64_t ttl)
{
    if (d->approve)
        return set_member(doc, "state", cJSON_CreateString("approved")) &&
               set_time(doc, "approved_at", now) && set_time(doc, "expires", now + ttl) &&
               set_str(doc, "approved_by", d->user ? d->user : "?") &&
               set_str(doc, "approved_tty", d->tty) && set_uid(doc, "approved_uid", d->uid) &&
               set_str(doc, "approved_via", d->via) && set_str(doc, "comment", d->note);
    return set_member(doc, "state", cJSON_CreateString(d->withdraw ? "withdrawn" : "denied")) &&
           set_time(doc, "denied_at", now) && set_str(doc, "denied_by", d->user ? d->user : "?") &&
           set_uid(doc, "denied_uid", d->uid) && set_str(doc, "denied_via", d->via) &&
           set_str(doc, "deny_reason", d->note);
}

/* An approval by the uid that asked is no approval: refused whatever the configuration. */
static int ap_self(const rx_challenge *c, const rx_approval_decision *d, rexec_error *err)
{
    if (!d->approve || !d->not_self || d->uid < 0 || c->requester_uid < 0 || d->uid != c->requester_uid)
        return 0;
    return rx_fail(err, REXEC_EDENIED, "%s (uid %ld) made the request of challenge %s and "
                   "cannot approve its own request: another user approves it",
                   d->user ? d->user : "?", d->uid, c->id);
}

int rx_approvals_decide(const rx_ws *ws, const char *id, const rx_approval_decision *d,
                        rx_challenge *after, rexec_error *err)
{
    char name[AP_NAME_MAX];
    rx_challenge c = {0};
    ap_dir d_ = {.fd = -1};
    int r;

    if (after != NULL)
        memset(after, 0, sizeof(*after));
    if (!rx_approval_id_ok(id))
        return rx_fail(err, REXEC_EDENIED, "not an approval id (ch- and 16 hex digits)");
    if ((r = ap_dir_open(ws, 0, &d_, err)) == 1)
        r = rx_fail(err, REXEC_EDENIED, "no challenge or grant %s in %s", id, d_.path);
    if (r != 0 || (r = ap_lock(&d_, err)) != 0 || (r = ap_load_in(&d_, id, &c, err)) != 0)
        goto out;
    r = rx_approvals_approvable(&c, d->expect_hash, err);
    if (r == 1 && !d->approve) {
        r = rx_fail(err, REXEC_EDENIED, "challenge %s was already approved by %s: a grant is "
                    "not denied (it expires unused, or `rexec approvals --prune` removes it)",
                    id, c.approved_by ? c.approved_by : "?");
        goto out;
    }
    if (r == 1)
        goto loaded;
    if (r != 0 || (r = ap_self(&c, d, err)) != 0)
        goto out;
    if (!ap_mark(c.tree, d, rx_approvals_now(), rx_approvals_ttl(ws))) {
        r = rx_fail(err, REXEC_ENOMEM, "approvals: out of memory");
        goto out;
    }
    snprintf(name, sizeof(name), "%s.json", id);
    if ((r = ap_write(&d_, name, c.tree, err)) != 0)
        goto out;
    rx_challenge_free(&c);
    r = ap_load_in(&d_, id, &c, err); /* as it is now, parsed */
loaded:
    if (after != NULL && (r == 0 || r == 1)) {
        *after = c;
        memset(&c, 0, sizeof(c));
    }
out:
    rx_challenge_free(&c);
    ap_dir_close(&d_);
    return r;
}

int rx_approvals_approve_as(const rx_ws *ws, const char *id, const char *user, const char *tty,
                            const char *expect_hash, rexec_error *err)
{
    rx_approval_decision d = {.approve = 1, .user = user, .uid = (long)getuid(), .via = "tty",
                              .tty = tty, .expect_hash = expect_hash};
    int r = rx_approvals_decide(ws, id, &d, NULL, err);
    return r == 1 ? 0 : r;
}

int rx_approvals_approve(const rx_ws *ws, const char *id, const char *user, rexec_error *err)
{
    rx_approval_decision d = {.approve = 1, .user = user, .uid = -1, .via = "tty"};
    int r = rx_approvals_decide(ws, id, &d, NULL, err);
    return r == 1 ? 0 : r;
}

/* Records when a consumed grant was used. Best effort: the rename already made the use
 * single, and a .used file is used whatever its body says. */
static void ap_stamp_used(const ap_dir *d, const char *id)
{
    char name[AP_NAME_MAX];
    rexec_error e;
    rx_challenge c;
    snprintf(name, sizeof(name), "%s.used", id);
    if (ap_load_in(d, id, &c, &e) != 0)
        return;
    if (set_member(c.tree, "state", cJSON_CreateString("used")) &&
        set_time(c.tree, "used_at", rx_approvals_now()))
        ap_write_how(d, name, c.tree, 0, &e); /* the fsynced rename made the use */
    rx_challenge_free(&c);
}

int rx_approvals_consume(const rx_ws *ws, const char *id, rexec_error *err)
{
    char from[AP_NAME_MAX], to[AP_NAME_MAX];
    ap_dir d = {.fd = -1};
    int r;

    if (!rx_approval_id_ok(id))
        return rx_fail(err, REXEC_EDENIED, "not an approval id (ch- and 16 hex digits)");
    if ((r = ap_dir_open(ws, 0, &d, err)) == 1)
        r = rx_fail(err, REXEC_EDENIED, "no grant %s in %s", id, d.path);
    if (r != 0 || (r = ap_lock(&d, err)) != 0)
        goto out;
    snprintf(from, sizeof(from), "%s.json", id);
    snprintf(to, sizeof(to), "%s.used", id);
    /* The single use: of any number of racing callers, one rename finds the file. */
    if (renameat(d.fd, from, d.fd, to) != 0) {
        r = errno == ENOENT ? rx_fail(err, REXEC_EDENIED, "grant %s was already used", id)
                            : rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot consume: %s", d.path,
                                      from, strerror(errno));
        goto out;
    }
    if (fsync(d.fd) != 0 && errno != EINVAL) /* a use forgotten by a crash could be repeated */
        r = rx_fail(err, REXEC_EAUDIT, "%s: fsync: %s", d.path, strerror(errno));
    ap_stamp_used(&d, id);
out:
    ap_dir_close(&d);
    return r;
}

/* ---- Fan-out challenges ------------------------------------------------------------------ */

const rx_challenge_target *rx_challenge_target_of(const rx_challenge *c, const char *host)
{
    for (size_t i = 0; host != NULL && i < c->n_targets; i++)
        if (strcmp(c->targets[i].host, host) == 0)
            return &c->targets[i];
    return NULL;
}

const char *rx_challenge_hosts_str(const rx_challenge *c, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    if (c->n_targets == 0)
        snprintf(out, cap, "%s", c->host ? c->host : "?");
    for (size_t i = 0; i < c->n_targets && at < cap; i++) {
        int w = snprintf(out + at, cap - at, "%s%s", i ? "," : "", c->targets[i].host);
        if (w < 0)
            break;
        at += (size_t)w;
    }
    return out;
}

static cJSON *ap_target_json(const char *host, const char *hash, const char *rendered,
                             const rx_redactor *r)
{
    cJSON *t = cJSON_CreateObject();
    int ok = t != NULL && add_str(t, "host", host) && add_str(t, "request_hash", hash) &&
             (rendered ? add_redacted(t, "rendered", r, rendered, strlen(rendered))
                       : add_str(t, "rendered", NULL)) &&
             cJSON_AddFalseToObject(t, "used") != NULL;
    if (!ok) {
        cJSON_Delete(t);
        return NULL;
    }
    return t;
}

/* The targets array of a challenge's document, made from its one host when it has none. */
static cJSON *ap_targets_of(cJSON *doc, const rx_challenge *c)
{
    cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, "targets"), *t;
    if (a != NULL)
        return a;
    if ((a = cJSON_AddArrayToObject(doc, "targets")) == NULL ||
        (t = ap_target_json(c->host, c->request_hash, NULL, NULL)) == NULL)
        return NULL;
    cJSON_AddItemToArray(a, t);
    return a;
}

int rx_approvals_add_target(const rx_ws *ws, const char *id, const char *host,
                            const char *request_hash, const char *rendered,
                            const rx_redactor *redactor, rexec_error *err)
{
    char name[AP_NAME_MAX];
    rx_challenge c = {0};
    ap_dir d = {.fd = -1};
    cJSON *a, *t;
    int r;

    r = ap_dir_open(ws, 0, &d, err);
    if (r == 0 && (r = ap_lock(&d, err)) == 0 && (r = ap_load_in(&d, id, &c, err)) == REXEC_EDENIED)
        r = 1; /* gone (pruned): a new challenge */
    if (r != 0)
        goto out;
    if (c.state != RX_AP_PENDING || rx_challenge_expired(&c, rx_approvals_now())) {
        r = 1; /* decided meanwhile: this host's request gets a challenge of its own */
        goto out;
    }
    if (rx_challenge_target_of(&c, host) != NULL || (c.n_targets == 0 && strcmp(c.host, host) == 0))
        goto out; /* listed already */
    if ((a = ap_targets_of(c.tree, &c)) == NULL ||
        (t = ap_target_json(host, request_hash, rendered, redactor)) == NULL) {
        r = rx_fail(err, REXEC_ENOMEM, "approvals: out of memory");
        goto out;
    }
    cJSON_AddItemToArray(a, t);
    snprintf(name, sizeof(name), "%s.json", id);
    r = ap_write(&d, name, c.tree, err);
out:
    rx_challenge_free(&c);
    ap_dir_close(&d);
    return r;
}

/* Marks host's target used in doc; 1 when every target is used now. */
static int ap_target_use(cJSON *doc, const char *host)
{
    cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, "targets"), *t;
    int all = 1;
    cJSON_ArrayForEach(t, a) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "host");
        if (cJSON_IsString(h) && strcmp(h->valuestring, host) == 0) {
            set_member(t, "used", cJSON_CreateTrue());
            set_time(t, "used_at", rx_approvals_now());
        }
        all &= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "used"));
    }
    return all;
}

int rx_approvals_consume_host(const rx_ws *ws, const char *id, const char *host,
                              rexec_error *err)
{
    char name[AP_NAME_MAX], used[AP_NAME_MAX];
    rx_challenge c = {0};
    ap_dir d = {.fd = -1};
    const rx_challenge_target *t;
    int r;

    if (!rx_approval_id_ok(id))
        return rx_fail(err, REXEC_EDENIED, "not an approval id (ch- and 16 hex digits)");
    if ((r = ap_dir_open(ws, 0, &d, err)) == 1)
        r = rx_fail(err, REXEC_EDENIED, "no grant %s in %s", id, d.path);
    if (r != 0 || (r = ap_lock(&d, err)) != 0 || (r = ap_load_in(&d, id, &c, err)) != 0)
        goto out;
    if (c.n_targets == 0) { /* not a fan-out: the rename is the use */
        ap_dir_close(&d);
        rx_challenge_free(&c);
        return rx_approvals_consume(ws, id, err);
    }
    t = rx_challenge_target_of(&c, host);
    if (c.state != RX_AP_APPROVED || t == NULL || t->used) {
        r = rx_fail(err, REXEC_EDENIED, "grant %s was already used%s%s", id, t ? " by host " : "",
                    t ? host : "");
        goto out;
    }
    snprintf(name, sizeof(name), "%s.json", id);
    snprintf(used, sizeof(used), "%s.used", id);
    if (ap_target_use(c.tree, host)) { /* the last host: the grant is spent */
        set_member(c.tree, "state", cJSON_CreateString("used"));
        set_time(c.tree, "used_at", rx_approvals_now());
        if ((r = ap_write(&d, name, c.tree, err)) == 0 && renameat(d.fd, name, d.fd, used) != 0)
            r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot consume: %s", d.path, name,
                        strerror(errno));
        if (r == 0 && fsync(d.fd) != 0 && errno != EINVAL)
            r = rx_fail(err, REXEC_EAUDIT, "%s: fsync: %s", d.path, strerror(errno));
    } else {
        r = ap_write(&d, name, c.tree, err);
    }
out:
    rx_challenge_free(&c);
    ap_dir_close(&d);
    return r;
}

/* ---- Listing and pruning ---------------------------------------------------------------- */

/* The id of an entry named "<id>.json" or "<id>.used" (the latter only when used_too). */
static int ap_entry_id(const char *name, int used_too, char id[RX_APPROVAL_ID_LEN + 1])
{
    size_t n = strlen(name);
    if (n != RX_APPROVAL_ID_LEN + 5)
        return 0;
    if (strcmp(name + RX_APPROVAL_ID_LEN, ".json") != 0 &&
        !(used_too && strcmp(name + RX_APPROVAL_ID_LEN, ".used") == 0))
        return 0;
    memcpy(id, name, RX_APPROVAL_ID_LEN);
    id[RX_APPROVAL_ID_LEN] = 0;
    return rx_approval_id_ok(id);
}

typedef int (*ap_visit_fn)(const ap_dir *d, const char *name, rx_challenge *c, void *ud,
                           rexec_error *err);

/* Calls fn for every challenge file of approvals/, loaded; entries that vanish meanwhile (a
 * racing consume or prune) are skipped. */
static int ap_each(const ap_dir *d, int used_too, ap_visit_fn fn, void *ud, rexec_error *err)
{
    char id[RX_APPROVAL_ID_LEN + 1];
    int fd = dup(d->fd), r = 0;
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *de;

    if (dir == NULL) {
        if (fd >= 0)
            close(fd);
        return rx_fail(err, REXEC_EAUDIT, "%s: %s", d->path, strerror(errno));
    }
    rewinddir(dir);
    while (r == 0 && (de = readdir(dir)) != NULL) {
        rx_challenge c;
        if (!ap_entry_id(de->d_name, used_too, id))
            continue;
        if ((r = ap_load_in(d, id, &c, err)) == REXEC_EDENIED) {
            r = 0;
            continue;
        }
        if (r == 0)
            r = fn(d, de->d_name, &c, ud, err);
        rx_challenge_free(&c);
    }
    closedir(dir);
    return r;
}

typedef struct ap_list {
    rx_challenge *v;
    size_t n, cap;
    int include_used;
} ap_list;

static int list_one(const ap_dir *d, const char *name, rx_challenge *c, void *ud,
                    rexec_error *err)
{
    ap_list *l = ud;
    (void)d;
    /* <id>.json may have been consumed since readdir: then it is listed under <id>.used */
    if ((c->state == RX_AP_USED && !l->include_used) ||
        (c->state == RX_AP_USED && strstr(name, ".json") != NULL))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        rx_challenge *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL)
            return rx_fail(err, REXEC_ENOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *c;
    memset(c, 0, sizeof(*c)); /* moved into the list */
    return 0;
}

static int by_created(const void *a, const void *b)
{
    const rx_challenge *x = a, *y = b;
    if (x->created != y->created)
        return x->created < y->created ? -1 : 1;
    return strcmp(x->id, y->id);
}

int rx_approvals_list(const rx_ws *ws, int include_used, rx_challenge **out, size_t *n,
                      rexec_error *err)
{
    ap_list l = {.include_used = include_used};
    ap_dir d = {.fd = -1};
    int r = ap_dir_open(ws, 0, &d, err);

    *out = NULL;
    *n = 0;
    if (r == 1)
        return 0;
    if (r == 0)
        r = ap_each(&d, 1, list_one, &l, err);
    ap_dir_close(&d);
    if (r != 0) {
        rx_challenges_free(l.v, l.n);
        return r;
    }
    if (l.n > 1)
        qsort(l.v, l.n, sizeof(*l.v), by_created);
    *out = l.v;
    *n = l.n;
    return 0;
}

void rx_challenges_free(rx_challenge *list, size_t n)
{
    for (size_t i = 0; list != NULL && i < n; i++)
        rx_challenge_free(&list[i]);
    free(list);
}

typedef struct ap_prune {
    int64_t now, ttl;
    size_t removed;
} ap_prune;

static int prune_one(const ap_dir *d, const char *name, rx_challenge *c, void *ud,
                     rexec_error *err)
{
    ap_prune *p = ud;
    int64_t used = c->used_at ? c->used_at : c->expires;
    int closed = c->state == RX_AP_DENIED || c->state == RX_AP_WITHDRAWN;
    int old = c->state == RX_AP_USED ? p->now >= used + p->ttl
              : closed               ? p->now >= c->expires /* kept as long as it could matter */
                                     : rx_challenge_expired(c, p->now);
    if (!old || (c->state == RX_AP_USED && strstr(name, ".json") != NULL))
        return 0;
    if (unlinkat(d->fd, name, 0) != 0 && errno != ENOENT)
        return rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot remove: %s", d->path, name,
                       strerror(errno));
    p->removed++;
    return 0;
}

int rx_approvals_prune(const rx_ws *ws, size_t *removed, rexec_error *err)
{
    ap_prune p = {.now = rx_approvals_now(), .ttl = rx_approvals_ttl(ws)};
    ap_dir d = {.fd = -1};
    int r = ap_dir_open(ws, 0, &d, err);

    if (r == 0 && (r = ap_lock(&d, err)) == 0)
        r = ap_each(&d, 1, prune_one, &p, err);
    ap_dir_close(&d);
    if (removed != NULL)
        *removed = p.removed;
    return r == 1 ? 0 : r;
}
