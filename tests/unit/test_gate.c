/* The risk gate: parameters mapped and validated (unknown, missing, duplicate, defaults, scope),
 * the level table, floors, containment, and the approval flow from a pending challenge through
 * an approval to one use (and the refusals on the way: not approved, drifted, expired, used).
 * The workspace is built in memory, so these tests do not depend on the loader. */
#include <errno.h>
#include <ftw.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "approvals.h"
#include "gate.h"
#include "scope.h"

enum { A_UNAME, A_WHOAMI, A_RESTART, A_SHELL, A_HTTP, A_FLOOR, A_DEFAULTS, A_CONTAIN, N_ACTIONS };

typedef struct fx {
    char dir[64];
    char apdir[96];
    rx_ws ws;
    rx_host hosts[2];
    rx_action actions[N_ACTIONS];
    rx_param_spec unit, url, cmd, target, ab[2]; /* ab: t.defaults' a and b */
    char *secrets[1];
} fx;

static rx_param_spec spec(const char *name, rx_ptype type)
{
    rx_param_spec s;
    memset(&s, 0, sizeof(s));
    s.name = (char *)name;
    s.type = type;
    s.required = 1;
    return s;
}

static void set_pattern(rx_param_spec *s, const char *re)
{
    s->pattern = (char *)re;
    assert_int_equal(regcomp(&s->re, re, REG_EXTENDED | REG_NOSUB), 0);
    s->has_re = 1;
}

static rx_action action(const char *name, rx_risk risk, const char *command,
                        rx_param_spec *params, size_t n)
{
    rx_action a;
    memset(&a, 0, sizeof(a));
    a.name = (char *)name;
    a.risk = a.declared_risk = risk;
    a.command = (char *)command;
    a.params = params;
    a.n_params = n;
    return a;
}

static rx_host host(const char *name, rx_risk allow, rx_risk approve)
{
    rx_host h;
    memset(&h, 0, sizeof(h));
    h.name = (char *)name;
    h.allow = allow;
    h.approve = approve;
    h.max_containment = RX_CONT_PID_NAMESPACE;
    return h;
}

static void build_actions(fx *f)
{
    rx_action *a = f->actions;
    f->unit = spec("unit", RX_P_STRING);
    set_pattern(&f->unit, "^[A-Za-z0-9@._-]{1,64}$");
    f->url = spec("url", RX_P_URL);
    f->url.in_scope = 1;
    f->cmd = spec("cmd", RX_P_SHELL);
    f->target = spec("target", RX_P_URL);
    f->target.in_scope = 1;
    f->ab[0] = spec("a", RX_P_STRING);
    f->ab[1] = spec("b", RX_P_STRING);
    set_pattern(&f->ab[1], "^[a-z]+$");
    f->ab[1].required = 0;
    f->ab[1].default_value = "dflt";
    f->secrets[0] = "API_TOKEN";

    a[A_UNAME] = action("sys.uname", RX_L0, "uname -a", NULL, 0);
    a[A_WHOAMI] = action("api.whoami", RX_L1, "curl {url}", &f->url, 1);
    a[A_WHOAMI].secrets = f->secrets;
    a[A_WHOAMI].n_secrets = 1;
    a[A_RESTART] = action("svc.restart", RX_L2, "systemctl restart {unit}", &f->unit, 1);
    a[A_RESTART].state_changing = 1;
    /* as the loader leaves them: shell parameter → L3, state_changing → L2 */
    a[A_SHELL] = action("shell", RX_L1, "{cmd}", &f->cmd, 1);
    a[A_SHELL].risk = RX_L3;
    a[A_SHELL].risk_floor_reason = "shell parameter";
    a[A_HTTP] = action("net.http-get", RX_L0, "curl {target}", &f->target, 1);
    a[A_HTTP].network = 1;
    a[A_FLOOR] = action("t.floor", RX_L0, "touch /tmp/x", NULL, 0);
    a[A_FLOOR].state_changing = 1;
    a[A_FLOOR].risk = RX_L2;
    a[A_FLOOR].risk_floor_reason = "state_changing";
    a[A_DEFAULTS] = action("t.defaults", RX_L0, "echo {a} {b}", f->ab, 2);
    a[A_CONTAIN] = action("t.contain", RX_L0, "true", NULL, 0);
    a[A_CONTAIN].containment = RX_CONT_PID_NAMESPACE;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    rexec_error e = {0};
    strcpy(f->dir, "/tmp/rx-gate-XXXXXX");
    if (f == NULL || mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->apdir, sizeof(f->apdir), "%s/approvals", f->dir);
    build_actions(f);
    f->hosts[0] = host("lab1", RX_L1, RX_L2);
    f->hosts[1] = host("lab2", RX_L1, RX_L2);
    f->ws.dir = f->dir;
    f->ws.hosts = f->hosts;
    f->ws.n_hosts = 2;
    f->ws.actions = f->actions;
    f->ws.n_actions = N_ACTIONS;
    f->ws.limits.approval_ttl_s = 900;
    if ((f->ws.scope = rx_scope_new()) == NULL ||
        rx_scope_add_cidr(f->ws.scope, "127.0.0.0/8", &e) != 0 ||
        rx_scope_add_domain(f->ws.scope, "lab.internal", &e) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    rx_approvals_set_clock(NULL);
    rx_test_rm_tree(f->dir);
    regfree(&f->unit.re);
    regfree(&f->ab[1].re);
    rx_scope_free(f->ws.scope);
    free(f);
    return 0;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (strstr(hay, needle) == NULL)
        fail_msg("expected \"%s\" in: %s", needle, hay);
}

/* The gate's input for action k on host h with one parameter (or none). */
static rx_gate_input input(fx *f, int h, int k, const rexec_param *values)
{
    rx_gate_input in = {.ws = &f->ws, .host = &f->hosts[h], .action = &f->actions[k],
                        .values = values, .rendered = f->actions[k].command};
    return in;
}

/* unit: the value of the action's one parameter (svc.restart's unit, shell's cmd), or NULL */
static int decide(fx *f, int h, int k, const char *unit, const char *grant, int eval_only,
                  rx_decision *d)
{
    rexec_param v = {f->actions[k].n_params ? f->actions[k].params[0].name : "", unit,
                     unit ? strlen(unit) : 0};
    rx_gate_input in = input(f, h, k, unit ? &v : NULL);
    rexec_error e = {0};
    in.grant_id = grant;
    in.eval_only = eval_only;
    int r = rx_gate_decide(&in, d, &e);
    if (r != 0)
        fail_msg("rx_gate_decide: %d %s", r, e.msg);
    return r;
}

static int exists(const char *dir, const char *id, const char *ext)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s%s", dir, id, ext);
    return access(p, F_OK) == 0;
}

static unsigned mode_of(const char *p)
{
    struct stat st;
    if (lstat(p, &st) != 0)
        fail_msg("%s: %s", p, strerror(errno));
    return (unsigned)(st.st_mode & 07777);
}

/* ---- Parameters ------------------------------------------------------------------------- */

static int resolve(fx *f, int k, const rexec_param *given, size_t n, rexec_param **v,
                   rx_decision *d, rexec_error *e)
{
    return rx_gate_resolve_params(&f->ws, &f->actions[k], given, n, v, d, e);
}

static void test_params_unknown_missing_duplicate(void **state)
{
    fx *f = *state;
    rexec_param *v = NULL;
    rexec_error e = {0};
    rexec_param foo[] = {{"unit", "nginx", 5}, {"foo", "1", 1}};
    assert_int_equal(resolve(f, A_RESTART, foo, 2, &v, NULL, &e), REXEC_EREQUEST);
    assert_null(v);
    assert_contains(e.msg, "action svc.restart has no parameter \"foo\" (it takes: unit)");

    assert_int_equal(resolve(f, A_DEFAULTS, foo + 1, 1, &v, NULL, &e), REXEC_EREQUEST);
    assert_contains(e.msg, "(it takes: a, b)");
    assert_int_equal(resolve(f, A_UNAME, foo, 1, &v, NULL, &e), REXEC_EREQUEST);
    assert_contains(e.msg, "(it takes: none)");

    rexec_param twice[] = {{"unit", "a", 1}, {"unit", "b", 1}};
    assert_int_equal(resolve(f, A_RESTART, twice, 2, &v, NULL, &e), REXEC_EREQUEST);
    assert_contains(e.msg, "parameter \"unit\" given twice");

    assert_int_equal(resolve(f, A_RESTART, NULL, 0, &v, NULL, &e), REXEC_EREQUEST);
    assert_contains(e.msg, "missing required parameter \"unit\"");

    rexec_param bad[] = {{"unit", "nginx; rm -rf /", 15}};
    assert_int_equal(resolve(f, A_RESTART, bad, 1, &v, NULL, &e), REXEC_EREQUEST);
    assert_contains(e.msg, "parameter \"unit\"");
}

static void test_params_defaults_and_order(void **state)
{
    fx *f = *state;
    rexec_param *v = NULL;
    rexec_error e = {0};
    rexec_param only_a[] = {{"a", "hello", 5}};
    assert_int_equal(resolve(f, A_DEFAULTS, only_a, 1, &v, NULL, &e), 0);
    assert_string_equal(v[0].name, "a");
    assert_string_equal(v[0].value, "hello");
    assert_string_equal(v[1].name, "b");
    assert_string_equal(v[1].value, "dflt");
    assert_int_equal(v[1].value_len, 4);
    free(v);

    /* given in another order: still one per spec, in the spec's order */
    rexec_param both[] = {{"b", "zz", 2}, {"a", "x", 1}};
    assert_int_equal(resolve(f, A_DEFAULTS, both, 2, &v, NULL, &e), 0);
    assert_string_equal(v[0].value, "x");
    assert_string_equal(v[1].value, "zz");
    free(v);

    /* a given value that breaks the pattern is refused even where a default exists */
    rexec_param bad_b[] = {{"a", "x", 1}, {"b", "ZZ", 2}};
    assert_int_equal(resolve(f, A_DEFAULTS, bad_b, 2, &v, NULL, &e), REXEC_EREQUEST);
    assert_contains(e.msg, "parameter \"b\"");

    assert_int_equal(resolve(f, A_UNAME, NULL, 0, &v, NULL, &e), 0);
    assert_non_null(v);
    free(v);
}

static void test_params_scope(void **state)
{
    fx *f = *state;
    rexec_param *v = NULL;
    rexec_error e = {0};
    rx_decision d;
    memset(&d, 0x5a, sizeof(d));

    rexec_param out[] = {{"target", "http://10.1.2.3/x", 17}};
    assert_int_equal(resolve(f, A_HTTP, out, 1, &v, &d, &e), REXEC_EDENIED);
    assert_int_equal(rexec_err_exit_code(REXEC_EDENIED), 77);
    assert_null(v);
    assert_int_equal(d.verdict, RX_DENY);
    assert_string_equal(d.reason, "DENY_SCOPE");
    assert_int_equal(d.effective_risk, RX_L0);
    assert_string_equal(d.challenge_id, "");
    assert_contains(d.message, "net.http-get");
    assert_contains(d.message, "10.1.2.3");

    rexec_param bypass[] = {{"target", "http://127.0.0.1@10.1.2.3/", 26}};
    assert_int_not_equal(resolve(f, A_HTTP, bypass, 1, &v, NULL, &e), 0);

    rexec_param in[] = {{"target", "http://127.0.0.1:8080/x", 23}};
    assert_int_equal(resolve(f, A_HTTP, in, 1, &v, &d, &e), 0);
    free(v);
    rexec_param dom[] = {{"target", "https://lab.internal/", 21}};
    assert_int_equal(resolve(f, A_HTTP, dom, 1, &v, &d, &e), 0);
    free(v);
}

/* ---- Levels ------------------------------------------------------------------------------- */

/* Per host (allow, approve): the reason for an action of L0, L1, L2, L3.
 * A = ALLOW_LEVEL, R = REQUIRES_APPROVAL, D = DENY_LEVEL. */
static const struct {
    rx_risk allow, approve;
    const char *want;
} level_rows[] = {
    {RX_L0, RX_L0, "ADDD"}, {RX_L0, RX_L1, "ARDD"}, {RX_L0, RX_L3, "ARRR"},
    {RX_L1, RX_L1, "AADD"}, {RX_L1, RX_L2, "AARD"}, {RX_L1, RX_L3, "AARR"},
    {RX_L2, RX_L2, "AAAD"}, {RX_L2, RX_L3, "AAAR"}, {RX_L3, RX_L3, "AAAA"},
};

static void test_level_table(void **state)
{
    fx *f = *state;
    size_t bad = 0;
    for (size_t i = 0; i < sizeof(level_rows) / sizeof(level_rows[0]); i++) {
        f->hosts[0].allow = level_rows[i].allow;
        f->hosts[0].approve = level_rows[i].approve;
        for (int risk = 0; risk < 4; risk++) {
            rx_decision d;
            f->actions[A_UNAME].risk = (rx_risk)risk;
            decide(f, 0, A_UNAME, NULL, NULL, 1, &d);
            char w = level_rows[i].want[risk];
            const char *want = w == 'A' ? "ALLOW_LEVEL" : w == 'R' ? "REQUIRES_APPROVAL"
                                                                   : "DENY_LEVEL";
            rx_verdict vw = w == 'A' ? RX_ALLOW : w == 'R' ? RX_REQUIRES_APPROVAL : RX_DENY;
            if (strcmp(d.reason, want) != 0 || d.verdict != vw ||
                d.effective_risk != (rx_risk)risk) {
                print_error("allow L%d approve L%d action L%d: want %s, got %s (%s)\n",
                            level_rows[i].allow, level_rows[i].approve, risk, want, d.reason,
                            d.message);
                bad++;
            }
        }
    }
    assert_int_equal(bad, 0);
    /* eval_only wrote nothing, not even the directory */
    assert_int_equal(access(f->apdir, F_OK), -1);
}

static void test_level_messages(void **state)
{
    fx *f = *state;
    rx_decision d;
    decide(f, 0, A_RESTART, "nginx", NULL, 1, &d);
    assert_int_equal(d.verdict, RX_REQUIRES_APPROVAL);
    assert_contains(d.message, "action svc.restart is L2 (state_changing); host lab1 runs up to "
                               "L1 without approval");
    assert_string_equal(d.challenge_id, ""); /* eval: none written */

    decide(f, 0, A_SHELL, "id", NULL, 1, &d);
    assert_string_equal(d.reason, "DENY_LEVEL");
    assert_int_equal(d.effective_risk, RX_L3);
    assert_contains(d.message, "action shell is L3 (raised from L1: shell parameter); host lab1 "
                               "runs up to L1 without approval and up to L2 with approval");

    decide(f, 0, A_UNAME, NULL, NULL, 0, &d);
    assert_string_equal(d.reason, "ALLOW_LEVEL");
    assert_contains(d.message, "action sys.uname is L0 (declared)");
    assert_int_equal(access(f->apdir, F_OK), -1);
}

static void test_floors(void **state)
{
    fx *f = *state;
    rx_decision d;
    /* declared L0 but state_changing: L2, so it needs approval on an allow-L1 host */
    decide(f, 0, A_FLOOR, NULL, NULL, 1, &d);
    assert_string_equal(d.reason, "REQUIRES_APPROVAL");
    assert_int_equal(d.effective_risk, RX_L2);
    assert_contains(d.message, "is L2 (raised from L0: state_changing)");
    /* a shell parameter: L3, runs only where L3 is allowed */
    f->hosts[0].allow = RX_L3;
    f->hosts[0].approve = RX_L3;
    decide(f, 0, A_SHELL, "id", NULL, 1, &d);
    assert_string_equal(d.reason, "ALLOW_LEVEL");
    assert_int_equal(d.effective_risk, RX_L3);
    f->hosts[0].allow = RX_L2;
    decide(f, 0, A_SHELL, "id", NULL, 1, &d);
    assert_string_equal(d.reason, "REQUIRES_APPROVAL");
}

static void test_containment(void **state)
{
    fx *f = *state;
    rx_decision d;
    f->hosts[0].max_containment = RX_CONT_PROCESS_GROUP;
    decide(f, 0, A_CONTAIN, NULL, NULL, 0, &d);
    assert_int_equal(d.verdict, RX_DENY);
    assert_string_equal(d.reason, "DENY_CONTAINMENT");
    assert_contains(d.message, "requires containment pid-namespace; host lab1 offers at most "
                               "process-group");
    f->hosts[0].max_containment = RX_CONT_PID_NAMESPACE;
    decide(f, 0, A_CONTAIN, NULL, NULL, 0, &d);
    assert_string_equal(d.reason, "ALLOW_LEVEL");
}

/* ---- Approvals through the gate ------------------------------------------------------- */

static void pending(fx *f, const char *unit, char id[RX_APPROVAL_ID_LEN + 1])
{
    rx_decision d;
    decide(f, 0, A_RESTART, unit, NULL, 0, &d);
    assert_int_equal(d.verdict, RX_REQUIRES_APPROVAL);
    assert_string_equal(d.reason, "REQUIRES_APPROVAL");
    assert_true(rx_approval_id_ok(d.challenge_id));
    assert_contains(d.message, d.challenge_id);
    memcpy(id, d.challenge_id, RX_APPROVAL_ID_LEN + 1);
}

static void approve(fx *f, const char *id)
{
    rexec_error e = {0};
    if (rx_approvals_approve(&f->ws, id, "tester", &e) != 0)
        fail_msg("approve %s: %s", id, e.msg);
}

static void test_grant_flow(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1];
    rx_decision d;

    pending(f, "nginx", id);
    assert_true(exists(f->apdir, id, ".json"));
    decide(f, 0, A_RESTART, "nginx", id, 0, &d);
    assert_int_equal(d.verdict, RX_DENY);
    assert_string_equal(d.reason, "GRANT_NOT_APPROVED");
    assert_contains(d.message, "rexec approve");

    approve(f, id);
    /* eval_only checks the grant but leaves it */
    decide(f, 0, A_RESTART, "nginx", id, 1, &d);
    assert_string_equal(d.reason, "ALLOW_GRANT");
    assert_true(exists(f->apdir, id, ".json"));

    decide(f, 0, A_RESTART, "nginx", id, 0, &d);
    assert_int_equal(d.verdict, RX_ALLOW);
    assert_string_equal(d.reason, "ALLOW_GRANT");
    assert_int_equal(d.effective_risk, RX_L2);
    assert_contains(d.message, "approved by tester");
    assert_false(exists(f->apdir, id, ".json"));
    assert_true(exists(f->apdir, id, ".used"));

    decide(f, 0, A_RESTART, "nginx", id, 0, &d);
    assert_int_equal(d.verdict, RX_DENY);
    assert_string_equal(d.reason, "GRANT_USED");

    rx_challenge c;
    rexec_error e = {0};
    assert_int_equal(rx_approvals_load(&f->ws, id, &c, &e), 0);
    assert_int_equal(c.state, RX_AP_USED);
    assert_true(c.used_at > 0);
    rx_challenge_free(&c);
}

static void test_grant_unknown(void **state)
{
    fx *f = *state;
    rx_decision d;
    static const char *const ids[] = {"ch-0123456789abcdef", "../../etc/passwd", "ch-0123",
                                      "ch-0123456789ABCDEF", ""};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        decide(f, 0, A_RESTART, "nginx", ids[i], 0, &d);
        assert_int_equal(d.verdict, RX_DENY);
        assert_string_equal(d.reason, "GRANT_UNKNOWN");
    }
}

static void test_grant_mismatch(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1];
    rx_decision d;

    pending(f, "nginx", id);
    approve(f, id);
    decide(f, 0, A_RESTART, "sshd", id, 0, &d);
    assert_int_equal(d.verdict, RX_DENY);
    assert_string_equal(d.reason, "GRANT_MISMATCH");
    assert_contains(d.message, "parameter \"unit\" differs");
    assert_contains(d.message, "not used");
    decide(f, 1, A_RESTART, "nginx", id, 0, &d);
    assert_string_equal(d.reason, "GRANT_MISMATCH");
    assert_contains(d.message, "approved for host lab1, not lab2");
    /* the catalog changed under the grant: the command is part of the request */
    f->actions[A_RESTART].command = "systemctl stop {unit}";
    decide(f, 0, A_RESTART, "nginx", id, 0, &d);
    assert_string_equal(d.reason, "GRANT_MISMATCH");
    f->actions[A_RESTART].command = "systemctl restart {unit}";
    /* a refused drift does not burn the grant: the approved request still runs, once */
    assert_true(exists(f->apdir, id, ".json"));
    decide(f, 0, A_RESTART, "nginx", id, 0, &d);
    assert_string_equal(d.reason, "ALLOW_GRANT");
}

static void test_grant_stdin(void **state)
{
    fx *f = *state;
    rexec_param v = {"unit", "nginx", 5};
    rx_gate_input in = input(f, 0, A_RESTART, &v);
    rx_decision d;
    rexec_error e = {0};
    char id[RX_APPROVAL_ID_LEN + 1];

    in.stdin_data = (const unsigned char *)"abc";
    in.stdin_len = 3;
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "REQUIRES_APPROVAL");
    memcpy(id, d.challenge_id, sizeof(id));
    approve(f, id);
    in.grant_id = id;
    in.stdin_data = (const unsigned char *)"abd";
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "GRANT_MISMATCH");
    assert_contains(d.message, "stdin differs");
    in.stdin_data = NULL;
    in.stdin_len = 0;
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "GRANT_MISMATCH");
    in.stdin_data = (const unsigned char *)"abc";
    in.stdin_len = 3;
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "ALLOW_GRANT");
}

static void test_grant_not_needed(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1];
    rx_decision d;
    pending(f, "nginx", id);
    approve(f, id);
    /* an L0 call under the host's allow level: the grant is not consumed */
    decide(f, 0, A_UNAME, NULL, id, 0, &d);
    assert_string_equal(d.reason, "ALLOW_LEVEL");
    assert_contains(d.message, "not needed");
    assert_true(exists(f->apdir, id, ".json"));
    /* above the approve level a grant does not help */
    decide(f, 0, A_SHELL, "id", id, 0, &d);
    assert_string_equal(d.reason, "DENY_LEVEL");
    assert_true(exists(f->apdir, id, ".json"));
}

static int64_t fake_now;
static int64_t fake_clock(void)
{
    return fake_now;
}

static void test_expiry(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], id2[RX_APPROVAL_ID_LEN + 1];
    rx_decision d;
    rexec_error e = {0};

    fake_now = 1700000000;
    rx_approvals_set_clock(fake_clock);
    pending(f, "nginx", id);
    pending(f, "nginx", id2);
    /* a challenge nobody approved in time cannot be approved */
    fake_now += 900;
    assert_int_equal(rx_approvals_approve(&f->ws, id, "tester", &e), REXEC_EDENIED);
    assert_contains(e.msg, "expired");
    decide(f, 0, A_RESTART, "nginx", id, 0, &d);
    assert_string_equal(d.reason, "GRANT_EXPIRED");

    /* approved just in time: the grant gets its own TTL from the approval */
    fake_now -= 1;
    approve(f, id2);
    fake_now += 899;
    decide(f, 0, A_RESTART, "nginx", id2, 1, &d);
    assert_string_equal(d.reason, "ALLOW_GRANT");
    fake_now += 1;
    decide(f, 0, A_RESTART, "nginx", id2, 0, &d);
    assert_int_equal(d.verdict, RX_DENY);
    assert_string_equal(d.reason, "GRANT_EXPIRED");
    assert_true(exists(f->apdir, id2, ".json")); /* refused, not consumed */

    /* prune removes both expired files */
    size_t removed = 0;
    assert_int_equal(rx_approvals_prune(&f->ws, &removed, &e), 0);
    assert_int_equal(removed, 2);
    assert_false(exists(f->apdir, id, ".json"));
    decide(f, 0, A_RESTART, "nginx", id2, 0, &d);
    assert_string_equal(d.reason, "GRANT_UNKNOWN");
}

static void test_challenge_file(void **state)
{
    fx *f = *state;
    rexec_param v = {"url", "https://api.lab.internal/me", 27};
    rx_gate_input in = input(f, 0, A_WHOAMI, &v);
    rx_decision d;
    rexec_error e = {0};
    rx_challenge c;
    regex_t re;

    f->actions[A_WHOAMI].risk = RX_L2;
    in.rendered = "curl 'https://api.lab.internal/me'";
    in.stdin_data = (const unsigned char *)"";
    in.stdin_len = 0;
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "REQUIRES_APPROVAL");
    assert_int_equal(rx_approvals_load(&f->ws, d.challenge_id, &c, &e), 0);
    assert_int_equal(c.state, RX_AP_PENDING);
    assert_string_equal(c.host, "lab1");
    assert_string_equal(c.action, "api.whoami");
    assert_string_equal(c.risk, "L2");
    assert_string_equal(c.rendered, "curl 'https://api.lab.internal/me'");
    assert_int_equal(c.n_params, 1);
    assert_string_equal(c.param_names[0], "url");
    assert_string_equal(c.param_values[0], "https://api.lab.internal/me");
    assert_int_equal(c.n_secrets, 1);
    assert_string_equal(c.secrets[0], "API_TOKEN");
    assert_int_equal(c.has_stdin, 1);
    assert_int_equal(c.stdin_len, 0);
    assert_string_equal(c.stdin_sha256,
                        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_int_equal(c.expires - c.created, 900);
    assert_int_equal(regcomp(&re, "^[0-9A-HJKMNP-TV-Z]{3}-[0-9A-HJKMNP-TV-Z]{3}$",
                             REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(regexec(&re, c.code, 0, NULL, 0), 0);
    regfree(&re);
    char hash[65];
    rx_gate_request_hash(&in, hash);
    assert_string_equal(c.request_hash, hash);
    rx_challenge_free(&c);
}

static void test_request_hash(void **state)
{
    fx *f = *state;
    rexec_param v = {"unit", "nginx", 5};
    rx_gate_input in = input(f, 0, A_RESTART, &v);
    char h0[65], h1[65];

    rx_gate_request_hash(&in, h0);
    assert_int_equal(strlen(h0), 64);
    rx_gate_request_hash(&in, h1);
    assert_string_equal(h0, h1);
    v.value_len = 4; /* "ngin" */
    rx_gate_request_hash(&in, h1);
    assert_string_not_equal(h0, h1);
    v.value_len = 5;
    in.stdin_data = (const unsigned char *)"";
    rx_gate_request_hash(&in, h1); /* empty stdin is not "no stdin" */
    assert_string_not_equal(h0, h1);
    in.stdin_data = NULL;
    f->actions[A_RESTART].secrets = f->secrets;
    f->actions[A_RESTART].n_secrets = 1;
    rx_gate_request_hash(&in, h1);
    assert_string_not_equal(h0, h1);
    f->actions[A_RESTART].n_secrets = 0;

    /* fields are length-prefixed: moving a byte from one to the next changes the hash */
    rx_host ab = host("ab", RX_L1, RX_L2), a = host("a", RX_L1, RX_L2);
    rx_action c = action("c", RX_L0, "x", NULL, 0), bc = action("bc", RX_L0, "x", NULL, 0);
    rx_gate_input x = {.ws = &f->ws, .host = &ab, .action = &c};
    rx_gate_input y = {.ws = &f->ws, .host = &a, .action = &bc};
    rx_gate_request_hash(&x, h0);
    rx_gate_request_hash(&y, h1);
    assert_string_not_equal(h0, h1);
}

static void test_modes_under_umask(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], p[256];
    rx_decision d;
    mode_t old = umask(0);
    pending(f, "nginx", id);
    assert_int_equal(mode_of(f->apdir), 0700);
    snprintf(p, sizeof(p), "%s/%s.json", f->apdir, id);
    assert_int_equal(mode_of(p), 0600);
    approve(f, id);
    assert_int_equal(mode_of(p), 0600);
    decide(f, 0, A_RESTART, "nginx", id, 0, &d);
    assert_string_equal(d.reason, "ALLOW_GRANT");
    snprintf(p, sizeof(p), "%s/%s.used", f->apdir, id);
    assert_int_equal(mode_of(p), 0600);
    umask(077);
    pending(f, "nginx", id);
    umask(old);
    snprintf(p, sizeof(p), "%s/%s.json", f->apdir, id);
    assert_int_equal(mode_of(p), 0600);
}

static void test_symlink_refused(void **state)
{
    fx *f = *state;
    char other[128];
    rexec_param v = {"unit", "nginx", 5};
    rx_gate_input in = input(f, 0, A_RESTART, &v);
    rx_decision d;
    rexec_error e = {0};

    snprintf(other, sizeof(other), "%s/elsewhere", f->dir);
    assert_int_equal(mkdir(other, 0700), 0);
    assert_int_equal(symlink(other, f->apdir), 0);
    assert_int_equal(rx_gate_decide(&in, &d, &e), REXEC_EAUDIT);
    assert_int_equal(rexec_err_exit_code(REXEC_EAUDIT), 74);
    assert_contains(e.msg, "symbolic link");
    assert_int_equal(unlink(f->apdir), 0);

    /* a challenge file replaced by a symlink is refused too */
    char id[RX_APPROVAL_ID_LEN + 1], p[256], q[256];
    pending(f, "nginx", id);
    snprintf(p, sizeof(p), "%s/%s.json", f->apdir, id);
    snprintf(q, sizeof(q), "%s/real.json", other);
    assert_int_equal(rename(p, q), 0);
    assert_int_equal(symlink(q, p), 0);
    assert_int_equal(rx_approvals_approve(&f->ws, id, "tester", &e), REXEC_EAUDIT);
    assert_contains(e.msg, "symbolic link");
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    assert_int_equal(chmod(path, 0600), 0);
}

/* A file that is not what rexec wrote is a storage failure (74), never a grant. */
static void test_invalid_files(void **state)
{
    fx *f = *state;
    char id[RX_APPROVAL_ID_LEN + 1], p[256], q[256];
    rexec_param v = {"unit", "nginx", 5};
    rx_gate_input in = input(f, 0, A_RESTART, &v);
    rx_decision d;
    rexec_error e = {0};

    pending(f, "nginx", id);
    approve(f, id);
    in.grant_id = id;
    snprintf(p, sizeof(p), "%s/%s.json", f->apdir, id);
    assert_int_equal(chmod(p, 0644), 0);
    assert_int_equal(rx_gate_decide(&in, &d, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "group- or world-readable");
    assert_int_equal(chmod(p, 0600), 0);

    /* the same file under another id */
    char other[] = "ch-00000000000000aa";
    snprintf(q, sizeof(q), "%s/%s.json", f->apdir, other);
    char text[8192];
    FILE *fp = fopen(p, "r");
    assert_non_null(fp);
    text[fread(text, 1, sizeof(text) - 1, fp)] = 0;
    fclose(fp);
    write_text(q, text);
    in.grant_id = other;
    assert_int_equal(rx_gate_decide(&in, &d, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "does not match the file name");

    write_text(q, "{\"version\": 1, \"id\": \"ch-00000000000000aa\", \"extra\": 1}");
    assert_int_equal(rx_gate_decide(&in, &d, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "extra");
    write_text(q, "{\"id\": 1, \"id\": 2}");
    assert_int_equal(rx_gate_decide(&in, &d, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "not a valid challenge");

    /* the real one is still a grant */
    in.grant_id = id;
    assert_int_equal(rx_gate_decide(&in, &d, &e), 0);
    assert_string_equal(d.reason, "ALLOW_GRANT");
}

static void test_approvals_list(void **state)
{
    fx *f = *state;
    char a[RX_APPROVAL_ID_LEN + 1], b[RX_APPROVAL_ID_LEN + 1], c[RX_APPROVAL_ID_LEN + 1];
    rx_challenge *v = NULL;
    size_t n = 0;
    rexec_error e = {0};
    rx_decision d;

    assert_int_equal(rx_approvals_list(&f->ws, 0, &v, &n, &e), 0); /* no approvals/ yet */
    assert_int_equal(n, 0);
    fake_now = 1700000000;
    rx_approvals_set_clock(fake_clock);
    pending(f, "a", a);
    fake_now++;
    pending(f, "b", b);
    fake_now++;
    pending(f, "c", c);
    approve(f, b);
    decide(f, 0, A_RESTART, "c", NULL, 0, &d); /* one more pending */
    approve(f, c);
    decide(f, 0, A_RESTART, "c", c, 0, &d);
    assert_string_equal(d.reason, "ALLOW_GRANT");
    assert_int_equal(rx_approvals_list(&f->ws, 0, &v, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(v[0].id, a);
    assert_int_equal(v[0].state, RX_AP_PENDING);
    assert_string_equal(v[1].id, b);
    assert_int_equal(v[1].state, RX_AP_APPROVED);
    assert_string_equal(v[1].approved_by, "tester");
    rx_challenges_free(v, n);
    assert_int_equal(rx_approvals_list(&f->ws, 1, &v, &n, &e), 0);
    assert_int_equal(n, 4);
    rx_challenges_free(v, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_params_unknown_missing_duplicate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_params_defaults_and_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_params_scope, setup, teardown),
        cmocka_unit_test_setup_teardown(test_level_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_level_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_floors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_containment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grant_flow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grant_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grant_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grant_stdin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grant_not_needed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_challenge_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_hash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_modes_under_umask, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_approvals_list, setup, teardown),
    };
    return cmocka_run_group_tests_name("gate", tests, NULL, NULL);
}
