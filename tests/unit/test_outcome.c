/* A call's outcome from what its exec reported (call_record.c: rx_call_outcome, rx_call_result):
 * a call stopped while its command was still being set up (a runner's slot killed its shell
 * before the command began) is reported as what happened, cancelled (130) or timed out (124),
 * executed false; not as a host failure (255, "setting up containment failed"), which the storm
 * benchmark saw for 1 interrupted call in 7 (issue #30). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "call.h"

typedef struct fixture {
    rx_host host;
    rx_action action;
    rexec_call c;
    rx_redactor *r;
} fixture;

static void setup_call(fixture *f, const char *phase, int started, int cancelled, int timed_out)
{
    rexec_error e;
    memset(f, 0, sizeof(*f));
    f->host.name = "lab1";
    f->action.name = "t.x";
    assert_int_equal(rx_redactor_new(&f->r, NULL, 0, &e), 0);
    f->c.host = &f->host;
    f->c.host_name = "lab1";
    f->c.action = &f->action;
    f->c.action_name = "t.x";
    f->c.redactor = f->r;
    f->c.timeout_s = 0.001;
    f->c.script_sent = 1;
    f->c.x = (rx_exec_result){.sent = 1, .ended = 1, .started = started, .rc = 137,
                              .cancelled = cancelled, .timed_out = timed_out};
    snprintf(f->c.x.phase, sizeof(f->c.x.phase), "%s", phase);
    snprintf(f->c.x.containment, sizeof(f->c.x.containment), "pid-namespace");
}

static void finish(fixture *f)
{
    rx_buf_free(&f->c.shown_error);
    rx_buf_free(&f->c.shown_rendered);
    rx_buf_free(&f->c.shown_host);
    rx_buf_free(&f->c.shown_action);
    rx_redactor_free(f->r);
}

static void test_cancelled_in_setup(void **state)
{
    (void)state;
    fixture f;
    rexec_result res;
    setup_call(&f, "setup", 0, 1, 0);
    f.c.cancelled = 1;
    rx_call_outcome(&f.c);
    rx_call_result(&f.c, &res);
    assert_int_equal(res.exit_status, 130);
    assert_false(res.executed);
    assert_non_null(strstr(res.error, "cancelled before the command started"));
    assert_null(strstr(res.error, "containment"));
    finish(&f);
}

static void test_timed_out_in_setup(void **state)
{
    (void)state;
    fixture f;
    rexec_result res;
    setup_call(&f, "setup", 0, 0, 1);
    rx_call_outcome(&f.c);
    rx_call_result(&f.c, &res);
    assert_int_equal(res.exit_status, 124);
    assert_true(res.timed_out);
    assert_false(res.executed);
    assert_non_null(strstr(res.error, "before the command started"));
    finish(&f);
}

/* Not stopped by anyone: a setup failure is still the host's (255). */
static void test_setup_failure_stays_255(void **state)
{
    (void)state;
    fixture f;
    rexec_result res;
    setup_call(&f, "setup", 0, 0, 0);
    rx_call_outcome(&f.c);
    rx_call_result(&f.c, &res);
    assert_int_equal(res.exit_status, 255);
    assert_non_null(strstr(res.error, "setting up containment"));
    /* how the call's shell ended (rc 137 in the fixture) tells a kill from a failed set-up */
    assert_non_null(strstr(res.error, "the call's shell was killed by signal KILL (status 137)"));
    assert_false(res.executed);
    finish(&f);
}

/* A runner's call shell that exited by itself before its status: its exit status is named
 * (one that ran and exited 0 before its status would say so: never a silent "did not run"). */
static void test_setup_failure_names_exit_status(void **state)
{
    (void)state;
    fixture f;
    rexec_result res;
    setup_call(&f, "setup", 0, 0, 0);
    f.c.x.rc = 1;
    rx_call_outcome(&f.c);
    rx_call_result(&f.c, &res);
    assert_int_equal(res.exit_status, 255);
    assert_non_null(strstr(res.error, "setting up containment (pid-namespace) failed: the call's "
                                      "shell exited with status 1 before the command started; "
                                      "the command did not run"));
    finish(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cancelled_in_setup),
        cmocka_unit_test(test_timed_out_in_setup),
        cmocka_unit_test(test_setup_failure_stays_255),
        cmocka_unit_test(test_setup_failure_names_exit_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
