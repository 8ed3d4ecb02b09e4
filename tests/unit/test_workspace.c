/* The workspace loader: strict rexec.json, errors that name the JSON path, and the effective
 * risk floors derived at load. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "workspace.h"

static char dir[64];

#define HOSTS "\"hosts\": {\"h1\": {\"address\": \"127.0.0.1\", \"user\": \"u\", \"key\": \"k\"}}"

static void write_ws(const char *json)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/rexec.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    chmod(path, 0600);
}

/* Loads json; expects code, and (if want) that the message contains want. */
static void expect(const char *json, int code, const char *want)
{
    rx_ws *ws = NULL;
    rexec_error err = {0};
    write_ws(json);
    int r = rx_ws_load(&ws, dir, &err);
    if (r != code || (want && strstr(err.msg, want) == NULL))
        fail_msg("got %d \"%s\", expected %d containing \"%s\"", r, err.msg, code,
                 want ? want : "");
    rx_ws_free(ws);
}

static rx_ws *load(const char *json)
{
    rx_ws *ws = NULL;
    rexec_error err = {0};
    write_ws(json);
    if (rx_ws_load(&ws, dir, &err) != 0)
        fail_msg("load failed: %s", err.msg);
    return ws;
}

static void test_minimal_and_defaults(void **state)
{
    (void)state;
    rx_ws *ws = load("{" HOSTS "}");
    const rx_host *h = rx_ws_host(ws, "h1");
    assert_non_null(h);
    assert_int_equal(h->port, 22);
    assert_int_equal(h->allow, RX_L1);
    assert_int_equal(h->approve, RX_L2);
    assert_int_equal(h->hostkey, RX_HK_STRICT);
    assert_true(h->key[0] == '/'); /* resolved against the workspace */
    assert_true(ws->limits.timeout_s == 120 && ws->limits.kill_after_s == 5);
    assert_int_equal(ws->limits.max_output_bytes, 1 << 20);
    rx_ws_free(ws);
}

static void test_errors_name_the_path(void **state)
{
    (void)state;
    expect("{" HOSTS ", \"bogus\": 1}", REXEC_ECONFIG, "bogus");
    expect("{\"hosts\": {\"h1\": {\"address\": \"a\", \"user\": \"u\", \"key\": \"k\", \"port\": 0}}}",
           REXEC_ECONFIG, "hosts.h1.port");
    expect("{\"hosts\": {\"h1\": {\"address\": \"a\", \"user\": \"u\", \"key\": \"k\", \"port\": true}}}",
           REXEC_ECONFIG, "hosts.h1.port");
    expect("{\"hosts\": {\"h1\": {\"user\": \"u\", \"key\": \"k\"}}}", REXEC_ECONFIG,
           "hosts.h1.address");
    expect("{" HOSTS ", \"actions\": {\"a\": {\"risk\": \"L5\", \"command\": \"x\"}}}",
           REXEC_ECONFIG, "actions.a.risk");
    expect("{" HOSTS ", \"actions\": {\"a\": {\"risk\": \"L0\", \"command\": \"x\", \"extra\": 1}}}",
           REXEC_ECONFIG, "actions.a.extra");
    expect("{" HOSTS ", \"groups\": {\"g\": [\"h1\", \"h9\"]}}", REXEC_ECONFIG, "groups.g[1]");
    expect("{" HOSTS ", \"limits\": {\"timeout_s\": -1}}", REXEC_ECONFIG, "limits.timeout_s");
    expect("{" HOSTS ", " HOSTS "}", REXEC_ECONFIG, "duplicate");
    expect("{" HOSTS ", \"scope\": {\"cidrs\": [\"10.0.0.1/8\"]}}", REXEC_ECONFIG, "scope.cidrs[0]");
    expect("not json", REXEC_ECONFIG, "JSON");
}

/* More refusals, each naming its field and what is expected instead. */
#define A1(body) "{" HOSTS ", \"actions\": {\"a\": " body "}}"
#define H1(extra) "{\"hosts\": {\"h1\": {\"address\": \"a\", \"user\": \"u\", \"key\": \"k\"" extra "}}}"
static void test_more_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *json, *want;
    } cases[] = {
        {H1(", \"host_key\": \"maybe\""), "hosts.h1.host_key: expected \"strict\", \"accept-new\""},
        {H1(", \"proxy_jump\": \"j1,j2\""), "hosts.h1.proxy_jump: \"j1,j2\" has several hops"},
        {H1(", \"allow\": \"L2\", \"approve\": \"L1\""), "hosts.h1.approve: L1 is below allow (L2)"},
        {H1(", \"containment\": \"cgroup\""), "cgroup containment is not available yet"},
        {"{\"hosts\": {\"bad name\": {\"address\": \"a\", \"user\": \"u\", \"key\": \"k\"}}}",
         "a host name is 1-64 of [A-Za-z0-9._-]"},
        {"{" HOSTS ", \"groups\": {\"g g\": [\"h1\"]}}", "a group name is 1-64 of"},
        {"{" HOSTS ", \"actions\": {\"a/b\": {\"risk\": \"L0\", \"command\": \"x\"}}}",
         "an action name is 1-128 of"},
        {A1("{\"command\": \"x\"}"), "actions.a: missing \"risk\" (L0, L1, L2 or L3)"},
        {A1("{\"risk\": \"L0\", \"command\": \"x {p}\", \"params\": {\"p\": {}}}"),
         "actions.a.params.p: missing \"type\""},
        {A1("{\"risk\": \"L0\", \"command\": \"x {p}\", \"params\": {\"p\": {\"type\": \"enum\"}}}"),
         "an enum parameter needs a non-empty \"values\" list"},
        {A1("{\"risk\": \"L0\", \"command\": \"x {p}\", \"params\": {\"p\": {\"type\": \"int\", "
            "\"min\": 5, \"max\": 1}}}"), "actions.a.params.p: min is above max"},
        {A1("{\"risk\": \"L0\", \"command\": \"x {p}\", \"params\": {\"p\": {\"type\": \"string\", "
            "\"default\": 3}}}"), "actions.a.params.p.default: expected a string, got a number"},
        {A1("{\"risk\": \"L0\", \"command\": \"x\", \"params\": {\"9p\": {\"type\": \"string\"}}}"),
         "a parameter name must match"},
        {"{" HOSTS ", \"audit\": {\"syslog\": \"relative\"}}", "audit.syslog"},
        {"{" HOSTS ", \"audit\": {\"key_file\": \"rel/key\"}}", "audit.key_file: must be an absolute path"},
        {"{" HOSTS ", \"limits\": {\"runner_idle_s\": 0.01}}", "limits.runner_idle_s: 0.01 is outside 0.1..604800"},
        {A1("{\"risk\": \"L0\", \"command\": \"x\", \"stdin\": \"stream\"}"),
         "actions.a.stdin: \"stream\" is not one of: staged, piped"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
        expect(cases[i].json, REXEC_ECONFIG, cases[i].want);
    /* an int parameter's default is kept as its decimal text */
    rx_ws *ws = load(A1("{\"risk\": \"L0\", \"command\": \"x {n}\", \"params\": {\"n\": "
                        "{\"type\": \"int\", \"default\": -42}}}"));
    const rx_action *a = rx_ws_action(ws, "a");
    assert_non_null(a);
    assert_string_equal(a->params[0].default_value, "-42");
    assert_true(ws->limits.runner_idle_s == 30);
    assert_int_equal(a->stdin_piped, 0); /* stdin is staged unless the action says "piped" */
    rx_ws_free(ws);
    ws = load(A1("{\"risk\": \"L0\", \"command\": \"x\", \"stdin\": \"piped\"}"));
    assert_int_equal(rx_ws_action(ws, "a")->stdin_piped, 1);
    rx_ws_free(ws);
}

static void test_catalog_checks(void **state)
{
    (void)state;
    /* a template naming an undeclared parameter */
    expect("{" HOSTS ", \"actions\": {\"a\": {\"risk\": \"L0\", \"command\": \"echo {nope}\"}}}",
           REXEC_ECONFIG, "{nope}");
    /* an unknown secret */
    expect("{" HOSTS ", \"actions\": {\"a\": {\"risk\": \"L0\", \"command\": \"x\", "
           "\"secrets\": [\"S\"]}}}", REXEC_ECONFIG, "actions.a.secrets[0]");
    /* dangerous secret names */
    const char *bad[] = {"BASH_ENV", "ENV", "PATH", "IFS", "PS4", "SHELLOPTS", "LD_PRELOAD",
                         "BASH_FUNC_x", "1X", "A-B", "PERLLIB", "PERL5OPT", "PYTHONHOME",
                         "PYTHONWARNINGS", "RUBYLIB", "NODE_PATH", "NODE_EXTRA_CA_CERTS",
                         "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "GIT_SSH_COMMAND"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        char json[512];
        snprintf(json, sizeof(json), "{" HOSTS ", \"secrets\": {\"%s\": {\"env\": \"X\"}}}", bad[i]);
        expect(json, REXEC_ECONFIG, bad[i]);
    }
    expect("{" HOSTS ", \"secrets\": {\"S\": {\"env\": \"X\", \"file\": \"f\"}}}", REXEC_ECONFIG,
           "exactly one");
    expect("{" HOSTS ", \"actions\": {\"a\": {\"risk\": \"L0\", \"command\": \"x {p}\", "
           "\"params\": {\"p\": {\"type\": \"string\", \"pattern\": \"([\"}}}}}",
           REXEC_ECONFIG, "actions.a.params.p.pattern");
    expect("{" HOSTS ", \"actions\": {\"a\": {\"risk\": \"L0\", \"command\": \"x {p}\", "
           "\"params\": {\"p\": {\"type\": \"int\", \"pattern\": \"x\"}}}}}",
           REXEC_ECONFIG, "pattern");
}

/* A placeholder must stand where a shell word can: the loader names the action, line, column
 * and context of one that does not. */
static void test_template_contexts(void **state)
{
    (void)state;
    static const struct {
        const char *t, *why;
        size_t col;
    } bad[] = {
        {"echo 'v={v}'", "single quotes", 9},
        {"echo $(( {v} + 1 ))", "arithmetic", 10},
        {"(( {v} > 2 ))", "arithmetic", 4},
        {"echo $'a{v}'", "$'", 9},
        {"echo x # {v}", "comment", 10},
        {"cat <<'EOF'\\nv={v}\\nEOF", "heredoc whose delimiter is quoted", 3},
        {"echo \\\\{v}", "backslash", 7},
        {"eval {v}", "eval", 6},
        {"{v} --version", "command word", 1},
        {"echo \\\"$'\\\"'\\\"{v}'", "single quotes", 12},
        {"[[ {v} -eq 1 ]]", "[[ ]]", 4},
        {"echo ${x:{v}}", "${...}", 10},
        {"echo ${a[{v}]}", "${...}", 10},
        {"bash -c {v}", "given to a shell", 9},
        {"printf -v {v} x", "printf -v", 11},
        {"read {v}", "declare, read", 6},
        {"test -v {v}", "test -v", 9},
        {"a[{v}]=1", "array subscript", 3},
        {"cat <\\\\\\n<EOF\\n{v}\\nEOF", "backslash-newline", 6},
        {"cat <<A <<B\\n{v}\\nA\\nB", "two heredocs", 11},
        /* inside "..." and ${x:-...} a placeholder is judged by its command too */
        {"eval \\\"{v}\\\"", "eval", 7},
        {"\\\"{v}\\\" x", "command word", 2},
        {"[[ ${x:-{v}} -eq 1 ]]", "[[ ]]", 9},
        {"echo $(( ${x:-{v}} ))", "arithmetic", 15},
        /* a substitution's output is part of the enclosing word */
        {"eval $(echo {v})", "eval", 13},
        /* a value reaching arithmetic through a variable */
        {"x={v}; echo $(( x + 1 ))", "line 1, column 17", 3},
        {"set -- {v}; echo $(( $1 ))", "line 1, column 22", 8},
        {"a={v}; b=$a; echo $((b))", "line 1, column 22", 3},
        {"for x in {v}; do echo $((x)); done", "line 1, column 26", 10},
        {"read -r x <<< {v}; echo $((x))", "line 1, column 28", 15},
        {"declare -i x; x={v}", "line 1, column 12", 17},
        /* interpreters fed by the template */
        {"echo {v} | sh", "pipe", 6},
        {"bash <<< {v}", "given to a shell", 10},
        {"bash <<EOF\\n{v}\\nEOF", "heredoc read by a shell", 1},
        {"python3 -c \\\"print('{v}')\\\"", "interpreter", 20},
        {"env {v}", "runs its arguments", 5},
        {"timeout 5 {v}", "command word", 11},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        char json[512], want[64];
        snprintf(json, sizeof(json),
                 "{" HOSTS ", \"actions\": {\"a\": {\"risk\": \"L0\", \"command\": \"%s\", "
                 "\"params\": {\"v\": {\"type\": \"string\"}}}}}", bad[i].t);
        expect(json, REXEC_ECONFIG, bad[i].why);
        snprintf(want, sizeof(want), "column %zu", bad[i].col);
        expect(json, REXEC_ECONFIG, want);
        expect(json, REXEC_ECONFIG, "actions.a.command");
    }
    static const char *const good[] = {
        "echo v={v}", "echo {v} | tr a b", "echo 'x' {v} \\\"y\\\"", "a=$(date) ; echo {v}",
        "cat <<EOF\\nbody\\nEOF\\necho {v}", "cat <<<{v}", "echo ${HOME} {v}",
        "echo $((1 + 2)) {v}", "echo ${x:-{v}}", "x # c\\necho {v}", "echo {{v}} {v}", "f() { echo {v}; }",
        "echo \\\"v={v}\\\"", "echo `cat {v}`", "echo $(cat {v})", "echo \\\"${x:-{v}}\\\"",
        "cat <<EOF\\nv={v}\\nEOF", "echo \\\"$(cat {v})\\\"", "[[ {v} == a* ]]", "test {v} = x",
        "bash -c 'echo $1' _ {v}", "printf '%s' {v}", "x={v}; echo \\\"$x\\\"", "diff <(cat {v}) /dev/null",
        "sudo systemctl restart {v}", "python3 script.py {v}", "awk '{print $1}' {v}",
        "sed -i 's/a/b/' {v}", "cat {v} | grep x", "grep x {v} 2>&1", "timeout 5 cat {v}",
        "nice -n 5 tar -C /tmp -xf {v}", "echo \\\"$(basename {v})\\\"", "case {v} in a) echo a;; esac",
        /* arithmetic on variables no value reaches */
        "D={v}; i=0; while [ $i -lt 3 ]; do i=$((i+1)); done; echo \\\"$D\\\"",
        "for ((i=0;i<3;i++)); do echo {v}; done", "declare -i n=0; msg={v}; echo \\\"$msg\\\""};
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
        char json[512];
        snprintf(json, sizeof(json),
                 "{" HOSTS ", \"actions\": {\"a\": {\"risk\": \"L0\", \"command\": \"%s\", "
                 "\"params\": {\"v\": {\"type\": \"string\"}}}}}", good[i]);
        rx_ws_free(load(json));
    }
}

static void test_floors(void **state)
{
    (void)state;
    rx_ws *ws = load("{" HOSTS ", \"actions\": {"
                     "\"sc\": {\"risk\": \"L0\", \"state_changing\": true, \"command\": \"x\"},"
                     "\"sh\": {\"risk\": \"L1\", \"command\": \"{c}\", \"params\": {\"c\": {\"type\": \"shell\"}}},"
                     "\"net\": {\"risk\": \"L0\", \"network\": true, \"command\": \"curl {u}\","
                     "  \"params\": {\"u\": {\"type\": \"url\"}}},"
                     "\"lit\": {\"risk\": \"L0\", \"command\": \"echo {{x}} ${HOME} {p}\","
                     "  \"params\": {\"p\": {\"type\": \"string\", \"default\": \"d\"}}}}}");
    assert_int_equal(rx_ws_action(ws, "sc")->risk, RX_L2);
    assert_int_equal(rx_ws_action(ws, "sc")->declared_risk, RX_L0);
    assert_int_equal(rx_ws_action(ws, "sh")->risk, RX_L3);
    assert_true(rx_ws_action(ws, "net")->params[0].in_scope); /* network implies in scope */
    assert_false(rx_ws_action(ws, "lit")->params[0].required);
    assert_string_equal(rx_ws_action(ws, "lit")->params[0].default_value, "d");
    rx_ws_free(ws);
}

static void test_targets(void **state)
{
    (void)state;
    rx_ws *ws = load("{\"hosts\": {\"a\": {\"address\": \"x\", \"user\": \"u\", \"key\": \"k\"},"
                     "\"b\": {\"address\": \"y\", \"user\": \"u\", \"key\": \"k\"}},"
                     "\"groups\": {\"g\": [\"b\", \"a\"]}}");
    const char **names = NULL;
    size_t n = 0;
    rexec_error err;
    assert_int_equal(rx_ws_targets(ws, "a,@g,b", &names, &n, &err), 0);
    assert_int_equal(n, 2); /* deduplicated, in order */
    assert_string_equal(names[0], "a");
    assert_string_equal(names[1], "b");
    free(names);
    assert_int_equal(rx_ws_targets(ws, "@nope", &names, &n, &err), REXEC_ECONFIG);
    assert_non_null(strstr(err.msg, "nope"));
    assert_int_equal(rx_ws_targets(ws, "a,zz", &names, &n, &err), REXEC_ECONFIG);
    assert_non_null(strstr(err.msg, "zz"));
    rx_ws_free(ws);
}

static void test_unsafe_workspace_refused(void **state)
{
    (void)state;
    char path[128];
    write_ws("{" HOSTS "}");
    snprintf(path, sizeof(path), "%s/rexec.json", dir);
    chmod(path, 0666); /* like ssh with an unprotected key: refused */
    rx_ws *ws = NULL;
    rexec_error err = {0};
    assert_int_equal(rx_ws_load(&ws, dir, &err), REXEC_ECONFIG);
    assert_non_null(strstr(err.msg, "writable"));
    chmod(path, 0600);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/rx-ws-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* serve.clients: verbs as bits, ping always, approve never with run/eval, names and modes
 * checked. */
static void test_serve_clients(void **state)
{
    (void)state;
    rx_ws *ws = load("{" HOSTS ", \"serve\": {\"clients\": [{\"user\": \"agent\", \"verbs\": "
                     "[\"run\", \"cancel\"]}, {\"group\": \"ops\", \"verbs\": [\"list\"]}], "
                     "\"socket_group\": \"agents\"}}");
    assert_int_equal(ws->serve.n_clients, 2);
    assert_string_equal(ws->serve.clients[0].user, "agent");
    assert_null(ws->serve.clients[0].group);
    assert_int_equal(ws->serve.clients[0].verbs, RX_VERB_RUN | RX_VERB_CANCEL | RX_VERB_PING);
    assert_int_equal(ws->serve.clients[1].verbs, RX_VERB_LIST | RX_VERB_PING);
    assert_int_equal(rx_serve_socket_mode(&ws->serve), 0660);
    rx_ws_free(ws);
    ws = load("{" HOSTS "}");
    assert_int_equal(ws->serve.n_clients, 0);
    assert_int_equal(rx_serve_socket_mode(&ws->serve), 0600);
    rx_ws_free(ws);
    assert_int_equal(rx_serve_op_verb("hosts"), RX_VERB_LIST);
    assert_int_equal(rx_serve_op_verb("reload"), RX_VERB_RELOAD);
    assert_int_equal(rx_serve_op_verb("approve"), RX_VERB_APPROVE);
    assert_int_equal(rx_serve_op_verb("deny"), RX_VERB_DENY);
    assert_int_equal(rx_serve_op_verb("approvals"), RX_VERB_APPROVALS);
    assert_int_equal(rx_serve_op_verb("watch"), RX_VERB_APPROVALS);
    assert_int_equal(rx_serve_op_verb("list"), 0); /* a verb, not an op */
    /* an approver: its own entry; never approve with run or eval for one user */
    ws = load("{" HOSTS ", \"serve\": {\"clients\": [{\"user\": \"agent\", \"verbs\": "
              "[\"run\", \"deny\"]}, {\"user\": \"alice\", \"verbs\": [\"approvals\", "
              "\"approve\", \"deny\"]}]}}");
    assert_int_equal(ws->serve.clients[1].verbs,
                     RX_VERB_APPROVALS | RX_VERB_APPROVE | RX_VERB_DENY | RX_VERB_PING);
    rx_ws_free(ws);
    expect("{" HOSTS ", \"serve\": {\"clients\": [{\"user\": \"a\", \"verbs\": [\"approve\", "
           "\"run\"]}]}}", REXEC_ECONFIG, "serve.clients[0].verbs: grants \"approve\" with");
    expect("{" HOSTS ", \"serve\": {\"clients\": [{\"user\": \"a\", \"verbs\": [\"eval\"]}, "
           "{\"user\": \"a\", \"verbs\": [\"approve\"]}]}}", REXEC_ECONFIG,
           "user \"a\" gets \"approve\" and \"run\" or \"eval\"");
    expect("{" HOSTS ", \"serve\": {\"clients\": [{\"user\": \"a\", \"group\": \"g\", "
           "\"verbs\": [\"run\"]}]}}", REXEC_ECONFIG, "exactly one of");
    expect("{" HOSTS ", \"serve\": {\"clients\": [{\"user\": \"a\", \"verbs\": []}]}}",
           REXEC_ECONFIG, "grants nothing");
    expect("{" HOSTS ", \"serve\": {\"clients\": [{\"user\": \"a\", \"verbs\": [\"sudo\"]}]}}",
           REXEC_ECONFIG, "is not a verb");
    expect("{" HOSTS ", \"serve\": {\"clients\": [{\"user\": \"../a\", \"verbs\": [\"run\"]}]}}",
           REXEC_ECONFIG, "not a user or group name");
    expect("{" HOSTS ", \"serve\": {\"socket_mode\": \"0777\"}}", REXEC_ECONFIG,
           "serve.socket_mode");
    expect("{" HOSTS ", \"serve\": {\"socket_mode\": \"0400\"}}", REXEC_ECONFIG,
           "serve.socket_mode");
    expect("{" HOSTS ", \"serve\": {\"other\": 1}}", REXEC_ECONFIG, "serve");
    /* approvals.notify: a program by absolute path, a bounded timeout */
    ws = load("{" HOSTS ", \"approvals\": {\"notify\": {\"command\": [\"/bin/n\", \"a\"]}}}");
    assert_string_equal(ws->serve.notify_argv[0], "/bin/n");
    assert_string_equal(ws->serve.notify_argv[1], "a");
    assert_null(ws->serve.notify_argv[2]);
    assert_true(ws->serve.notify_timeout_s == 10);
    rx_ws_free(ws);
    expect("{" HOSTS ", \"approvals\": {\"notify\": {\"command\": [\"n\"]}}}", REXEC_ECONFIG,
           "approvals.notify.command[0]: the program: an absolute path");
    expect("{" HOSTS ", \"approvals\": {\"notify\": {\"command\": []}}}", REXEC_ECONFIG,
           "approvals.notify.command");
    expect("{" HOSTS ", \"approvals\": {\"notify\": {\"command\": [\"/n\"], \"timeout_s\": 0}}}",
           REXEC_ECONFIG, "approvals.notify.timeout_s");
    expect("{" HOSTS ", \"approvals\": {\"other\": 1}}", REXEC_ECONFIG, "approvals");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_more_refusals),
        cmocka_unit_test(test_minimal_and_defaults), cmocka_unit_test(test_errors_name_the_path),
        cmocka_unit_test(test_catalog_checks),
        cmocka_unit_test(test_template_contexts),       cmocka_unit_test(test_floors),
        cmocka_unit_test(test_targets),              cmocka_unit_test(test_unsafe_workspace_refused),
        cmocka_unit_test(test_serve_clients),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
