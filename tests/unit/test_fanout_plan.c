/* The fan-out's plan (src/api/fanout_plan.c): "N" / "P%" parsed strictly, the batches it makes
 * (canary first, then N or P% at a time), which host may start, when a batch is over, the
 * failure threshold (more than max_failures stops every host not started), and the retries of a
 * call that never reached its host (never of one that ran). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fanout_plan.h"

static rexec_fanout *plan(const char *batch, long canary, const char *max_failures,
                          long retries, size_t n)
{
    rexec_fanout_spec spec = {batch, canary, max_failures, retries};
    rexec_fanout *f = NULL;
    rexec_error e;
    if (rexec_fanout_new(&spec, n, 1, &f, &e) != 0)
        fail_msg("plan refused: %s", e.msg);
    return f;
}

static int refused(const char *batch, long canary, const char *max_failures, long retries,
                   size_t n, const char *want_in_msg)
{
    rexec_fanout_spec spec = {batch, canary, max_failures, retries};
    rexec_fanout *f = (rexec_fanout *)1;
    rexec_error e = {0};
    int r = rexec_fanout_new(&spec, n, 1, &f, &e);
    assert_null(f);
    if (r == 0 || e.code != REXEC_EUSAGE || strstr(e.msg, want_in_msg) == NULL)
        fail_msg("expected a usage error naming %s, got %d: %s", want_in_msg, r, e.msg);
    return 1;
}

/* The batch sizes as "2,2,1". */
static const char *sizes(const rexec_fanout *f, char *buf, size_t cap)
{
    size_t at = 0, from = 0;
    buf[0] = 0;
    for (size_t k = 0; k < f->n_batches; from = f->ends[k++])
        at += (size_t)snprintf(buf + at, cap - at, "%s%zu", k ? "," : "", f->ends[k] - from);
    return buf;
}

static rexec_result with_status(int status)
{
    rexec_result r = {.exit_status = status, .executed = status != 255};
    return r;
}

static void test_count_parse(void **state)
{
    (void)state;
    rx_count c;
    rexec_error e;
    assert_int_equal(rx_count_parse("--batch", "8", 1, &c, &e), 0);
    assert_int_equal(c.value, 8);
    assert_false(c.percent);
    assert_int_equal(rx_count_parse("--batch", "25%", 1, &c, &e), 0);
    assert_int_equal(c.value, 25);
    assert_true(c.percent);
    assert_int_equal(rx_count_parse("--max-failures", "0", 0, &c, &e), 0);
    assert_int_equal(rx_count_parse("--max-failures", "0%", 0, &c, &e), 0);
    assert_int_equal(rx_count_parse("--batch", "100%", 1, &c, &e), 0);
    assert_int_equal(rx_count_parse("--batch", "1000000", 1, &c, &e), 0);
    static const char *const bad[] = {"0", "0%", "101%", "-1", "+1", "1.5", "1e3", " 1", "1 ",
                                      "%", "", "x", "2x", "1%%", "1000001", "99999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        if (rx_count_parse("--batch", bad[i], 1, &c, &e) != REXEC_EUSAGE)
            fail_msg("--batch \"%s\" taken", bad[i]);
        assert_non_null(strstr(e.msg, "--batch"));
    }
    assert_int_equal(rx_count_parse("--max-failures", "-1", 0, &c, &e), REXEC_EUSAGE);
    assert_int_equal(rx_count_parse("--max-failures", "101%", 0, &c, &e), REXEC_EUSAGE);
    assert_int_equal(rx_count_parse("--batch", NULL, 1, &c, &e), REXEC_EUSAGE);
}

static void test_count_of(void **state)
{
    (void)state;
    rx_count p25 = {25, 1}, p10 = {10, 1}, n3 = {3, 0}, p100 = {100, 1}, p1 = {1, 1};
    assert_int_equal(rx_count_of(&p25, 8, 1), 2);
    assert_int_equal(rx_count_of(&p25, 9, 1), 3);  /* 2.25 up */
    assert_int_equal(rx_count_of(&p25, 9, 0), 2);  /* down */
    assert_int_equal(rx_count_of(&p10, 64, 0), 6);
    assert_int_equal(rx_count_of(&p1, 5, 1), 1);
    assert_int_equal(rx_count_of(&p1, 5, 0), 0);
    assert_int_equal(rx_count_of(&p100, 7, 1), 7);
    assert_int_equal(rx_count_of(&n3, 100, 1), 3);
}

static void test_batches(void **state)
{
    (void)state;
    char b[256];
    rexec_fanout *f;
    f = plan("2", 0, NULL, 0, 5);
    assert_string_equal(sizes(f, b, sizeof(b)), "2,2,1");
    rexec_fanout_free(f);
    f = plan("25%", 0, NULL, 0, 8);
    assert_string_equal(sizes(f, b, sizeof(b)), "2,2,2,2");
    rexec_fanout_free(f);
    f = plan("8", 0, NULL, 0, 64);
    assert_int_equal(f->n_batches, 8);
    rexec_fanout_free(f);
    f = plan("3", 1, NULL, 0, 8); /* the canary first, then 3 at a time */
    assert_string_equal(sizes(f, b, sizeof(b)), "1,3,3,1");
    rexec_fanout_free(f);
    f = plan(NULL, 2, NULL, 0, 8); /* a canary alone: then all the rest */
    assert_string_equal(sizes(f, b, sizeof(b)), "2,6");
    rexec_fanout_free(f);
    f = plan("2", 4, NULL, 0, 4); /* a canary of every host: one batch */
    assert_string_equal(sizes(f, b, sizeof(b)), "4");
    rexec_fanout_free(f);
    f = plan("10", 0, NULL, 0, 3); /* a batch larger than the list: one batch */
    assert_string_equal(sizes(f, b, sizeof(b)), "3");
    rexec_fanout_free(f);
    f = plan(NULL, 0, "1", 0, 4); /* a threshold alone: one batch */
    assert_string_equal(sizes(f, b, sizeof(b)), "4");
    assert_int_equal(f->max_failures, 1);
    rexec_fanout_free(f);
    f = plan("1", 0, "50%", 0, 1); /* one host: allowed */
    assert_string_equal(sizes(f, b, sizeof(b)), "1");
    assert_int_equal(f->max_failures, 0);
    rexec_fanout_free(f);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("0", 0, NULL, 0, 4, "--batch");
    refused("0%", 0, NULL, 0, 4, "--batch");
    refused("101%", 0, NULL, 0, 4, "--batch");
    refused(NULL, 0, "-1", 0, 4, "--max-failures");
    refused(NULL, 5, NULL, 0, 4, "--canary 5: the run has 4 host(s)");
    refused(NULL, -1, NULL, 0, 4, "--canary");
    refused(NULL, 0, NULL, 11, 4, "--retry-unavailable");
    refused(NULL, 0, NULL, -1, 4, "--retry-unavailable");
    /* serve's names */
    rexec_fanout_spec spec = {"0", 0, NULL, 0};
    rexec_fanout *f;
    rexec_error e;
    assert_int_equal(rexec_fanout_new(&spec, 4, 0, &f, &e), REXEC_EUSAGE);
    assert_non_null(strstr(e.msg, "batch wants"));
    assert_null(strstr(e.msg, "--"));
    rexec_fanout_spec none = {0};
    assert_false(rexec_fanout_wanted(&none));
    assert_false(rexec_fanout_wanted(NULL));
    assert_true(rexec_fanout_wanted(&spec));
}

/* Starts every host the plan lets start now; returns how many. */
static size_t start_all(rexec_fanout *f, size_t *next)
{
    size_t n = 0;
    while (*next < f->n && rexec_fanout_next(f, *next) == REXEC_FANOUT_START)
        (*next)++, n++;
    return n;
}

static void test_batches_wait(void **state)
{
    (void)state;
    rexec_fanout *f = plan("2", 1, NULL, 0, 5); /* 1, 2, 2 */
    rexec_result ok = with_status(0);
    size_t next = 0;
    assert_int_equal(start_all(f, &next), 1);
    assert_int_equal(rexec_fanout_next(f, 1), REXEC_FANOUT_WAIT); /* asking again: still waits */
    assert_int_equal(rexec_fanout_done(f, 0, &ok), 0);
    assert_int_equal(start_all(f, &next), 2);
    assert_int_equal(rexec_fanout_done(f, 2, &ok), 0);
    assert_int_equal(start_all(f, &next), 0); /* host 1 still runs */
    assert_int_equal(rexec_fanout_done(f, 1, &ok), 0);
    assert_int_equal(start_all(f, &next), 2);
    rexec_fanout_progress p;
    rexec_fanout_get_progress(f, &p);
    assert_int_equal(p.batch, 3);
    assert_int_equal(p.batches, 3);
    assert_int_equal(p.done, 3);
    /* a host told twice, or one never started, changes nothing */
    assert_int_equal(rexec_fanout_done(f, 0, &ok), 0);
    assert_int_equal(rexec_fanout_done(f, 77, &ok), 0);
    rexec_fanout_get_progress(f, &p);
    assert_int_equal(p.done, 3);
    rexec_fanout_free(f);
    /* no plan: everything starts */
    assert_int_equal(rexec_fanout_next(NULL, 12345), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_exit_status(NULL, 255), 255);
}

/* 64 hosts, batches of 8, max 2 failures, 5 hosts fail (the 3rd failure in batch 3): the
 * run stops after batch 3; no host of batch 4 or later starts. */
static void test_threshold_64(void **state)
{
    (void)state;
    rexec_fanout *f = plan("8", 0, "2", 0, 64);
    static const size_t failing[] = {3, 12, 20, 40, 50};
    size_t next = 0, started = 0, stops = 0;
    for (;;) {
        size_t from = next, k = start_all(f, &next);
        started += k;
        if (k == 0)
            break;
        for (size_t i = from; i < from + k; i++) {
            int bad = 0;
            for (size_t j = 0; j < 5; j++)
                bad |= failing[j] == i;
            rexec_result r = with_status(bad ? 1 : 0);
            stops += (size_t)rexec_fanout_done(f, i, &r);
        }
    }
    assert_int_equal(started, 24); /* batches 1-3 */
    assert_int_equal(stops, 1);    /* told once */
    assert_int_equal(f->stop_batch, 2);
    size_t skipped = 0;
    assert_int_equal(next, 24);
    assert_int_equal(f->state[24], RX_HOST_SKIPPED); /* start_all's last question skipped it */
    assert_int_equal(rexec_fanout_next(f, 24), REXEC_FANOUT_WAIT); /* asked again: no start */
    for (size_t i = next; i < 64; i++) {
        if (i > next)
            assert_int_equal(rexec_fanout_next(f, i), REXEC_FANOUT_SKIP);
        rexec_result r = rexec_fanout_skipped(f, i, "labX", "t.a");
        assert_int_equal(r.executed, 0);
        assert_int_equal(r.exit_status, 76);
        assert_int_equal(r.err, REXEC_ESTOPPED);
        assert_string_equal(r.reason, "STOPPED_FAILURE_THRESHOLD");
        assert_non_null(strstr(r.error, "labX: not started: 3 host(s) failed"));
        assert_non_null(strstr(r.error, "batch 3 of 8"));
        skipped++;
    }
    assert_int_equal(skipped, 40);
    rexec_fanout_progress p;
    rexec_fanout_get_progress(f, &p);
    assert_true(p.stopped);
    assert_int_equal(p.batch, 3); /* where it stopped, though batch 3 has ended */
    assert_int_equal(p.failed, 3);
    assert_int_equal(p.skipped, 40);
    assert_int_equal(rexec_fanout_exit_status(f, 1), 76);
    assert_int_equal(rexec_fanout_exit_status(f, 255), 76);
    assert_int_equal(rexec_fanout_exit_status(f, 130), 130); /* interrupted says so */
    rexec_fanout_free(f);
}

/* The threshold crossed in a batch whose hosts are not all started (parallel below the batch):
 * the rest of that batch is skipped too; "more than": max 1 lets one failure through. */
static void test_threshold_mid_batch(void **state)
{
    (void)state;
    rexec_fanout *f = plan("4", 0, "1", 0, 8);
    rexec_result bad = with_status(1), ok = with_status(0);
    assert_int_equal(rexec_fanout_next(f, 0), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_done(f, 0, &bad), 0); /* 1 failure: not more than 1 */
    assert_int_equal(rexec_fanout_next(f, 1), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_done(f, 1, &ok), 0);
    assert_int_equal(rexec_fanout_next(f, 2), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_done(f, 2, &bad), 1); /* 2 > 1 */
    assert_int_equal(rexec_fanout_next(f, 3), REXEC_FANOUT_SKIP);
    assert_int_equal(f->stop_batch, 0);
    rexec_fanout_free(f);
    /* max_failures 0: the first failure stops */
    f = plan(NULL, 0, "0", 0, 3);
    assert_int_equal(rexec_fanout_next(f, 0), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_next(f, 1), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_done(f, 1, &bad), 1);
    assert_int_equal(rexec_fanout_next(f, 2), REXEC_FANOUT_SKIP);
    assert_int_equal(rexec_fanout_done(f, 0, &bad), 0); /* stopped once only */
    rexec_fanout_free(f);
}

static void test_retries(void **state)
{
    (void)state;
    rexec_fanout *f = plan(NULL, 0, NULL, 2, 3);
    rexec_result unreached = with_status(255), ran_failed = with_status(1);
    rexec_result lost_after_send = with_status(255);
    unreached.nothing_sent = 1;
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(rexec_fanout_next(f, i), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_tries(f, 0), 1);
    assert_int_equal(rexec_fanout_delay_ms(f, 0), 0); /* the first try goes at once */
    assert_int_equal(rexec_fanout_retry(f, 0, &unreached), 1);
    assert_int_equal(rexec_fanout_delay_ms(f, 0), 500);
    assert_int_equal(rexec_fanout_retry(f, 0, &unreached), 1);
    assert_int_equal(rexec_fanout_delay_ms(f, 0), 1000);
    assert_int_equal(rexec_fanout_retry(f, 0, &unreached), 0); /* 2 retries: 3 tries */
    assert_int_equal(rexec_fanout_tries(f, 0), 3);
    assert_int_equal(rexec_fanout_retry(f, 1, &ran_failed), 0); /* it ran: never again */
    assert_int_equal(rexec_fanout_retry(f, 2, &lost_after_send), 0); /* something was sent */
    assert_int_equal(rexec_fanout_tries(f, 1), 1);
    rexec_fanout_done(f, 0, &unreached);
    assert_int_equal(rexec_fanout_retry(f, 0, &unreached), 0); /* over */
    assert_int_equal(rexec_fanout_tries(NULL, 0), 0);
    rexec_fanout_free(f);
    /* the back-off doubles up to 8 s */
    f = plan(NULL, 0, NULL, 10, 1);
    assert_int_equal(rexec_fanout_next(f, 0), REXEC_FANOUT_START);
    static const unsigned want[] = {500, 1000, 2000, 4000, 8000, 8000, 8000};
    for (size_t k = 0; k < sizeof(want) / sizeof(*want); k++) {
        assert_int_equal(rexec_fanout_retry(f, 0, &unreached), 1);
        assert_int_equal(rexec_fanout_delay_ms(f, 0), want[k]);
    }
    assert_int_equal(rexec_fanout_delay_ms(NULL, 0), 0);
    rexec_fanout_free(f);
    /* no retries asked: none, and nobody counts tries */
    f = plan(NULL, 0, "5", 0, 1);
    assert_int_equal(rexec_fanout_next(f, 0), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_retry(f, 0, &unreached), 0);
    assert_int_equal(rexec_fanout_tries(f, 0), 0);
    rexec_fanout_free(f);
    /* once stopped, nothing is tried again */
    f = plan(NULL, 0, "0", 3, 2);
    assert_int_equal(rexec_fanout_next(f, 0), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_next(f, 1), REXEC_FANOUT_START);
    assert_int_equal(rexec_fanout_done(f, 0, &ran_failed), 1);
    assert_int_equal(rexec_fanout_retry(f, 1, &unreached), 0);
    rexec_fanout_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_parse),     cmocka_unit_test(test_count_of),
        cmocka_unit_test(test_batches),         cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_batches_wait),    cmocka_unit_test(test_threshold_64),
        cmocka_unit_test(test_threshold_mid_batch), cmocka_unit_test(test_retries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
