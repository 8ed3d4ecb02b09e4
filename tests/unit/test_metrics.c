/* The metrics registry's Prometheus text (src/base/metrics.c): every family has HELP and TYPE
 * lines, label values are escaped, histogram buckets are cumulative and end in +Inf equal to
 * _count, _sum is in seconds, counts add up, and the exit-status classes are as documented. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"

static char *render(const rx_metrics_gauges *g)
{
    rx_buf b;
    rx_buf_init(&b, 1 << 20);
    assert_int_equal(rx_metrics_render(g, &b), 0);
    return (char *)rx_buf_steal(&b, NULL);
}

/* The value of the sample line that starts with key followed by a space; -1 if none. */
static double value_of(const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static int count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        n += strncmp(p, prefix, len) == 0;
    return n;
}

static void test_escape(void **state)
{
    (void)state;
    rx_buf b;
    rx_buf_init(&b, 1024);
    assert_int_equal(rx_metrics_escape_label("a\\b\"c\nd", &b), 0);
    assert_string_equal((char *)b.data, "a\\\\b\\\"c\\nd");
    rx_buf_free(&b);
    rx_metrics_gauges g = {.version = "1.0 \"q\"\\\n"};
    char *t = render(&g);
    assert_non_null(strstr(t, "rexec_build_info{version=\"1.0 \\\"q\\\"\\\\\\n\"} 1\n"));
    free(t);
}

static void test_help_and_type(void **state)
{
    (void)state;
    rx_metrics_reset();
    rx_metrics_gauges g = {.version = "0.1.0"};
    char *t = render(&g);
    static const char *const families[] = {
        "rexec_build_info gauge", "rexec_calls_total counter", "rexec_evals_total counter",
        "rexec_call_duration_seconds histogram", "rexec_audit_write_seconds histogram",
        "rexec_evidence_write_seconds histogram", "rexec_redacted_bytes_total counter",
        "rexec_reloads_total counter", "rexec_notify_failures_total counter",
        "rexec_ssh_connections gauge", "rexec_runners gauge", "rexec_queued_calls gauge",
        "rexec_recorder_queue gauge", "rexec_serve_clients gauge",
        "rexec_serve_requests_in_flight gauge"};
    for (size_t i = 0; i < sizeof(families) / sizeof(*families); i++) {
        char type[128], help[128];
        snprintf(type, sizeof(type), "# TYPE %s\n", families[i]);
        snprintf(help, sizeof(help), "# HELP %.*s ", (int)strcspn(families[i], " "), families[i]);
        assert_non_null(strstr(t, type));
        assert_non_null(strstr(t, help));
    }
    assert_int_equal(count_lines(t, "# TYPE "), (int)(sizeof(families) / sizeof(*families)));
    /* every (decision, exit_class) pair is there from the start, at 0 */
    assert_int_equal(count_lines(t, "rexec_calls_total{"), 15);
    assert_true(value_of(t, "rexec_calls_total{decision=\"needs_approval\",exit_class=\"unavailable\"}") == 0);
    /* every line ends in a newline, the text too; no line is empty */
    assert_int_equal(t[strlen(t) - 1], '\n');
    assert_null(strstr(t, "\n\n"));
    free(t);
}

static void test_counts(void **state)
{
    (void)state;
    rx_metrics_reset();
    rx_metrics_count_call(RX_MDEC_ALLOWED, RX_MEXIT_OK, 1000);
    rx_metrics_count_call(RX_MDEC_ALLOWED, RX_MEXIT_OK, 2000);
    rx_metrics_count_call(RX_MDEC_REFUSED, RX_MEXIT_FAILED, 10);
    rx_metrics_count_call(RX_MDEC_N, RX_MEXIT_OK, 10); /* out of range: ignored */
    rx_metrics_count_eval(RX_MDEC_NEEDS_APPROVAL);
    rx_metrics_count_redacted_bytes(40);
    rx_metrics_count_redacted_bytes(2);
    rx_metrics_count_reload(1);
    rx_metrics_count_reload(0);
    rx_metrics_count_reload(0);
    rx_metrics_count_notify_failure();
    rx_metrics_gauges g = {.ssh_connections = {1, 2, 0, 0}, .runners = {0, 3, 1, 0},
                           .queued_calls = 7, .recorder_queue = 4, .serve_clients = {5, 0, 0, 1},
                           .requests_in_flight = 6};
    char *t = render(&g);
    assert_true(value_of(t, "rexec_calls_total{decision=\"allowed\",exit_class=\"ok\"}") == 2);
    assert_true(value_of(t, "rexec_calls_total{decision=\"refused\",exit_class=\"failed\"}") == 1);
    assert_true(value_of(t, "rexec_evals_total{decision=\"needs_approval\"}") == 1);
    assert_true(value_of(t, "rexec_redacted_bytes_total") == 42);
    assert_true(value_of(t, "rexec_reloads_total{result=\"ok\"}") == 1);
    assert_true(value_of(t, "rexec_reloads_total{result=\"refused\"}") == 2);
    assert_true(value_of(t, "rexec_notify_failures_total") == 1);
    assert_true(value_of(t, "rexec_ssh_connections{state=\"ready\"}") == 2);
    assert_true(value_of(t, "rexec_runners{state=\"idle\"}") == 3);
    assert_true(value_of(t, "rexec_runners{state=\"busy\"}") == 1);
    assert_true(value_of(t, "rexec_queued_calls") == 7);
    assert_true(value_of(t, "rexec_recorder_queue") == 4);
    assert_true(value_of(t, "rexec_serve_clients{state=\"reading\"}") == 5);
    assert_true(value_of(t, "rexec_serve_clients{state=\"closing\"}") == 1);
    assert_true(value_of(t, "rexec_serve_requests_in_flight") == 6);
    assert_null(strstr(t, "rexec_build_info")); /* no version: left out */
    free(t);
}

static void test_histogram(void **state)
{
    (void)state;
    rx_metrics_reset();
    rx_metrics_count_call(RX_MDEC_ALLOWED, RX_MEXIT_OK, 5000);     /* on the bound 0.005 */
    rx_metrics_count_call(RX_MDEC_ALLOWED, RX_MEXIT_OK, 5001);     /* just above: 0.01 */
    rx_metrics_count_call(RX_MDEC_ALLOWED, RX_MEXIT_FAILED, 2000000); /* 2 s: 2.5 */
    rx_metrics_count_call(RX_MDEC_ALLOWED, RX_MEXIT_TIMEOUT, 4000000000ull); /* above all */
    rx_metrics_gauges g = {0};
    char *t = render(&g);
    const char *h = "rexec_call_duration_seconds";
    char key[128];
    static const struct { const char *le; double n; } want[] = {
        {"0.005", 1}, {"0.01", 2}, {"0.025", 2}, {"1", 2}, {"2.5", 3}, {"600", 3}, {"+Inf", 4}};
    for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
        snprintf(key, sizeof(key), "%s_bucket{le=\"%s\"}", h, want[i].le);
        assert_true(value_of(t, key) == want[i].n);
    }
    snprintf(key, sizeof(key), "%s_count", h);
    assert_true(value_of(t, key) == 4);
    snprintf(key, sizeof(key), "%s_sum", h);
    assert_non_null(strstr(t, "rexec_call_duration_seconds_sum 4002.010001\n"));
    /* buckets never go down, from the first to +Inf */
    snprintf(key, sizeof(key), "%s_bucket{", h);
    double last = -1;
    int n = 0;
    for (const char *p = strstr(t, key); p && strncmp(p, key, strlen(key)) == 0;
         p = strchr(p, '\n') + 1, n++) {
        double v = strtod(strchr(p, ' ') + 1, NULL);
        assert_true(v >= last);
        last = v;
    }
    assert_int_equal(n, 16); /* 15 bounds and +Inf */
    /* an empty histogram: zeros, +Inf and _count 0 */
    assert_true(value_of(t, "rexec_audit_write_seconds_bucket{le=\"+Inf\"}") == 0);
    assert_true(value_of(t, "rexec_audit_write_seconds_count") == 0);
    assert_non_null(strstr(t, "rexec_audit_write_seconds_sum 0.000000\n"));
    free(t);
}

static void test_classes(void **state)
{
    (void)state;
    assert_int_equal(rx_metrics_decision("ALLOW"), RX_MDEC_ALLOWED);
    assert_int_equal(rx_metrics_decision("REQUIRES_APPROVAL"), RX_MDEC_NEEDS_APPROVAL);
    assert_int_equal(rx_metrics_decision("DENY"), RX_MDEC_REFUSED);
    assert_int_equal(rx_metrics_decision(NULL), RX_MDEC_REFUSED);
    assert_int_equal(rx_metrics_exit_class(0, 0, 0), RX_MEXIT_OK);
    assert_int_equal(rx_metrics_exit_class(3, 0, 0), RX_MEXIT_FAILED);
    assert_int_equal(rx_metrics_exit_class(77, 0, 0), RX_MEXIT_FAILED);
    assert_int_equal(rx_metrics_exit_class(124, 1, 0), RX_MEXIT_TIMEOUT);
    assert_int_equal(rx_metrics_exit_class(124, 0, 0), RX_MEXIT_FAILED); /* exit 124 by itself */
    assert_int_equal(rx_metrics_exit_class(130, 0, 1), RX_MEXIT_CANCELLED);
    assert_int_equal(rx_metrics_exit_class(255, 0, 0), RX_MEXIT_UNAVAILABLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),    cmocka_unit_test(test_help_and_type),
        cmocka_unit_test(test_counts),    cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
