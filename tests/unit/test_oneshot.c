/* One-shot commands (src/shell/oneshot.c): which commands the runner's call shell may `exec`.
 *   - a table of commands and the answer, the false ones each a reason exec would differ
 *     (an operator, a redirection, a builtin, an assignment, ...) or the reader cannot be sure;
 *   - every command the table accepts, run by a real bash both ways (`CMD` and `exec CMD`,
 *     each the last thing of `bash -c`... after an eval, as the call shell runs it): the same
 *     output, the same exit status;
 *   - rx_render_runner_code puts `exec ` before an accepted command and nothing before another. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "buf.h"
#include "oneshot.h"
#include "render.h"

static const struct {
    const char *cmd;
    bool oneshot;
} cases[] = {
    {"uname -a", true},
    {"  uname   -a  ", true},
    {"/usr/bin/id -u", true},
    {"ls -d /tmp/.", true},
    {"sleep 0", true},
    {"printenv HOME", true},
    {"cat '/etc/hostname'", true},
    {"stat -c '%a %n' /", true},
    {"env 'A=b c' printenv A", true},
    {"sh -c 'echo \"a;b\" | tr a x'", true},
    {"printenv \"HOME\"", true},
    {"ls \"$HOME\" ${HOME} $HOME/.", true},
    {"expr 1 + 2", true},
    {"ls /etc/host*", true},
    {"curl -sS -H \"Authorization: Bearer $API_TOKEN\" 'https://x/y?a=1&b=2'", true},
    {"", false},
    {"   ", false},
    {"uname -a; id", false},
    {"uname -a && id", false},
    {"uname -a || id", false},
    {"uname -a | cat", false},
    {"uname -a &", false},
    {"uname -a > /tmp/x", false},
    {"cat < /etc/hostname", false},
    {"uname -a 2>&1", false},
    {"uname\n-a", false},
    {"(uname -a)", false},
    {"{ uname -a; }", false},
    {"uname -a # a comment", false},
    {"echo hi", false},
    {"printf '%s\\n' x", false},
    {"true", false},
    {"cd /tmp", false},
    {"exec uname", false},
    {"command uname", false},
    {"if true; then uname; fi", false},
    {"time uname", false},
    {"[ -e /tmp ]", false},
    {"test -e /tmp", false},
    {"FOO=bar env", false},
    {"-x", false},
    {"'uname' -a", false},
    {"\"uname\" -a", false},
    {"$CMD -a", false},
    {"uname $(id -u)", false},
    {"uname `id -u`", false},
    {"uname \"$(id -u)\"", false},
    {"ls \"${HOME:-/}\"", false},
    {"ls $1", false},
    {"ls $@", false},
    {"echo\\ x", false},
    {"ls 'unterminated", false},
    {"ls \"unterminated", false},
    {"ls ~", false},
    {"ls a\\ b", false},
    {"ls {a,b}", false},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (rx_shell_oneshot(cases[i].cmd) != cases[i].oneshot)
            fail_msg("rx_shell_oneshot(\"%s\") should be %s", cases[i].cmd,
                     cases[i].oneshot ? "true" : "false");
}

/* Runs CODE the way the call's shell does (`bash -c '...; eval "$c"'`) in a scratch
 * environment; returns its output (stdout and stderr) and sets *status. */
static char *run_bash(const char *code, int *status)
{
    char *out = calloc(1, 65536);
    size_t n;
    FILE *p;
    assert_non_null(out);
    setenv("RX_CODE", code, 1); /* passed by name: no quoting of the code */
    p = popen("env -i HOME=/ PATH=/usr/bin:/bin API_TOKEN=t0k LC_ALL=C RX_CODE=\"$RX_CODE\" "
              "bash -c 'c=$RX_CODE; unset RX_CODE; eval \"$c\"' rexec 2>&1",
              "r");
    assert_non_null(p);
    n = fread(out, 1, 65535, p);
    out[n] = 0;
    *status = pclose(p);
    unsetenv("RX_CODE");
    return out;
}

static void test_same_as_fork(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (!cases[i].oneshot || strstr(cases[i].cmd, "sleep") || strstr(cases[i].cmd, "curl"))
            continue;
        char with_exec[512];
        int s1, s2;
        snprintf(with_exec, sizeof(with_exec), "exec %s", cases[i].cmd);
        char *a = run_bash(cases[i].cmd, &s1), *b = run_bash(with_exec, &s2);
        if (strcmp(a, b) != 0 || s1 != s2)
            fail_msg("\"%s\": forked gave %d \"%s\", exec gave %d \"%s\"", cases[i].cmd, s1, a,
                     s2, b);
        free(a);
        free(b);
    }
}

static char *code_for(const char *command)
{
    rx_render_in in = {.command = command, .timeout_s = 1, .stdin_len = -1};
    rx_buf out;
    rexec_error e;
    rx_buf_init(&out, 1 << 20);
    assert_int_equal(rx_render_runner_code(&in, &out, &e), 0);
    assert_int_equal(rx_buf_addc(&out, 0), 0);
    char *s = strdup((const char *)out.data);
    rx_buf_free(&out);
    return s;
}

static void test_runner_code(void **state)
{
    (void)state;
    char *s = code_for("uname -a");
    assert_non_null(strstr(s, "\nexec uname -a\n"));
    free(s);
    s = code_for("echo hi; uname -a");
    assert_null(strstr(s, "exec echo"));
    assert_null(strstr(s, "exec uname"));
    assert_non_null(strstr(s, "\necho hi; uname -a\n"));
    free(s);
}

/* Which oneshot commands may run in a fork of the runner's slot: only those whose expansions
 * name a parameter binding, a secret of the call or one of a few plain environment names;
 * never a variable bash sets itself ($$ and the like are not oneshot at all), one a fork of the
 * slot could see otherwise (REPLY, the slot's own), or anything else unknown. */
static const struct {
    const char *cmd;
    bool forks;
} fork_cases[] = {
    {"uname -a", true},
    {"ls -l \"$__rx_p_path\" ${__rx_p_dir}/x", true},
    {"printenv \"${#__rx_p_x}\"", true},
    {"ls \"$HOME\" ${PATH} $USER $LOGNAME $LANG $TMPDIR", true},
    {"curl -H \"Authorization: Bearer $API_TOKEN\" 'https://x/$BASHPID'", true},
    {"echo-args '$RANDOM' \"'$HOME'\"", true},
    {"uname -a; id", false},   /* not oneshot */
    {"/bin/echo $$", false},     /* not oneshot */
    {"/bin/echo $BASHPID", false},
    {"/bin/echo \"$PPID\"", false},
    {"/bin/echo ${SHLVL}", false},
    {"/bin/echo $BASH_SUBSHELL $RANDOM", false},
    {"/bin/echo $SECONDS", false},
    {"/bin/echo $LINENO", false},
    {"/bin/echo ${#BASH_EXECUTION_STRING}", false},
    {"/bin/echo $BASH_ARGV0", false},
    {"/bin/echo $REPLY", false},
    {"/bin/echo $_ ${_}", false},
    {"/bin/echo $nonce $d $c", false},
    {"/bin/echo $__rx_ns", false},
    {"/bin/echo $__rx_p", false}, /* no parameter's name */
    {"/bin/echo $OTHER_TOKEN", false}, /* not a secret of this call */
    {"/bin/echo $PWD $OLDPWD", false},
    {"/bin/echo $HOMEDIR", false},
    {"/bin/echo $API_TOKENS", false},
};

static bool bound_api_token(void *ud, const char *name, size_t n)
{
    (void)ud;
    return n == 9 && memcmp(name, "API_TOKEN", 9) == 0;
}

static void test_slot_forkable(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(fork_cases) / sizeof(fork_cases[0]); i++)
        if (rx_shell_slot_forkable(fork_cases[i].cmd, bound_api_token, NULL) != fork_cases[i].forks)
            fail_msg("rx_shell_slot_forkable(\"%s\") should be %s", fork_cases[i].cmd,
                     fork_cases[i].forks ? "true" : "false");
    assert_false(rx_shell_slot_forkable("ls $API_TOKEN", NULL, NULL));
}

/* rx_render_runner_forks takes the secrets from the call: a secret's name is bound, another
 * name is not. */
static void test_render_forks(void **state)
{
    (void)state;
    rx_secret sec = {.name = "API_TOKEN", .value = (const unsigned char *)"secretvalue", .len = 11};
    rx_render_in in = {.command = "curl -H \"X: $API_TOKEN\" x", .secrets = &sec, .n_secrets = 1,
                       .timeout_s = 1, .stdin_len = -1};
    assert_true(rx_render_runner_forks(&in));
    in.n_secrets = 0;
    assert_false(rx_render_runner_forks(&in));
    in.command = "echo hi";
    assert_false(rx_render_runner_forks(&in));
    in.command = "uname -a";
    assert_true(rx_render_runner_forks(&in));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_same_as_fork),
        cmocka_unit_test(test_runner_code),
        cmocka_unit_test(test_slot_forkable),
        cmocka_unit_test(test_render_forks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
