/* serve's metrics text and metrics file (serve_metrics.h). */
#include "serve_metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "call.h"
#include "err.h"

#define METRICS_TEXT_MAX ((size_t)1 << 20) /* the text is about 10 KiB */

int rx_serve_metrics_render(const rexec_ctx *ctx, rx_metrics_gauges *g, rx_buf *out)
{
    rx_pool_counts pc;
    rx_pool_count(ctx->pool, &pc);
    memcpy(g->ssh_connections, pc.conns, sizeof(g->ssh_connections));
    memcpy(g->runners, pc.runners, sizeof(g->runners));
    g->queued_calls = pc.queued;
    g->recorder_queue = rx_recorder_queued(ctx->rec);
    g->version = rexec_version();
    /* Counts and fixed names only; still through the redactor, as every output of rexec
     * (a few microseconds for the ~10 KiB). */
    rx_buf raw;
    rx_buf_init(&raw, METRICS_TEXT_MAX);
    int r = rx_metrics_render(g, &raw);
    if (r == 0)
        r = rx_redact_buf(rx_ctx_redactor(ctx), raw.data, raw.len, out);
    rx_buf_free(&raw);
    return r;
}

struct rx_metrics_file {
    uv_timer_t timer;
    char *path, *tmp;
    rx_metrics_text_fn text;
    void *ud;
    int failing; /* the last write failed: said once, and again once it works */
};

/* The whole file or nothing: a temporary file in the same directory (named with a leading dot
 * and no .prom, so the textfile collector never reads it), renamed over path. Readers see the
 * old or the new text, never a part. No fsync: the collector needs atomic replacement, not
 * durability, and an fsync on the loop every interval would stall every client; after a crash
 * the next start writes the file again. Mode 0644: counts only, for node_exporter's user. */
static int file_write(rx_metrics_file *f, rexec_error *err)
{
    rx_buf b;
    rx_buf_init(&b, METRICS_TEXT_MAX);
    int r = f->text(f->ud, &b), fd = -1, ok = 0;
    if (r != 0) {
        rx_fail(err, REXEC_ENOMEM, "metrics file %s: the text could not be built", f->path);
        goto out;
    }
    fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || fchmod(fd, 0644) != 0 || write(fd, b.data, b.len) != (ssize_t)b.len) {
        rx_fail(err, REXEC_EUSAGE, "metrics file %s: cannot write %s: %s", f->path, f->tmp,
                strerror(errno));
        goto out;
    }
    if (close(fd) != 0 || (fd = -1, rename(f->tmp, f->path) != 0)) {
        fd = -1;
        rx_fail(err, REXEC_EUSAGE, "metrics file %s: cannot replace it: %s", f->path,
                strerror(errno));
        goto out;
    }
    ok = 1;
out:
    if (fd >= 0)
        close(fd);
    if (!ok)
        unlink(f->tmp);
    rx_buf_free(&b);
    return ok ? 0 : (err->code ? err->code : REXEC_EUSAGE);
}

/* A failure is said once on stderr (serve's own messages go there), and the recovery too. */
static void file_write_logged(rx_metrics_file *f)
{
    rexec_error e = {0};
    int r = file_write(f, &e);
    if (r != 0 && !f->failing)
        fprintf(stderr, "rexec serve: %s (tried again every interval)\n", e.msg);
    else if (r == 0 && f->failing)
        fprintf(stderr, "rexec serve: metrics file %s: written again\n", f->path);
    f->failing = r != 0;
}

static void on_tick(uv_timer_t *t)
{
    file_write_logged(t->data);
}

static void file_free(rx_metrics_file *f)
{
    free(f->path);
    free(f->tmp);
    free(f);
}

static char *tmp_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path + 1) : 0;
    size_t n = strlen(path) + 32;
    char *t = malloc(n);
    if (t != NULL)
        snprintf(t, n, "%.*s.%s.tmp", (int)dir, path, path + dir);
    return t;
}

int rx_metrics_file_start(uv_loop_t *loop, const char *path, double interval_s,
                          rx_metrics_text_fn text, void *ud, rx_metrics_file **out,
                          rexec_error *err)
{
    rx_metrics_file *f = calloc(1, sizeof(*f));
    int r;
    if (f == NULL || (f->path = strdup(path)) == NULL || (f->tmp = tmp_path(path)) == NULL) {
        if (f)
            file_free(f);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    f->text = text;
    f->ud = ud;
    if ((r = file_write(f, err)) != 0) {
        file_free(f);
        return r;
    }
    uint64_t ms = (uint64_t)(interval_s * 1000.0);
    uv_timer_init(loop, &f->timer);
    f->timer.data = f;
    uv_timer_start(&f->timer, on_tick, ms, ms);
    uv_unref((uv_handle_t *)&f->timer); /* the file alone does not keep serve's loop alive */
    *out = f;
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    file_free(h->data);
}

void rx_metrics_file_close(rx_metrics_file *f)
{
    if (f == NULL)
        return;
    file_write_logged(f);
    uv_timer_stop(&f->timer);
    uv_close((uv_handle_t *)&f->timer, on_timer_closed);
}
