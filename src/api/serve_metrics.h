/* serve's metrics (docs/metrics.md): the Prometheus text of the process's registry
 * (src/base/metrics.h) with the gauges counted now on the loop, for {"op":"metrics"}, and the
 * file node_exporter's textfile collector reads (`rexec serve --metrics-file PATH`), replaced
 * whole every interval by a timer on serve's loop, and once more when serve stops. */
#ifndef RX_SERVE_METRICS_H
#define RX_SERVE_METRICS_H

#include <uv.h>

#include "buf.h"
#include "metrics.h"
#include "rexec.h"

/* Fills g's pool, runner, recorder and version gauges from ctx (g's serve gauges are the
 * caller's), then renders everything into out. Loop thread. 0 or an rx_buf error. */
int rx_serve_metrics_render(const rexec_ctx *ctx, rx_metrics_gauges *g, rx_buf *out);

typedef int (*rx_metrics_text_fn)(void *ud, rx_buf *out);
typedef struct rx_metrics_file rx_metrics_file;

/* Writes path once now (a path that cannot be written refuses the start: REXEC_EUSAGE naming
 * it), then every interval_s seconds from a timer on loop. text renders the content. */
int rx_metrics_file_start(uv_loop_t *loop, const char *path, double interval_s,
                          rx_metrics_text_fn text, void *ud, rx_metrics_file **out,
                          rexec_error *err);
/* Writes it one last time (text is still called), stops the timer and frees f from the loop.
 * NULL is fine. */
void rx_metrics_file_close(rx_metrics_file *f);

#endif
