/* Approvals under pressure and at a terminal: 16 processes racing for one grant (exactly one
 * wins, every round), the operator's confirmation on a pseudo-terminal (right code, wrong code,
 * what the prompt shows and hides), and no terminal at all. */
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "approvals.h"
#include "approve_tty.h"
#include "gate.h"

#define RACERS 16
#define ROUNDS 20

typedef struct fx {
    char dir[64];
    rx_ws ws;
    rx_host host;
    rx_action action;
    rx_param_spec unit;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return -1;
    strcpy(f->dir, "/tmp/rx-approvals-XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    f->unit.name = "unit";
    f->unit.type = RX_P_STRING;
    f->unit.required = 1;
    f->action.name = "svc.restart";
    f->action.command = "systemctl restart {unit}";
    f->action.risk = f->action.declared_risk = RX_L2;
    f->action.state_changing = 1;
    f->action.params = &f->unit;
    f->action.n_params = 1;
    f->host.name = "lab1";
    f->host.allow = RX_L1;
    f->host.approve = RX_L2;
    f->host.max_containment = RX_CONT_PID_NAMESPACE;
    f->ws.dir = f->dir;
    f->ws.hosts = &f->host;
    f->ws.n_hosts = 1;
    f->ws.actions = &f->action;
    f->ws.n_actions = 1;
    f->ws.limits.approval_ttl_s = 900;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    rx_test_rm_tree(f->dir);
    free(f);
    return 0;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (strstr(hay, needle) == NULL)
        fail_msg("expected \"%s\" in: %s", needle, hay);
}

static const rexec_param nginx = {"unit", "nginx", 5};

static rx_gate_input input(fx *f, const char *grant)
{
    rx_gate_input in = {.ws = &f->ws, .host = &f->host, .action = &f->action,
                        .values = &nginx, .rendered = "systemctl restart 'nginx'",
                        .grant_id = grant};
    return in;
}

/* A pending challenge for svc.restart unit=nginx; its id in id. */
static void pending(fx *f, char id[RX_APPROVAL_ID_LEN + 1])
{
    rx_gate_input in = input(f, NULL);
    rx_decision d;
    rexec_error e = {0};
    if (rx_gate_decide(&in, &d, &e) != 0)
        fail_msg("decide: %s", e.msg);
    assert_string_equal(d.reason, "REQUIRES_APPROVAL");
    memcpy(id, d.challenge_id, RX_APPROVAL_ID_LEN + 1);
}

static void load(fx *f, const char *id, rx_challenge *c)
{
    rexec_error e = {0};
    if (rx_approvals_load(&f->ws, id, c, &e) != 0)
        fail_msg("load %s: %s", id, e.msg);
}

/* ---- The race ------------------------------------------------------------------------------ */

/* A racer: waits for the start signal, then asks the gate with the grant.
 * Exit 0 = ALLOW_GRANT, 1 = GRANT_USED, 2 = anything else. */
static void racer(fx *f, const char *id, int start_fd)
{
    char c;
    rx_gate_input in = input(f, id);
    rx_decision d;
    rexec_error e = {0};
    while (read(start_fd, &c, 1) < 0 && errno == EINTR)
        ;
    int r = rx_gate_decide(&in, &d, &e);
    if (r == 0 && strcmp(d.reason, "ALLOW_GRANT") == 0)
        _exit(0);
    _exit(r == 0 && strcmp(d.reason, "GRANT_USED") == 0 ? 1 : 2);
}

static void race_once(fx *f, int *winners, int *used, int *other)
{
    char id[RX_APPROVAL_ID_LEN + 1];
    pid_t pids[RACERS];
    int start[2];
    rexec_error e = {0};

    pending(f, id);
    assert_int_equal(rx_approvals_approve(&f->ws, id, "tester", &e), 0);
    assert_int_equal(pipe(start), 0);
    for (int i = 0; i < RACERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            close(start[1]);
            racer(f, id, start[0]);
        }
    }
    close(start[0]);
    close(start[1]); /* every racer's read returns now, all at once */
    for (int i = 0; i < RACERS; i++) {
        int st = 0;
        assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 3;
        *winners += code == 0;
        *used += code == 1;
        *other += code > 1;
    }
}

static void test_race_one_winner(void **state)
{
    fx *f = *state;
    for (int round = 0; round < ROUNDS; round++) {
        int winners = 0, used = 0, other = 0;
        race_once(f, &winners, &used, &other);
        if (winners != 1 || used != RACERS - 1 || other != 0)
            fail_msg("round %d: %d winners, %d GRANT_USED, %d other (want 1, %d, 0)", round,
                     winners, used, other, RACERS - 1);
    }
}

/* Direct consumers, without the gate's checks: still exactly one rename wins. */
static void test_consume_race(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1];
    pid_t pids[RACERS];
    int start[2], ok = 0, denied = 0;
    rexec_error e = {0};

    pending(f, id);
    assert_int_equal(rx_approvals_approve(&f->ws, id, "tester", &e), 0);
    assert_int_equal(pipe(start), 0);
    for (int i = 0; i < RACERS; i++) {
        if ((pids[i] = fork()) == 0) {
            char c;
            close(start[1]);
            while (read(start[0], &c, 1) < 0 && errno == EINTR)
                ;
            int r = rx_approvals_consume(&f->ws, id, &e);
            _exit(r == 0 ? 0 : r == REXEC_EDENIED ? 1 : 2);
        }
    }
    close(start[0]);
    close(start[1]);
    for (int i = 0; i < RACERS; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
        denied += WIFEXITED(st) && WEXITSTATUS(st) == 1;
    }
    assert_int_equal(ok, 1);
    assert_int_equal(denied, RACERS - 1);
}

/* ---- The terminal ------------------------------------------------------------------------- */

/* Reads from the pty master until needle shows up (or 10 s pass); the text in buf. */
static int read_until(int master, char *buf, size_t cap, const char *needle)
{
    size_t n = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    buf[0] = 0;
    while (strstr(buf, needle) == NULL) {
        struct pollfd p = {.fd = master, .events = POLLIN};
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 10 || n + 1 >= cap)
            return -1;
        if (poll(&p, 1, 200) <= 0)
            continue;
        ssize_t k = read(master, buf + n, cap - n - 1);
        if (k <= 0)
            return -1;
        n += (size_t)k;
        buf[n] = 0;
    }
    return 0;
}

/* Runs rx_approve_tty in a child whose controlling terminal is a new pty; answers
 * the prompt with answer (NULL: the code the prompt shows). Returns the child's result code
 * (0 approved, 1 refused) and what the terminal showed in shown. */
static int confirm_on_pty(fx *f, const char *id, const char *answer, char *shown, size_t cap)
{
    int master = -1, st = 0;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        rexec_error e = {0};
        _exit(rx_approve_tty(&f->ws, id, &e) == 0 ? 0 : 1);
    }
    if (read_until(master, shown, cap, "anything else refuses): ") != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("no prompt on the terminal; it showed: %s", shown);
    }
    char line[64];
    const char *code = strstr(shown, "type the code ");
    assert_non_null(code);
    snprintf(line, sizeof(line), "%.*s\n", RX_APPROVAL_CODE_LEN, code + 14);
    if (answer != NULL)
        snprintf(line, sizeof(line), "%s\n", answer);
    assert_int_equal(write(master, line, strlen(line)), (ssize_t)strlen(line));
    size_t n = strlen(shown);
    read_until(master, shown + n, cap - n, "approved"); /* "approved ..." or "not approved" */
    waitpid(pid, &st, 0);
    close(master);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}

static void test_tty_approves(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], shown[16384];
    rx_challenge c;

    pending(f, id);
    load(f, id, &c);
    assert_int_equal(confirm_on_pty(f, id, NULL, shown, sizeof(shown)), 0);
    assert_contains(shown, id);
    assert_contains(shown, "lab1");
    assert_contains(shown, "svc.restart");
    assert_contains(shown, "L2 (state_changing)");
    assert_contains(shown, "systemctl restart 'nginx'");
    assert_contains(shown, "unit=nginx");
    assert_contains(shown, c.code);
    assert_contains(shown, "approved " );
    rx_challenge_free(&c);
    load(f, id, &c);
    assert_int_equal(c.state, RX_AP_APPROVED);
    assert_non_null(c.approved_by);
    assert_non_null(c.approved_tty);
    assert_contains(c.approved_tty, "/dev/pts/");
    rx_challenge_free(&c);

    /* and the grant works once */
    rx_gate_input in = input(f, id);
    rx_decision d;
    rexec_error e = {0};
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "ALLOW_GRANT");
}

static void test_tty_wrong_code(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], shown[16384];
    rx_challenge c;
    static const char *const wrong[] = {"", "y", "yes", "000-000"};

    pending(f, id);
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        assert_int_equal(confirm_on_pty(f, id, wrong[i], shown, sizeof(shown)), 1);
        assert_contains(shown, "not approved");
    }
    load(f, id, &c);
    assert_int_equal(c.state, RX_AP_PENDING);
    /* lower case is not the code either: typed back exactly */
    char lower[RX_APPROVAL_CODE_LEN + 1];
    for (int i = 0; i <= RX_APPROVAL_CODE_LEN; i++)
        lower[i] = (char)(c.code[i] >= 'A' && c.code[i] <= 'Z' ? c.code[i] + 32 : c.code[i]);
    int has_letter = strcmp(lower, c.code) != 0;
    rx_challenge_free(&c);
    if (has_letter)
        assert_int_equal(confirm_on_pty(f, id, lower, shown, sizeof(shown)), 1);
    load(f, id, &c);
    assert_int_equal(c.state, RX_AP_PENDING);
    rx_challenge_free(&c);
}

/* A value that holds terminal escapes and bidi controls is shown escaped, never interpreted. */
static void test_tty_escapes_values(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], shown[16384];
    rexec_param evil = {"unit", "ok\x1b[2K\r\xe2\x80\xae" "evil", 14};
    rx_gate_input in = input(f, NULL);
    rx_decision d;
    rexec_error e = {0};

    in.values = &evil;
    in.rendered = "systemctl restart 'ok\x1b[2K\r\xe2\x80\xae" "evil'";
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    memcpy(id, d.challenge_id, sizeof(id));
    assert_int_equal(confirm_on_pty(f, id, "no", shown, sizeof(shown)), 1);
    assert_null(strchr(shown, '\x1b'));
    assert_null(strstr(shown, "\xe2\x80\xae"));
    assert_contains(shown, "ok\\x1b[2K\\r\\u202eevil");
}

/* The code on stdin does not count: only the terminal is asked. */
static void test_stdin_cannot_approve(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], shown[16384];
    int master = -1, st = 0, p[2];
    rx_challenge c;

    pending(f, id);
    load(f, id, &c);
    assert_int_equal(pipe(p), 0);
    dprintf(p[1], "%s\n%s\n", c.code, c.code);
    close(p[1]);
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        rexec_error e = {0};
        dup2(p[0], 0); /* stdin: a pipe holding the right code */
        _exit(rx_approve_tty(&f->ws, id, &e) == 0 ? 0 : 1);
    }
    close(p[0]);
    assert_int_equal(read_until(master, shown, sizeof(shown), "anything else refuses): "), 0);
    assert_int_equal(write(master, "\n", 1), 1); /* the terminal answers nothing */
    waitpid(pid, &st, 0);
    close(master);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    rx_challenge_free(&c);
    load(f, id, &c);
    assert_int_equal(c.state, RX_AP_PENDING);
    rx_challenge_free(&c);
}

static void on_usr1(int sig)
{
    (void)sig;
}

/* A caught signal while the prompt waits (Ctrl-C under an event loop) refuses. */
static void test_tty_interrupted(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], shown[16384];
    int master = -1, st = 0;
    rx_challenge c;

    pending(f, id);
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sigaction sa;
        rexec_error e = {0};
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_usr1; /* no SA_RESTART: the wait is interrupted */
        sigaction(SIGUSR1, &sa, NULL);
        _exit(rx_approve_tty(&f->ws, id, &e) == REXEC_EDENIED ? 1 : 0);
    }
    assert_int_equal(read_until(master, shown, sizeof(shown), "anything else refuses): "), 0);
    kill(pid, SIGUSR1);
    read_until(master, shown, sizeof(shown), "interrupted");
    waitpid(pid, &st, 0);
    close(master);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    load(f, id, &c);
    assert_int_equal(c.state, RX_AP_PENDING);
    rx_challenge_free(&c);
}

/* No controlling terminal (a headless caller, a pipe): refused, clearly, nothing changes. */
static void test_no_tty_refused(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], msg[1024] = "";
    int p[2], st = 0;
    rx_challenge c;

    pending(f, id);
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rexec_error e = {0};
        close(p[0]);
        setsid(); /* a new session has no controlling terminal */
        int r = rx_approve_tty(&f->ws, id, &e);
        if (write(p[1], e.msg, strlen(e.msg)) < 0)
            _exit(3);
        _exit(r == REXEC_EDENIED ? 1 : r == 0 ? 0 : 2);
    }
    close(p[1]);
    ssize_t n = read(p[0], msg, sizeof(msg) - 1);
    msg[n > 0 ? n : 0] = 0;
    close(p[0]);
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    assert_contains(msg, "terminal");
    load(f, id, &c);
    assert_int_equal(c.state, RX_AP_PENDING);
    rx_challenge_free(&c);
}

static void test_confirm_refusals(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1];
    rexec_error e = {0};

    assert_int_equal(rx_approve_tty(&f->ws, "ch-0000000000000000", &e), REXEC_EDENIED);
    assert_contains(e.msg, "no challenge or grant");
    assert_int_equal(rx_approve_tty(&f->ws, "../x", &e), REXEC_EDENIED);
    assert_contains(e.msg, "not an approval id");
    /* already approved: nothing to ask, success */
    pending(f, id);
    assert_int_equal(rx_approvals_approve(&f->ws, id, "tester", &e), 0);
    assert_int_equal(rx_approve_tty(&f->ws, id, &e), 0);
    assert_int_equal(rx_approvals_consume(&f->ws, id, &e), 0);
    assert_int_equal(rx_approve_tty(&f->ws, id, &e), REXEC_EDENIED);
    assert_contains(e.msg, "already used");
    assert_int_equal(rx_approvals_approve(&f->ws, id, "tester", &e), REXEC_EDENIED);
}

/* ---- Decisions by someone, and fan-outs --------------------------------------------------- */

/* An approval by the uid that asked is refused (serve: not_self); another uid's is recorded
 * with how and why. */
static void test_decide_not_self(void **state)
{
    fx *f = *state;
    rx_gate_input in = input(f, NULL);
    rx_decision d;
    rx_challenge c;
    rexec_error e = {0};
    in.requester_uid = 1001;
    in.requester_user = "agent";
    in.request_id = "run-1";
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    rx_approval_decision self = {.approve = 1, .user = "agent", .uid = 1001, .via = "socket",
                                 .not_self = 1};
    assert_int_equal(rx_approvals_decide(&f->ws, d.challenge_id, &self, NULL, &e),
                     REXEC_EDENIED);
    assert_contains(e.msg, "cannot approve its own request");
    load(f, d.challenge_id, &c);
    assert_int_equal(c.state, RX_AP_PENDING);
    assert_int_equal(c.requester_uid, 1001);
    assert_string_equal(c.requester_user, "agent");
    assert_string_equal(c.request_id, "run-1");
    rx_challenge_free(&c);
    rx_approval_decision other = {.approve = 1, .user = "alice", .uid = 1002, .via = "socket",
                                  .note = "change 4411", .not_self = 1};
    assert_int_equal(rx_approvals_decide(&f->ws, d.challenge_id, &other, &c, &e), 0);
    assert_int_equal(c.state, RX_AP_APPROVED);
    assert_int_equal(c.approved_uid, 1002);
    assert_string_equal(c.approved_via, "socket");
    assert_string_equal(c.comment, "change 4411");
    rx_challenge_free(&c);
    /* a second approval changes nothing (1); a denial of a grant is refused */
    assert_int_equal(rx_approvals_decide(&f->ws, d.challenge_id, &other, NULL, &e), 1);
    other.approve = 0;
    assert_int_equal(rx_approvals_decide(&f->ws, d.challenge_id, &other, NULL, &e),
                     REXEC_EDENIED);
    assert_contains(e.msg, "already approved by alice");
}

/* Denied and withdrawn challenges are closed: never approved, never used. */
static void test_deny_closes(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], id2[RX_APPROVAL_ID_LEN + 1];
    rx_decision d;
    rexec_error e = {0};
    pending(f, id);
    rx_approval_decision no = {.approve = 0, .user = "alice", .uid = 1002, .via = "socket",
                               .note = "not during the freeze"};
    assert_int_equal(rx_approvals_decide(&f->ws, id, &no, NULL, &e), 0);
    assert_int_equal(rx_approvals_approve(&f->ws, id, "bob", &e), REXEC_EDENIED);
    assert_contains(e.msg, "was denied by alice: not during the freeze");
    rx_gate_input in = input(f, id);
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "GRANT_NOT_APPROVED");
    assert_contains(d.message, "denied by alice: not during the freeze");
    pending(f, id2);
    rx_approval_decision gone = {.approve = 0, .user = "serve", .uid = -1, .via = "serve",
                                 .note = "the caller disconnected", .withdraw = 1};
    assert_int_equal(rx_approvals_decide(&f->ws, id2, &gone, NULL, &e), 0);
    assert_int_equal(rx_approvals_approve(&f->ws, id2, "bob", &e), REXEC_EDENIED);
    assert_contains(e.msg, "withdrawn (the caller disconnected)");
}

/* A fan-out's hosts share one challenge; its grant serves each listed host once, a host it
 * does not list never, and it is spent when the last has used it. */
static void test_fanout_one_decision(void **state)
{
    fx *f = *state;
    rx_host lab2 = f->host, lab3 = f->host;
    rx_gate_fanout fo = {.mu = PTHREAD_MUTEX_INITIALIZER};
    rx_gate_input in = input(f, NULL);
    rx_decision d1, d2, d;
    rx_challenge c;
    rexec_error e = {0};
    char id[RX_APPROVAL_ID_LEN + 1];
    lab2.name = "lab2";
    lab3.name = "lab3";
    in.fanout = &fo;
    assert_int_equal(rx_gate_decide(&in, &d1, &e), 0);
    in.host = &lab2;
    assert_int_equal(rx_gate_decide(&in, &d2, &e), 0);
    assert_string_equal(d1.reason, "REQUIRES_APPROVAL");
    assert_string_equal(d2.challenge_id, d1.challenge_id);
    memcpy(id, d1.challenge_id, sizeof(id));
    load(f, id, &c);
    assert_int_equal(c.n_targets, 2);
    assert_string_equal(c.targets[1].host, "lab2");
    rx_challenge_free(&c);
    assert_int_equal(rx_approvals_approve(&f->ws, id, "alice", &e), 0);
    in = input(f, id);
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "ALLOW_GRANT");
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "GRANT_USED");
    in.host = &lab3;
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "GRANT_MISMATCH");
    assert_contains(d.message, "approved for hosts lab1,lab2, not lab3");
    load(f, id, &c);
    assert_int_equal(c.state, RX_AP_APPROVED); /* lab2 has not used it yet */
    rx_challenge_free(&c);
    in.host = &lab2;
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "ALLOW_GRANT");
    load(f, id, &c);
    assert_int_equal(c.state, RX_AP_USED);
    rx_challenge_free(&c);
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "GRANT_USED");
    pthread_mutex_destroy(&fo.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_race_one_winner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consume_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tty_approves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tty_wrong_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tty_escapes_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stdin_cannot_approve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tty_interrupted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_tty_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_confirm_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decide_not_self, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deny_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fanout_one_decision, setup, teardown),
    };
    return cmocka_run_group_tests_name("approvals", tests, NULL, NULL);
}
