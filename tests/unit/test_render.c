/* The renderer and the remote contract (docs/remote-contract.md):
 *   - rx_shell_quote: exact words, and bash reads them back byte for byte;
 *   - template expansion: {name} -> one quoted word, {{ }} literal braces, ${VAR} left alone,
 *     shell-typed parameters raw; undeclared placeholders refused when the catalog loads;
 *   - secret names (shell syntax too) and sizes refused before anything is sent;
 *   - the exact shape of a rendered script, and `bash -n` on every embedded fragment;
 *   - a PROPERTY test: random bytes as parameter, secret and stdin values, rendered by
 *     rx_render_script and run through a real `bash -s` as sshd would run it; the command writes
 *     them to files, which must come back byte-exact;
 *   - the wrapper's status lines for each way a call ends (exit, timeout, exit 124 by itself,
 *     cd failure, containment refused or failing, EOF = cancel before and after the start,
 *     death by a signal) and how rx_call_outcome maps them to exit code / timed_out / signal.
 * RX_TEST_SEED=N changes the property test's seed (default fixed), RX_TEST_ITER=N its length. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "call.h"
#include "err.h"
#include "render.h"
#include "template.h"

#define NONCE "0123456789abcdef0123456789abcdef"

/* ---- small helpers -------------------------------------------------------------------------- */

static char tmpdir[256]; /* one private directory for the whole run */

static void make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    if (tmpdir[0])
        return;
    snprintf(tmpdir, sizeof(tmpdir), "%s/rexec-test-render.XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(tmpdir));
}

static void rm_tree(const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", "--", dir, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

static char *path_in(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof(p[k]), "%s/%s", tmpdir, name);
    return p[k];
}

static void write_file(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
}

/* Reads a whole file into a NUL-terminated malloc'd buffer; NULL (and *n = 0) if missing. */
static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *d = NULL;
    size_t len = 0, cap = 0;
    *n = 0;
    if (f == NULL)
        return NULL;
    for (;;) {
        if (cap - len < 65536) {
            cap = cap * 2 + 65536;
            d = realloc(d, cap + 1);
            assert_non_null(d);
        }
        size_t got = fread(d + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    d[len] = 0;
    *n = len;
    return d;
}

/* Runs argv with stdout/stderr to /dev/null; returns the exit status (or 128+signal). */
static int run_argv(char *const argv[])
{
    int st;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);
        dup2(fd, 0), dup2(fd, 1), dup2(fd, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int bash_n(const char *path)
{
    char *argv[] = {"bash", "-n", (char *)path, NULL};
    return run_argv(argv);
}

/* ---- running a rendered script the way sshd does: `bash -s` with the script on stdin --------- */

typedef enum feed_mode {
    FEED_KEEP_OPEN,   /* stdin stays open until bash exits (a normal call) */
    FEED_CLOSE_NOW,   /* EOF right after the data: cancelled before the command started */
    FEED_CLOSE_START, /* EOF once the command has started: cancelled while it runs */
} feed_mode;

typedef struct bash_run {
    int status;           /* bash's exit status, or 128+signal */
    unsigned char *out;   /* stdout */
    size_t out_len;
    unsigned char *err;   /* stderr, the status lines included */
    size_t err_len;
    int started;          /* the start line was seen */
    int ended;            /* the end line was seen */
    char phase[16], cont[32];
    int rc, timed_out, cancelled;
    double seconds;
} bash_run;

static void bash_run_free(bash_run *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Parses the wrapper's status lines (marker + nonce) out of stderr. */
static void parse_status(bash_run *r)
{
    const char *pfx = "\036rexec:" NONCE ":";
    size_t pl = strlen(pfx);
    for (size_t i = 0; r->err && i + pl <= r->err_len; i++) {
        if (memcmp(r->err + i, pfx, pl) != 0)
            continue;
        const char *body = (const char *)r->err + i + pl;
        if (strncmp(body, "start\n", 6) == 0)
            r->started = 1;
        else if (sscanf(body, "end %15s %d %d %31s %d", r->phase, &r->rc, &r->timed_out, r->cont,
                        &r->cancelled) == 5)
            r->ended = 1;
    }
}

/* Whether the file at path contains needle (for polling the start line). */
static int file_has(const char *path, const char *needle)
{
    size_t n;
    unsigned char *d = read_file(path, &n);
    int found = d && memmem(d, n, needle, strlen(needle)) != NULL;
    free(d);
    return found;
}

/* Runs `bash -s` in dir with env (NULL-terminated "K=V" list), writing data on its stdin. stdout
 * and stderr go to files (a pipe would be held open by what the command leaves behind). */
static void run_bash_s(const void *data, size_t len, feed_mode mode, char *const env[],
                       bash_run *r)
{
    int in[2], st = 0;
    char *outp = strdup(path_in("bash.out")), *errp = strdup(path_in("bash.err"));
    memset(r, 0, sizeof(*r));
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    /* Emptied here, before the child exists, so polling never sees the last run's lines. */
    int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(o >= 0 && e >= 0);
    /* posix_spawn (vfork-like): fork() of a sanitized process costs tens of ms. */
    posix_spawn_file_actions_t fa;
    pid_t pid;
    char *argv[] = {"bash", "-s", NULL};
    double t0 = now_s();
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    assert_int_equal(posix_spawn_file_actions_adddup2(&fa, in[0], 0), 0);
    assert_int_equal(posix_spawn_file_actions_adddup2(&fa, o, 1), 0);
    assert_int_equal(posix_spawn_file_actions_adddup2(&fa, e, 2), 0);
    assert_int_equal(posix_spawn_file_actions_addchdir_np(&fa, tmpdir), 0);
    assert_int_equal(posix_spawn(&pid, "/bin/bash", &fa, NULL, argv, env), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(o);
    close(e);
    /* bash reads its script one byte at a time from a pipe: a blocking write is fine. A write
     * can fail (EPIPE, SIGPIPE is ignored) when bash stops reading early: that is a result. */
    for (size_t off = 0; off < len;) {
        ssize_t n = write(in[1], (const char *)data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    if (mode == FEED_CLOSE_NOW) {
        close(in[1]);
        in[1] = -1;
    }
    /* Wait (bounded) for bash; in FEED_CLOSE_START close stdin once the command is running. */
    for (double deadline = now_s() + 60;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (mode == FEED_CLOSE_START && in[1] >= 0 && file_has(errp, ":start\n")) {
            close(in[1]);
            in[1] = -1;
        }
        if (now_s() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("bash -s did not finish within 60 s");
        }
        sleep_ms(2);
    }
    r->seconds = now_s() - t0;
    if (in[1] >= 0)
        close(in[1]);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->out = read_file(outp, &r->out_len);
    r->err = read_file(errp, &r->err_len);
    parse_status(r);
    free(outp);
    free(errp);
}

/* A minimal, deterministic environment for the wrapper; path_prefix goes before PATH. */
typedef struct envv {
    char *v[8];
    char store[8][1024];
} envv;

static char *const *make_env(envv *e, const char *path_prefix, const char *locale)
{
    const char *path = getenv("PATH");
    int n = 0;
    snprintf(e->store[n], sizeof(e->store[n]), "PATH=%s%s%s", path_prefix ? path_prefix : "",
             path_prefix ? ":" : "", path ? path : "/usr/bin:/bin:/usr/sbin:/sbin");
    e->v[n] = e->store[n], n++;
    snprintf(e->store[n], sizeof(e->store[n]), "TMPDIR=%s", tmpdir);
    e->v[n] = e->store[n], n++;
    snprintf(e->store[n], sizeof(e->store[n]), "HOME=%s", tmpdir);
    e->v[n] = e->store[n], n++;
    snprintf(e->store[n], sizeof(e->store[n]), "SHLVL=1");
    e->v[n] = e->store[n], n++;
    snprintf(e->store[n], sizeof(e->store[n]), "LC_ALL=%s", locale ? locale : "C");
    e->v[n] = e->store[n], n++;
    e->v[n] = NULL;
    return e->v;
}

/* ---- building actions ----------------------------------------------------------------------- */

static rx_param_spec pspec(const char *name, rx_ptype type)
{
    rx_param_spec s;
    memset(&s, 0, sizeof(s));
    s.name = (char *)name;
    s.type = type;
    s.required = 1;
    return s;
}

static rx_action action_of(const char *name, const char *command, rx_param_spec *params, size_t n)
{
    rx_action a;
    memset(&a, 0, sizeof(a));
    a.name = (char *)name;
    a.command = (char *)command;
    a.params = params;
    a.n_params = n;
    return a;
}

static rx_render_in render_in(const char *command)
{
    rx_render_in in;
    memset(&in, 0, sizeof(in));
    in.command = command;
    in.timeout_s = 30;
    in.kill_after_s = 2;
    in.stdin_len = -1;
    in.min_containment = RX_CONT_NONE;
    in.max_containment = RX_CONT_PID_NAMESPACE;
    in.nonce = NONCE;
    in.run_id = "20260101T000000Z-0000000000000000";
    return in;
}

/* Renders in into a fresh buffer (asserting success) and returns it. */
static rx_buf render_ok(const rx_render_in *in)
{
    rx_buf b;
    rexec_error e = {0};
    rx_buf_init(&b, 64u << 20);
    int r = rx_render_script(in, &b, &e);
    if (r != 0)
        fail_msg("rx_render_script: %d %s", r, e.msg);
    return b;
}

/* ---- quoting -------------------------------------------------------------------------------- */

static void test_quote_exact(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } rows[] = {
        {"", "''"},
        {"abc", "'abc'"},
        {"it's", "'it'\\''s'"},
        {"'", "''\\'''"},
        {"''", "''\\'''\\'''"},
        {"a b\tc\nd", "'a b\tc\nd'"},
        {"$HOME `id` $(id) \\ \" ! * ? [a] ~ # ; & | < > { } {x}", "'$HOME `id` $(id) \\ \" ! * ? [a] ~ # ; & | < > { } {x}'"},
        {"-n", "'-n'"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
        rx_buf b;
        rx_buf_init(&b, 1024);
        assert_int_equal(rx_shell_quote(&b, rows[i].in, strlen(rows[i].in)), 0);
        assert_string_equal((const char *)b.data, rows[i].want);
        rx_buf_free(&b);
    }
    /* Any byte but NUL goes through as itself: high bytes, control bytes, the marker's \036. */
    unsigned char all[255];
    for (int i = 0; i < 255; i++)
        all[i] = (unsigned char)(i + 1);
    rx_buf b;
    rx_buf_init(&b, 4096);
    assert_int_equal(rx_shell_quote(&b, all, sizeof(all)), 0);
    assert_int_equal(b.len, 255 + 2 + 3); /* the one ' becomes '\'' */
    rx_buf_free(&b);
    /* A full buffer is an error that changes nothing it cannot finish. */
    rx_buf_init(&b, 4);
    assert_int_equal(rx_shell_quote(&b, "abcdef", 6), REXEC_EREQUEST);
    rx_buf_free(&b);
}

/* ---- template expansion --------------------------------------------------------------------- */

static void test_template_expansion(void **state)
{
    (void)state;
    rx_param_spec ps[] = {pspec("text", RX_P_STRING), pspec("n", RX_P_INT), pspec("cmd", RX_P_SHELL),
                          pspec("_u1", RX_P_PATH)};
    rexec_param vals[] = {{"text", "it's {n} $x", 11}, {"n", "42", 2}, {"cmd", "ls -l; id", 9},
                          {"_u1", "/tmp/a b", 8}};
    static const struct {
        const char *tmpl, *want;
    } rows[] = {
        {"echo {text}", "echo 'it'\\''s {n} $x'"},
        {"echo {n} {n}{n}", "echo '42' '42''42'"},
        {"{cmd}", "ls -l; id"},                             /* shell-typed: raw, the L3 exception */
        {"cat {_u1}", "cat '/tmp/a b'"},
        {"echo {{text}}", "echo {text}"},                   /* {{ and }}: literal braces */
        {"a}}b{{c {{ }}", "a}b{c { }"},
        {"awk '{{print $1}}'", "awk '{print $1}'"},
        {"echo ${HOME} ${text} $text", "echo ${HOME} ${text} $text"}, /* ${...} is the shell's */
        {"echo ${#text} ${text:-{n}}", "echo ${#text} ${text:-'42'}"},
        {"{ text} {1x} {text {} {-n} {n-1}", "{ text} {1x} {text {} {-n} {n-1}"}, /* not ours */
        {"f() { echo {n}; }", "f() { echo '42'; }"},
        {"", ""},
    };
    rx_action a = action_of("t.tmpl", "", ps, 4);
    for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
        rx_buf b;
        rexec_error e = {0};
        rx_buf_init(&b, 4096);
        a.command = (char *)rows[i].tmpl;
        assert_int_equal(rx_ws_check_template(&a, &e), 0);
        assert_int_equal(rx_render_command(&a, vals, &b, &e), 0);
        if (strcmp(b.data ? (const char *)b.data : "", rows[i].want) != 0)
            fail_msg("template \"%s\": got \"%s\", want \"%s\"", rows[i].tmpl,
                     b.data ? (const char *)b.data : "", rows[i].want);
        rx_buf_free(&b);
    }
}

static void test_template_too_long(void **state)
{
    (void)state;
    rx_param_spec ps[] = {pspec("text", RX_P_STRING)};
    char big[300];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    rexec_param vals[] = {{"text", big, strlen(big)}};
    rx_action a = action_of("t.long", "echo {text}", ps, 1);
    rx_buf b;
    rexec_error e = {0};
    rx_buf_init(&b, 100);
    assert_int_equal(rx_render_command(&a, vals, &b, &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "t.long"));
    assert_non_null(strstr(e.msg, "100 bytes"));
    rx_buf_free(&b);
}

static void test_template_undeclared(void **state)
{
    (void)state;
    rx_param_spec ps[] = {pspec("unit", RX_P_STRING)};
    static const char *const bad[] = {"systemctl restart {unt}", "{unit} {nope}", "x{_}",
                                      "echo {Unit}"};
    static const char *const good[] = {"systemctl restart {unit}", "echo {{nope}}",
                                       "echo ${nope}", "echo {unit}{{unit}}", "echo }{"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        rexec_error e = {0};
        rx_action a = action_of("svc.restart", bad[i], ps, 1);
        assert_int_equal(rx_ws_check_template(&a, &e), REXEC_ECONFIG);
        assert_non_null(strstr(e.msg, "actions.svc.restart.command"));
        assert_non_null(strstr(e.msg, "names no declared parameter"));
    }
    rexec_error e = {0};
    rx_action a = action_of("svc.restart", "systemctl restart {unt}", ps, 1);
    rx_ws_check_template(&a, &e);
    assert_non_null(strstr(e.msg, "{unt}"));
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
        rexec_error e2 = {0};
        a.command = (char *)good[i];
        assert_int_equal(rx_ws_check_template(&a, &e2), 0);
    }
}

/* ---- secret names --------------------------------------------------------------------------- */

static void test_secret_names(void **state)
{
    (void)state;
    static const char *const refused[] = {
        /* change how bash starts or parses */
        "BASH_ENV", "ENV", "PATH", "IFS", "PS4", "SHELLOPTS", "BASHOPTS", "CDPATH", "GLOBIGNORE",
        "PROMPT_COMMAND", "BASH_XTRACEFD", "BASH_FUNC_x%%", "BASH_FUNC_x", "BASH_COMPAT",
        "POSIXLY_CORRECT",
        /* break the wrapper: TMOUT times out its watchdog's read (= cancel), FUNCNEST aborts its
         * functions, EXECIGNORE hides timeout/unshare/dd from it */
        "TMOUT", "FUNCNEST", "EXECIGNORE",
        /* the loader and libc */
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GLIBC_TUNABLES", "GCONV_PATH",
        /* the wrapper's own variables */
        "__rx_x", "__rx_cmd", "__rx_nonce",
        /* not a name */
        "", "1ABC", "A-B", "A B", "A=B", "A.B", "\xc3\xa9T", "A\nB", "$A", "A;B",
    };
    static const char *const accepted[] = {"API_TOKEN", "DB_PASSWORD", "DEMO_TOKEN", "_x", "a1",
                                           "ENVIRONMENT", "PATHS", "LD", "token"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++) {
        const char *why = NULL;
        if (rx_secret_name_ok(refused[i], &why))
            fail_msg("secret name \"%s\" was accepted", refused[i]);
        assert_non_null(why);
    }
    for (size_t i = 0; i < sizeof(accepted) / sizeof(*accepted); i++) {
        const char *why = "unset";
        if (!rx_secret_name_ok(accepted[i], &why))
            fail_msg("secret name \"%s\" was refused: %s", accepted[i], why);
        assert_null(why);
    }
    char longname[200];
    memset(longname, 'A', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = 0;
    assert_false(rx_secret_name_ok(longname, NULL));
}

/* The renderer refuses what the workspace would: a bad name, a NUL in a value. */
static void test_render_refuses_secret(void **state)
{
    (void)state;
    static const char *const names[] = {"BASH_ENV", "LD_PRELOAD", "__rx_cmd", "A-B", "TMOUT"};
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        rx_secret s = {names[i], (const unsigned char *)"s3cr3t-value", 12};
        rx_render_in in = render_in("true");
        in.secrets = &s, in.n_secrets = 1;
        rx_buf b;
        rexec_error e = {0};
        rx_buf_init(&b, 1 << 20);
        assert_int_equal(rx_render_script(&in, &b, &e), REXEC_ECONFIG);
        assert_non_null(strstr(e.msg, names[i]));
        assert_null(strstr(e.msg, "s3cr3t-value"));
        assert_int_equal(b.len, 0); /* nothing rendered */
        rx_buf_free(&b);
    }
    rx_secret s = {"API_TOKEN", (const unsigned char *)"abc\0defghij", 11};
    rx_render_in in = render_in("true");
    in.secrets = &s, in.n_secrets = 1;
    rx_buf b;
    rexec_error e = {0};
    rx_buf_init(&b, 1 << 20);
    assert_int_equal(rx_render_script(&in, &b, &e), REXEC_ECONFIG);
    assert_non_null(strstr(e.msg, "API_TOKEN"));
    assert_non_null(strstr(e.msg, "NUL"));
    rx_buf_free(&b);
    /* A bad nonce or limits are the caller's bug. */
    in = render_in("true");
    in.nonce = "short";
    rx_buf_init(&b, 1 << 20);
    assert_int_equal(rx_render_script(&in, &b, &e), REXEC_EINTERNAL);
    in = render_in("true");
    in.timeout_s = 0;
    assert_int_equal(rx_render_script(&in, &b, &e), REXEC_EINTERNAL);
    rx_buf_free(&b);
}

/* ---- sizes: checked before sending, with a clear error naming the culprit -------------------- */

static void test_sizes(void **state)
{
    (void)state;
    size_t big = 128 * 1024 + 1;
    unsigned char *v = malloc(big);
    assert_non_null(v);
    memset(v, 'S', big);
    rx_secret s = {"BIG_SECRET", v, big};
    rx_render_in in = render_in("true");
    in.secrets = &s, in.n_secrets = 1;
    rx_buf b;
    rexec_error e = {0};
    rx_buf_init(&b, 64u << 20);
    assert_int_equal(rx_render_script(&in, &b, &e), REXEC_ECONFIG);
    assert_non_null(strstr(e.msg, "secret BIG_SECRET is 131073 bytes"));
    assert_non_null(strstr(e.msg, "at most"));
    assert_null(strstr(e.msg, "SSSSSSSS")); /* never the value */
    assert_int_equal(b.len, 0);

    /* Exactly at the kernel's limit for one environment entry (NAME=value): accepted. */
    s.len = RX_MAX_ARG_STRLEN - strlen("BIG_SECRET") - 1;
    assert_int_equal(rx_render_script(&in, &b, &e), 0);
    rx_buf_reset(&b);
    s.len++;
    assert_int_equal(rx_render_script(&in, &b, &e), REXEC_ECONFIG);

    /* Many secrets that fit one by one but not together (argv + environment). */
    rx_secret many[10];
    char names[10][16];
    for (int i = 0; i < 10; i++) {
        snprintf(names[i], sizeof(names[i]), "S_%d", i);
        many[i] = (rx_secret){names[i], v, 120 * 1024};
    }
    in.secrets = many, in.n_secrets = 10;
    assert_int_equal(rx_render_script(&in, &b, &e), REXEC_ECONFIG);
    assert_non_null(strstr(e.msg, "1048576"));
    assert_int_equal(b.len, 0);

    /* The command travels as one argument of the remote bash -c: same limit, a request error. */
    char *cmd = malloc(RX_MAX_ARG_STRLEN);
    assert_non_null(cmd);
    memset(cmd, 'c', RX_MAX_ARG_STRLEN - 1);
    cmd[RX_MAX_ARG_STRLEN - 1] = 0;
    in = render_in(cmd);
    assert_int_equal(rx_render_script(&in, &b, &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "rendered command"));
    cmd[RX_MAX_ARG_STRLEN - 1024 + 1] = 0; /* one byte too many */
    assert_int_equal(rx_render_script(&in, &b, &e), REXEC_EREQUEST);
    cmd[RX_MAX_ARG_STRLEN - 1024] = 0; /* the largest that passes */
    assert_int_equal(rx_render_script(&in, &b, &e), 0);
    free(cmd);
    rx_buf_free(&b);
    free(v);
}

/* ---- the exact script ----------------------------------------------------------------------- */

static void test_script_shape(void **state)
{
    (void)state;
    rx_secret s[] = {{"API_TOKEN", (const unsigned char *)"tok'en-VALUE-123", 16},
                     {"DB_PASSWORD", (const unsigned char *)"pw\nline2", 8}};
    rx_render_in in = render_in("curl -H \"Authorization: Bearer $API_TOKEN\" 'http://x/'");
    in.secrets = s, in.n_secrets = 2;
    in.cwd = "/srv/it's here";
    in.timeout_s = 1.5;
    in.kill_after_s = 2;
    in.stdin_len = 7;
    in.min_containment = RX_CONT_PROCESS_GROUP;
    in.max_containment = RX_CONT_PID_NAMESPACE;
    rx_buf b = render_ok(&in);
    rx_buf want;
    rx_buf_init(&want, 1 << 20);
    assert_int_equal(
        rx_buf_addf(&want,
                    "# rexec %s run 20260101T000000Z-0000000000000000\n"
                    "__rx_nonce=" NONCE " __rx_timeout=1.500 __rx_timeout_us=1500000 "
                    "__rx_kill_after=2.000 __rx_stdin_len=7 __rx_min_rank=1 __rx_max_rank=3\n"
                    "__rx_cwd='/srv/it'\\''s here'\n"
                    "__rx_cmd='curl -H \"Authorization: Bearer $API_TOKEN\" '\\''http://x/'\\'''\n"
                    "export API_TOKEN='tok'\\''en-VALUE-123'\n"
                    "export DB_PASSWORD='pw\nline2'\n",
                    REXEC_VERSION),
        0);
    assert_int_equal(rx_buf_add(&want, rx_remote_wrapper, rx_remote_wrapper_len), 0);
    assert_int_equal(rx_buf_adds(&want, "__rx_main; exit\n"), 0);
    assert_int_equal(b.len, want.len);
    assert_memory_equal(b.data, want.data, b.len);
    /* The secret's bytes appear once: on its export line, nowhere else. */
    unsigned char *first = memmem(b.data, b.len, "en-VALUE-123", 12);
    unsigned char *line = memmem(b.data, b.len, "export API_TOKEN='tok'\\''", 25);
    assert_non_null(first);
    assert_ptr_equal(first, line + 25);
    assert_null(memmem(first + 1, b.len - (size_t)(first + 1 - b.data), "en-VALUE-123", 12));
    /* The last line is the one bash runs; the stdin bytes follow it on the channel. */
    assert_int_equal(b.data[b.len - 1], '\n');
    rx_buf_free(&b);
    rx_buf_free(&want);

    /* Defaults: no cwd, stdin /dev/null (-1), no minimum, the host's cap. */
    in = render_in("true");
    in.max_containment = RX_CONT_PROCESS_GROUP;
    b = render_ok(&in);
    const char *tail = " __rx_stdin_len=-1 __rx_min_rank=0 __rx_max_rank=1\n__rx_cwd=''\n"
                       "__rx_cmd='true'\n";
    const char *at = strstr((const char *)b.data, tail);
    assert_non_null(at);
    /* no export line: the wrapper follows the assignments directly */
    assert_memory_equal(at + strlen(tail), rx_remote_wrapper, rx_remote_wrapper_len);
    rx_buf_free(&b);

    /* A piped stdin says so at the end of the header line; without stdin there is nothing to
     * pipe and the line is the default one. */
    in.stdin_piped = 1;
    in.stdin_len = 5;
    b = render_ok(&in);
    static const char piped[] =
        " __rx_stdin_len=5 __rx_min_rank=0 __rx_max_rank=1 __rx_stdin_piped=1\n";
    assert_non_null(strstr((const char *)b.data, piped));
    rx_buf_free(&b);
    in.stdin_len = -1;
    b = render_ok(&in);
    assert_non_null(strstr((const char *)b.data, tail));
    rx_buf_free(&b);
}

/* ---- bash -n: every fragment the binary embeds, and what the renderer makes of them ---------- */

static void test_bash_n(void **state)
{
    (void)state;
    make_tmpdir();
    write_file(path_in("wrapper.sh"), rx_remote_wrapper, rx_remote_wrapper_len);
    assert_int_equal(bash_n(path_in("wrapper.sh")), 0);
    write_file(path_in("check.sh"), rx_remote_check, rx_remote_check_len);
    assert_int_equal(bash_n(path_in("check.sh")), 0);
    /* The embedded text is the file (no truncation: the last function is closed). */
    assert_true(rx_remote_wrapper_len > 1000);
    assert_non_null(memmem(rx_remote_wrapper, rx_remote_wrapper_len, "__rx_main()", 11));
    assert_non_null(memmem(rx_remote_check, rx_remote_check_len, "__rx_check()", 12));
    assert_int_equal(rx_remote_wrapper[rx_remote_wrapper_len - 1], '\n');

    static const char tricky[] = "x'\"$(id)`id`\n}";
    rx_secret s = {"API_TOKEN", (const unsigned char *)tricky, strlen(tricky)};
    rx_render_in in = render_in("if true; then echo {x}; fi; case a in a) :;; esac");
    in.secrets = &s, in.n_secrets = 1;
    in.cwd = "/tmp";
    rx_buf b = render_ok(&in);
    write_file(path_in("script.sh"), b.data, b.len);
    assert_int_equal(bash_n(path_in("script.sh")), 0);
    rx_buf_free(&b);
    rx_buf_init(&b, 1 << 20);
    assert_int_equal(rx_render_check_script(&b, NONCE), 0);
    write_file(path_in("check_script.sh"), b.data, b.len);
    assert_int_equal(bash_n(path_in("check_script.sh")), 0);
    rx_buf_free(&b);
    /* A syntax error is caught (the check is not vacuous). */
    write_file(path_in("bad.sh"), "f() { echo 'x; }\n", 17);
    assert_int_not_equal(bash_n(path_in("bad.sh")), 0);
}

/* ---- the property test: random bytes in, the same bytes out --------------------------------- */

static uint64_t rng_state;

static uint64_t rng(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Fills p with n random bytes, never NUL unless allow_nul; half the time biased towards the
 * bytes that matter to a shell, the wrapper and the channel. */
static void fill_random(unsigned char *p, size_t n, int allow_nul)
{
    static const char special[] = "'\"\\$`!{}()[]*?~#;&|<>\n\r\t =%\036\177-";
    int biased = rng() & 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = rng();
        unsigned char c;
        if (biased && (x & 3) == 0)
            c = (unsigned char)special[(x >> 8) % (sizeof(special) - 1)];
        else if (biased && (x & 3) == 1)
            c = (unsigned char)(0x80 + ((x >> 8) & 0x7f)); /* high bytes: bad UTF-8 */
        else
            c = (unsigned char)(x >> 16);
        if (c == 0 && !allow_nul)
            c = 1;
        p[i] = c;
    }
}

static size_t random_len(size_t small_max, size_t big_max)
{
    uint64_t x = rng();
    if (x % 16 == 0)
        return (size_t)((x >> 8) % (big_max + 1));
    return (size_t)((x >> 8) % (small_max + 1));
}

static void test_property_roundtrip(void **state)
{
    (void)state;
    const char *seed = getenv("RX_TEST_SEED"), *iters = getenv("RX_TEST_ITER");
    unsigned long n_iter = iters ? strtoul(iters, NULL, 10) : 100;
    rng_state = seed ? strtoull(seed, NULL, 10) : 20240611;
    make_tmpdir();
    char *work = strdup(path_in("prop"));
    assert_int_equal(mkdir(work, 0700), 0);
    rx_param_spec ps[] = {pspec("p", RX_P_STRING)};
    /* The command never sees the secret's value in its text, only "$RX_SECRET". */
    rx_action a = action_of("t.prop",
                            "printf '%s' {p} >p.out; printf '%s' \"$RX_SECRET\" >s.out; "
                            "cat >i.out",
                            ps, 1);
    size_t cap = 200 * 1024;
    unsigned char *pv = malloc(cap + 1), *sv = malloc(cap + 1), *iv = malloc(cap + 1);
    assert_non_null(pv), assert_non_null(sv), assert_non_null(iv);
    for (unsigned long it = 0; it < n_iter; it++) {
        size_t pl = random_len(200, 60 * 1024), sl = 8 + random_len(200, 64 * 1024);
        size_t il = random_len(300, 200 * 1024);
        int no_stdin = rng() % 8 == 0;
        fill_random(pv, pl, 0);
        pv[pl] = 0;
        fill_random(sv, sl, 0);
        fill_random(iv, il, 1); /* stdin: any byte, NUL included */
        rexec_param vals[] = {{"p", (const char *)pv, pl}};
        rx_buf cmd, script;
        rexec_error e = {0};
        rx_buf_init(&cmd, 1 << 20);
        assert_int_equal(rx_render_command(&a, vals, &cmd, &e), 0);
        rx_secret s = {"RX_SECRET", sv, sl};
        rx_render_in in = render_in((const char *)cmd.data);
        in.secrets = &s, in.n_secrets = 1;
        in.cwd = work;
        in.stdin_len = no_stdin ? -1 : (long long)il;
        in.max_containment = rng() & 1 ? RX_CONT_PID_NAMESPACE : RX_CONT_PROCESS_GROUP;
        rx_buf_init(&script, 8u << 20);
        if (rx_render_script(&in, &script, &e) != 0)
            fail_msg("iteration %lu: %s", it, e.msg);
        if (!no_stdin)
            assert_int_equal(rx_buf_add(&script, iv, il), 0);
        envv env;
        bash_run r;
        run_bash_s(script.data, script.len, FEED_KEEP_OPEN,
                   make_env(&env, NULL, rng() & 1 ? "C.UTF-8" : "C"), &r);
        if (!r.started || !r.ended || strcmp(r.phase, "cmd") != 0 || r.rc != 0 || r.status != 0)
            fail_msg("iteration %lu (seed %s): status %d, started %d, ended %d, phase %s, rc %d; "
                     "stderr: %.*s",
                     it, seed ? seed : "default", r.status, r.started, r.ended, r.phase, r.rc,
                     (int)(r.err_len > 2000 ? 2000 : r.err_len), r.err ? (char *)r.err : "");
        struct {
            const char *file;
            const unsigned char *want;
            size_t len;
        } files[] = {{"p.out", pv, pl}, {"s.out", sv, sl}, {"i.out", iv, no_stdin ? 0 : il}};
        for (int k = 0; k < 3; k++) {
            char p[600];
            size_t got_len;
            snprintf(p, sizeof(p), "%s/%s", work, files[k].file);
            unsigned char *got = read_file(p, &got_len);
            if (got == NULL || got_len != files[k].len ||
                (got_len && memcmp(got, files[k].want, got_len) != 0))
                fail_msg("iteration %lu (seed %s): %s: %zu bytes back, %zu sent, or different",
                         it, seed ? seed : "default", files[k].file, got ? got_len : 0,
                         files[k].len);
            free(got);
            unlink(p);
        }
        bash_run_free(&r);
        rx_buf_free(&cmd);
        rx_buf_free(&script);
    }
    free(pv), free(sv), free(iv);
    free(work);
}

/* ---- the wrapper's status lines for each way a call ends ------------------------------------- */

/* Renders command with the given knobs, appends stdin bytes, runs it, returns the run. */
static void wrap_run(const char *command, const rx_render_in *knobs, const void *stdin_data,
                     size_t stdin_send, feed_mode mode, const char *path_prefix, bash_run *r)
{
    rx_render_in in = knobs ? *knobs : render_in(command);
    in.command = command;
    rx_buf b = render_ok(&in);
    if (stdin_data)
        assert_int_equal(rx_buf_add(&b, stdin_data, stdin_send), 0);
    envv env;
    run_bash_s(b.data, b.len, mode, make_env(&env, path_prefix, "C"), r);
    rx_buf_free(&b);
}

static void expect_end(const bash_run *r, int started, const char *phase, int rc, int timed_out)
{
    if (r->started != started || !r->ended || strcmp(r->phase, phase) != 0 || r->rc != rc ||
        r->timed_out != timed_out)
        fail_msg("want started=%d end %s %d %d; got started=%d ended=%d end %s %d %d; stderr: %.*s",
                 started, phase, rc, timed_out, r->started, r->ended, r->phase, r->rc, r->timed_out,
                 (int)(r->err_len > 2000 ? 2000 : r->err_len), r->err ? (char *)r->err : "");
}

/* No .rexec-stdin-* is left in the run's TMPDIR. The wrapper removes it in the background:
 * poll, bounded. */
static void expect_no_stdin_file(void)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "! ls -a '%s' | grep -q rexec-stdin", tmpdir);
    char *argv[] = {"sh", "-c", cmd, NULL};
    int gone = 0;
    for (int i = 0; i < 500 && !gone; i++) {
        gone = run_argv(argv) == 0;
        if (!gone)
            sleep_ms(10);
    }
    assert_true(gone);
}

/* A directory (malloc'd path) holding one executable, tool, that prints why it fails and exits
 * 1: put before PATH, it stands in for the real one. */
static char *failing_tool(const char *dir, const char *tool, const char *why)
{
    char *d = strdup(path_in(dir)), file[600], text[300];
    assert_non_null(d);
    mkdir(d, 0700);
    snprintf(file, sizeof(file), "%s/%s", d, tool);
    snprintf(text, sizeof(text), "#!/bin/sh\necho '%s' >&2\nexit 1\n", why);
    write_file(file, text, strlen(text));
    return d;
}

static void test_wrapper_exit_and_timeout(void **state)
{
    (void)state;
    make_tmpdir();
    for (int cap = RX_CONT_PROCESS_GROUP; cap <= RX_CONT_PID_NAMESPACE; cap += 2) {
        bash_run r;
        rx_render_in k = render_in("");
        k.max_containment = (rx_containment)cap;
        wrap_run("echo out; echo err >&2; exit 3", &k, NULL, 0, FEED_KEEP_OPEN, NULL, &r);
        expect_end(&r, 1, "cmd", 3, 0);
        assert_int_equal(r.out_len, 4);
        assert_memory_equal(r.out, "out\n", 4);
        bash_run_free(&r);

        /* exit 124 by itself is not a timeout */
        wrap_run("exit 124", &k, NULL, 0, FEED_KEEP_OPEN, NULL, &r);
        expect_end(&r, 1, "cmd", 124, 0);
        bash_run_free(&r);

        /* a real timeout: 124, timed_out 1, the output before it kept, on time */
        k.timeout_s = 0.4;
        k.kill_after_s = 1;
        wrap_run("echo partial; sleep 30", &k, NULL, 0, FEED_KEEP_OPEN, NULL, &r);
        expect_end(&r, 1, "cmd", 124, 1);
        assert_int_equal(r.out_len, 8);
        assert_memory_equal(r.out, "partial\n", 8);
        assert_true(r.seconds < 10);
        bash_run_free(&r);

        /* a command that ignores TERM is killed after --kill-after: still a timeout */
        wrap_run("trap '' TERM; echo partial; sleep 30 & wait; sleep 30", &k, NULL, 0,
                 FEED_KEEP_OPEN, NULL, &r);
        assert_true(r.ended && r.timed_out == 1);
        assert_true(r.rc == 124 || r.rc == 137);
        assert_true(r.seconds < 10);
        bash_run_free(&r);

        /* containment as reported */
        k = render_in("");
        k.max_containment = (rx_containment)cap;
        wrap_run("true", &k, NULL, 0, FEED_KEEP_OPEN, NULL, &r);
        expect_end(&r, 1, "cmd", 0, 0);
        if (cap == RX_CONT_PROCESS_GROUP)
            assert_string_equal(r.cont, "process-group");
        else
            assert_true(strcmp(r.cont, "pid-namespace") == 0 ||
                        strcmp(r.cont, "process-group") == 0);
        bash_run_free(&r);
    }
}

/* Death by a signal is the shell's 128+N, whichever containment runs the command, and `$$` is
 * the command's own shell in both (in a PID namespace it must not be the namespace's init, which
 * ignores a KILL sent from inside). */
static void test_wrapper_signal(void **state)
{
    (void)state;
    make_tmpdir();
    for (int cap = RX_CONT_PROCESS_GROUP; cap <= RX_CONT_PID_NAMESPACE; cap += 2) {
        bash_run r;
        rx_render_in k = render_in("");
        k.max_containment = (rx_containment)cap;
        wrap_run("echo before; kill -9 $$; echo after", &k, NULL, 0, FEED_KEEP_OPEN, NULL, &r);
        expect_end(&r, 1, "cmd", 137, 0);
        assert_int_equal(r.out_len, 7); /* "before\n", never "after" */
        bash_run_free(&r);
        wrap_run("sh -c 'kill -TERM $$'", &k, NULL, 0, FEED_KEEP_OPEN, NULL, &r);
        expect_end(&r, 1, "cmd", 143, 0);
        bash_run_free(&r);
    }
}

static void test_wrapper_setup_failures(void **state)
{
    (void)state;
    make_tmpdir();
    bash_run r;
    rx_render_in k = render_in("");
    /* cd fails: the command never starts, the phase says so */
    k.cwd = "/nonexistent/rexec-test-dir";
    wrap_run("touch ran.cd", &k, NULL, 0, FEED_KEEP_OPEN, NULL, &r);
    expect_end(&r, 0, "cd", 1, 0);
    assert_int_equal(access(path_in("ran.cd"), F_OK), -1);
    bash_run_free(&r);

    /* the action needs pid-namespace, the host allows process-group only */
    k = render_in("");
    k.min_containment = RX_CONT_PID_NAMESPACE;
    k.max_containment = RX_CONT_PROCESS_GROUP;
    wrap_run("touch ran.contain", &k, NULL, 0, FEED_KEEP_OPEN, NULL, &r);
    expect_end(&r, 0, "contain", 1, 0);
    assert_string_equal(r.cont, "process-group");
    assert_int_equal(access(path_in("ran.contain"), F_OK), -1);
    bash_run_free(&r);

    /* unshare exists but fails (a container, an LSM): no start line, so the command's statuses
     * are never confused with the set-up's */
    char *fake =
        failing_tool("fakebin", "unshare", "unshare: unshare failed: Operation not permitted");
    k = render_in("");
    wrap_run("touch ran.unshare; exit 1", &k, NULL, 0, FEED_KEEP_OPEN, fake, &r);
    if (strcmp(r.cont, "pid-namespace") == 0) { /* (not picked when userns are off, as a user) */
        assert_int_equal(r.started, 0);
        assert_true(r.ended);
        assert_string_equal(r.phase, "cmd");
        assert_int_equal(access(path_in("ran.unshare"), F_OK), -1);
    }
    bash_run_free(&r);
    free(fake);
}

/* Bytes that look like the wrapper's own text (heredoc end, marker, a call of its functions),
 * with NULs and a non-UTF-8 byte: a stdin must reach the command as they are. */
static const unsigned char stdin_sample[] =
    "EOF\n__rx_main; exit\n\0binary\xff\0__REXEC_EOF__\nlast";
#define STDIN_SAMPLE_LEN (sizeof(stdin_sample) - 1)

/* With k's stdin settings, `cat` gives back the sample byte for byte. */
static void expect_cat_echoes_sample(rx_render_in *k)
{
    bash_run r;
    k->stdin_len = (long long)STDIN_SAMPLE_LEN;
    wrap_run("cat", k, stdin_sample, STDIN_SAMPLE_LEN, FEED_KEEP_OPEN, NULL, &r);
    expect_end(&r, 1, "cmd", 0, 0);
    assert_int_equal(r.out_len, STDIN_SAMPLE_LEN);
    assert_memory_equal(r.out, stdin_sample, STDIN_SAMPLE_LEN);
    bash_run_free(&r);
}

/* With stdin_len (0: empty, -1: none), `wc -c` reads nothing and is not left waiting. */
static void expect_reads_nothing(rx_render_in *k, long long stdin_len)
{
    bash_run r;
    k->stdin_len = stdin_len;
    wrap_run("wc -c", k, NULL, 0, FEED_KEEP_OPEN, NULL, &r);
    expect_end(&r, 1, "cmd", 0, 0);
    assert_int_equal(atoi((const char *)r.out), 0);
    bash_run_free(&r);
}

static void test_wrapper_stdin(void **state)
{
    (void)state;
    make_tmpdir();
    rx_render_in k = render_in("");
    expect_cat_echoes_sample(&k);
    /* empty stdin: the command reads nothing, and is not left waiting */
    expect_reads_nothing(&k, 0);
    /* no stdin at all: /dev/null, not the channel (which stays open: reading it would hang
     * until the timeout) */
    k.timeout_s = 10;
    expect_reads_nothing(&k, -1);
    expect_no_stdin_file(); /* the staging file is removed */
}

/* "stdin": "piped": the command reads a private FIFO that the wrapper's feeder fills from the
 * channel while the command runs. Byte for byte; EOF exactly after the N bytes; a command that
 * stops reading still ends; and a stdin cut short by EOF (cancel) is never seen as EOF by the
 * command: it is stopped first. */
static void test_wrapper_piped_stdin(void **state)
{
    (void)state;
    make_tmpdir();
    const unsigned char *data = stdin_sample;
    size_t n = STDIN_SAMPLE_LEN;
    for (int cap = RX_CONT_PROCESS_GROUP; cap <= RX_CONT_PID_NAMESPACE; cap += 2) {
        bash_run r;
        rx_render_in k = render_in("");
        k.max_containment = (rx_containment)cap;
        k.stdin_piped = 1;
        expect_cat_echoes_sample(&k); /* leaves stdin_len at n */

        wrap_run("stat -L -c %F /dev/stdin", &k, data, n, FEED_KEEP_OPEN, NULL, &r);
        expect_end(&r, 1, "cmd", 0, 0);
        assert_int_equal(r.out_len, 5);
        assert_memory_equal(r.out, "fifo\n", 5);
        bash_run_free(&r);

        expect_reads_nothing(&k, 0); /* empty: EOF at once */

        /* 1 MiB that the command stops reading after 3 bytes: the call still ends, with the
         * command's own status (the feeder drops the rest) */
        size_t big = 1u << 20;
        unsigned char *zeros = calloc(1, big);
        assert_non_null(zeros);
        k.stdin_len = (long long)big;
        wrap_run("head -c 3 | wc -c; exit 7", &k, zeros, big, FEED_KEEP_OPEN, NULL, &r);
        free(zeros);
        expect_end(&r, 1, "cmd", 7, 0);
        assert_int_equal(atoi((const char *)r.out), 3);
        bash_run_free(&r);

        /* EOF after 10 of 1000 bytes: the command has started, but it must never take the 10
         * bytes for its whole stdin. It ignores TERM, so only KILL (kill-after) ends it: if its
         * stdin saw EOF meanwhile, it would touch the file. */
        unlink(path_in("ran.piped"));
        k.stdin_len = 1000;
        k.kill_after_s = 1;
        wrap_run("trap '' TERM; cat >/dev/null; touch ran.piped", &k, "0123456789", 10,
                 FEED_CLOSE_NOW, NULL, &r);
        assert_true(r.ended);
        assert_int_equal(r.cancelled, 1);
        assert_string_equal(r.phase, "cmd");
        assert_int_equal(access(path_in("ran.piped"), F_OK), -1);
        bash_run_free(&r);
    }
    /* A dd that refuses the options (an old or non-GNU one): found before the command starts,
     * which then never runs (phase stdin), rather than fed an empty stdin. */
    char *fake = failing_tool("fakedd", "dd", "dd: invalid input flag");
    {
        bash_run r;
        rx_render_in k = render_in("");
        k.stdin_piped = 1;
        k.stdin_len = (long long)n;
        k.kill_after_s = 1;
        unlink(path_in("ran.nodd"));
        wrap_run("cat >/dev/null; touch ran.nodd", &k, data, n, FEED_KEEP_OPEN, fake, &r);
        if (r.started || !r.ended || strcmp(r.phase, "stdin") != 0)
            fail_msg("dd failing: started %d ended %d phase %s; stderr: %.*s", r.started, r.ended,
                     r.phase, (int)r.err_len, r.err ? (char *)r.err : "");
        assert_int_equal(r.cancelled, 0);
        assert_int_equal(access(path_in("ran.nodd"), F_OK), -1);
        bash_run_free(&r);
    }
    free(fake);
    expect_no_stdin_file(); /* the FIFO's name is gone (removed by the feeder) */
}

/* A framed stdin run whole through `cat` (wrap_run with path_prefix): the command gets want. */
static void framed_whole(const rx_render_in *k, const void *in, size_t len, const char *prefix,
                         const unsigned char *want, size_t want_len)
{
    bash_run r;
    wrap_run("cat", k, in, len, FEED_KEEP_OPEN, prefix, &r);
    expect_end(&r, 1, "cmd", 0, 0);
    assert_int_equal(r.out_len, want_len);
    assert_memory_equal(r.out, want, want_len);
    bash_run_free(&r);
}

/* Frames cut short by EOF (in, len): staged, the command never starts (a cancel); piped, it has
 * started and is stopped before its stdin ends (it ignores TERM: KILL). */
static void framed_cut(rx_render_in *k, const char *in, size_t len, const char *prefix)
{
    bash_run r;
    unlink(path_in("ran.framed"));
    k->kill_after_s = 1;
    wrap_run("trap '' TERM; cat >/dev/null; touch ran.framed", k, in, len, FEED_CLOSE_NOW, prefix,
             &r);
    assert_true(r.ended);
    assert_int_equal(r.cancelled, 1);
    assert_string_equal(r.phase, k->stdin_piped ? "cmd" : "cancel");
    if (!k->stdin_piped) /* piped, the TERM may come before the command said it started */
        assert_int_equal(r.started, 0);
    assert_int_equal(access(path_in("ran.framed"), F_OK), -1);
    bash_run_free(&r);
}

/* A stdin of unknown length (a pipe: rx_render_in.stdin_framed): frames "LEN\n" + bytes up to
 * "0\n", staged or piped. Byte for byte whatever the bytes (a frame's bytes may look like
 * headers); frames cut short by EOF (a cancel) never start a staged command and are never
 * taken for a whole stdin by a piped one; nothing is read past the end frame. */
static void test_wrapper_framed_stdin(void **state)
{
    (void)state;
    make_tmpdir();
    rx_buf f;
    rx_buf_init(&f, 1 << 20);
    /* the sample in three frames, the first of which holds "0\n" and a header-like line */
    assert_int_equal(rx_buf_adds(&f, "6\n0\n5\nab"), 0);
    assert_int_equal(rx_buf_addf(&f, "%zu\n", STDIN_SAMPLE_LEN), 0);
    assert_int_equal(rx_buf_add(&f, stdin_sample, STDIN_SAMPLE_LEN), 0);
    assert_int_equal(rx_buf_adds(&f, "1\nZ0\n"), 0);
    size_t want_len = 6 + STDIN_SAMPLE_LEN + 1;
    unsigned char *want = malloc(want_len);
    assert_non_null(want);
    memcpy(want, "0\n5\nab", 6);
    memcpy(want + 6, stdin_sample, STDIN_SAMPLE_LEN);
    want[want_len - 1] = 'Z';
    /* The same frames behind a first frame of 1 MiB (a bulk pipe): the copier of
     * remote/copier.sh takes them all (perl; a dd that fails shows that it is not used), or the
     * dd loop it falls back to when perl cannot run it (a perl that fails stands in for none). */
    rx_buf fb;
    rx_buf_init(&fb, 4 << 20);
    size_t big = 1 << 20;
    unsigned char *wantb = malloc(big + want_len);
    assert_non_null(wantb);
    for (size_t i = 0; i < big; i++)
        wantb[i] = (unsigned char)(i * 7 + (i >> 9));
    memcpy(wantb + big, want, want_len);
    assert_int_equal(rx_buf_addf(&fb, "%zu\n", big), 0);
    assert_int_equal(rx_buf_add(&fb, wantb, big), 0);
    assert_int_equal(rx_buf_add(&fb, f.data, f.len), 0);
    char *nodd = failing_tool("framed-nodd", "dd", "dd: not here");
    char *noperl = failing_tool("framed-noperl", "perl", "no perl here");
    for (int i = 0; i < 4; i++) {
        int piped = i & 1;
        const char *prefix = i < 2 ? nodd : noperl;
        bash_run r;
        rx_render_in k = render_in("");
        k.stdin_len = 0;
        k.stdin_framed = 1;
        k.stdin_piped = piped;
        framed_whole(&k, fb.data, fb.len, prefix, wantb, big + want_len);

        /* only the end frame: an empty stdin */
        wrap_run("wc -c", &k, "0\n", 2, FEED_KEEP_OPEN, prefix, &r);
        expect_end(&r, 1, "cmd", 0, 0);
        assert_int_equal(atoi((const char *)r.out), 0);
        bash_run_free(&r);

        /* EOF inside the first frame */
        framed_cut(&k, "1048576\nabc", 11, prefix);
    }
    /* Small frames (a small pipe): the dd loop, and perl never starts (it would cost the call
     * ~10 ms); byte for byte, and EOF inside the second frame is a cancel as above. */
    char *perlran = strdup(path_in("framed-perlran"));
    assert_non_null(perlran);
    mkdir(perlran, 0700);
    char file[600], text[700];
    snprintf(file, sizeof(file), "%s/perl", perlran);
    snprintf(text, sizeof(text), "#!/bin/sh\n: >'%s/ran'\nexit 1\n", perlran);
    write_file(file, text, strlen(text));
    snprintf(file, sizeof(file), "%s/ran", perlran);
    for (int piped = 0; piped <= 1; piped++) {
        rx_render_in k = render_in("");
        k.stdin_len = 0;
        k.stdin_framed = 1;
        k.stdin_piped = piped;
        framed_whole(&k, f.data, f.len, perlran, want, want_len);
        framed_cut(&k, "3\nabc10\n0123", 12, perlran);
        if (access(file, F_OK) == 0)
            fail_msg("perl was started for a small pipe (piped %d)", piped);
    }
    free(perlran);
    free(wantb);
    rx_buf_free(&fb);
    free(want);
    free(nodd), free(noperl);
    rx_buf_free(&f);
    expect_no_stdin_file();
}

/* remote/copier.sh goes along only with a stdin that pays for its bytes: framed, or at least
 * RX_RENDER_COPIER_MIN bytes; never with a small or no stdin (every call would read it). */
static void test_copier_sent_for_bulk_only(void **state)
{
    (void)state;
    struct {
        long long len;
        int framed, want;
    } cases[] = {{-1, 0, 0},
                 {0, 0, 0},
                 {1000, 0, 0},
                 {RX_RENDER_COPIER_MIN - 1, 0, 0},
                 {RX_RENDER_COPIER_MIN, 0, 1},
                 {0, 1, 1}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rx_render_in in = render_in("cat");
        in.stdin_len = cases[i].len;
        in.stdin_framed = cases[i].framed;
        rx_buf b = render_ok(&in);
        assert_int_equal(rx_buf_addc(&b, 0), 0);
        if ((strstr((char *)b.data, "__rx_plcopy=") != NULL) != cases[i].want)
            fail_msg("stdin_len %lld framed %d: copier %s", cases[i].len, cases[i].framed,
                     cases[i].want ? "missing" : "sent");
        rx_buf_free(&b);
    }
}

/* EOF on the channel means cancel: while the command runs it is stopped; before it starts (or
 * while its stdin is still arriving: dd stops short) it must never start. */
static void test_wrapper_cancel(void **state)
{
    (void)state;
    make_tmpdir();
    for (int cap = RX_CONT_PROCESS_GROUP; cap <= RX_CONT_PID_NAMESPACE; cap += 2) {
        bash_run r;
        rx_render_in k = render_in("");
        k.max_containment = (rx_containment)cap;
        wrap_run("echo started; sleep 30", &k, NULL, 0, FEED_CLOSE_START, NULL, &r);
        if (!r.started || !r.ended)
            fail_msg("cancel while running: started %d ended %d status %d; stderr: %.*s",
                     r.started, r.ended, r.status, (int)r.err_len, r.err ? (char *)r.err : "");
        assert_int_equal(r.cancelled, 1);
        assert_int_equal(r.timed_out, 0);
        assert_int_equal(r.rc, 143);
        assert_true(r.seconds < 10);
        bash_run_free(&r);

        unlink(path_in("ran.cancel"));
        wrap_run("touch ran.cancel", &k, NULL, 0, FEED_CLOSE_NOW, NULL, &r);
        assert_int_equal(r.started, 0);
        assert_true(r.ended);
        assert_int_equal(r.cancelled, 1);
        assert_string_equal(r.phase, "cancel");
        assert_int_equal(access(path_in("ran.cancel"), F_OK), -1);
        bash_run_free(&r);

        k.stdin_len = 1000; /* only 10 bytes arrive before EOF */
        wrap_run("touch ran.cancel", &k, "0123456789", 10, FEED_CLOSE_NOW, NULL, &r);
        assert_int_equal(r.started, 0);
        assert_true(r.ended);
        assert_int_equal(r.cancelled, 1);
        assert_int_equal(access(path_in("ran.cancel"), F_OK), -1);
        bash_run_free(&r);
    }
}

/* ---- the other end: status -> exit code, timed_out, signal, error ----------------------------- */

static void outcome(rexec_call *c, const char *phase, int started, int rc, int timed_out,
                    int cancelled)
{
    static rx_host host;
    static rx_action act;
    host.name = "lab1";
    act.name = "t.act";
    act.cwd = "/srv/missing";
    act.containment = RX_CONT_PID_NAMESPACE;
    memset(c, 0, sizeof(*c));
    c->host = &host;
    c->action = &act;
    snprintf(c->x.phase, sizeof(c->x.phase), "%s", phase);
    snprintf(c->x.containment, sizeof(c->x.containment), "process-group");
    c->x.sent = 1;
    c->x.ended = 1;
    c->x.started = started;
    c->x.rc = rc;
    c->x.timed_out = timed_out;
    c->x.cancelled = cancelled;
    rx_call_outcome(c);
}

static void test_outcome_mapping(void **state)
{
    (void)state;
    static const struct {
        int rc, timed_out, exit_code;
        const char *signal;
    } rows[] = {
        {0, 0, 0, NULL},     {1, 0, 1, NULL},        {44, 0, 44, NULL},
        {255, 0, 254, NULL}, /* a remote 255 is not "host unavailable" */
        {124, 0, 124, NULL}, /* exiting 124 is not a timeout */
        {124, 1, 124, NULL}, {137, 1, 124, NULL},    /* a timeout, even after --kill-after */
        {137, 0, 137, "KILL"}, {143, 0, 143, "TERM"}, {130, 0, 130, "INT"},
        {141, 0, 141, "PIPE"}, {128, 0, 128, NULL},  {200, 0, 200, NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
        rexec_call c;
        outcome(&c, "cmd", 1, rows[i].rc, rows[i].timed_out, 0);
        assert_int_equal(c.err.code, 0);
        assert_int_equal(c.ran, 1);
        assert_int_equal(c.exit_code, rows[i].exit_code);
        assert_int_equal(c.timed_out, rows[i].timed_out);
        if (rows[i].signal)
            assert_string_equal(c.signal, rows[i].signal);
        else
            assert_string_equal(c.signal, "");
        assert_string_equal(c.containment, "process-group");
    }
    rexec_call c;
    /* cd failed: an error, exit 255, never exit code 1 */
    outcome(&c, "cd", 0, 1, 0, 0);
    assert_int_equal(c.ran, 0);
    assert_int_equal(c.exit_code, -1);
    assert_int_equal(c.err.code, REXEC_EHOST);
    assert_int_equal(rexec_err_exit_code(c.err.code), 255);
    assert_non_null(strstr(c.err.msg, "/srv/missing"));
    /* the containment the action needs is not offered: denied, never pretended */
    outcome(&c, "contain", 0, 1, 0, 0);
    assert_int_equal(c.ran, 0);
    assert_int_equal(c.err.code, REXEC_EDENIED);
    assert_int_equal(rexec_err_exit_code(c.err.code), 77);
    assert_string_equal(c.dec.reason, "DENY_CONTAINMENT");
    assert_non_null(strstr(c.err.msg, "pid-namespace"));
    /* containment set-up failed (no start line), whatever the status */
    outcome(&c, "cmd", 0, 1, 0, 0);
    assert_int_equal(c.ran, 0);
    assert_int_equal(c.err.code, REXEC_EHOST);
    assert_non_null(strstr(c.err.msg, "did not run"));
    /* stdin staging failed */
    outcome(&c, "stdin", 0, 1, 0, 0);
    assert_int_equal(c.ran, 0);
    assert_int_equal(c.err.code, REXEC_EHOST);
    /* cancelled before the command started */
    outcome(&c, "cancel", 0, 1, 0, 1);
    assert_int_equal(c.ran, 0);
    assert_int_equal(c.err.code, REXEC_ECANCELLED);
    assert_non_null(strstr(c.err.msg, "did not run"));
    /* no end line: the connection's error, and a protocol signal if there was one */
    memset(&c, 0, sizeof(c));
    rx_host h = {.name = "lab1"};
    rx_action a = {.name = "t"};
    c.host = &h, c.action = &a;
    c.x.err = REXEC_ECONNLOST;
    snprintf(c.x.errmsg, sizeof(c.x.errmsg), "lab1: connection lost while reading");
    rx_call_outcome(&c);
    assert_int_equal(c.err.code, REXEC_ECONNLOST);
    assert_int_equal(c.ran, 0);
    assert_int_equal(c.exit_code, -1);
}

static int teardown_all(void **state)
{
    (void)state;
    if (tmpdir[0])
        rm_tree(tmpdir);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quote_exact),
        cmocka_unit_test(test_template_expansion),
        cmocka_unit_test(test_template_too_long),
        cmocka_unit_test(test_template_undeclared),
        cmocka_unit_test(test_secret_names),
        cmocka_unit_test(test_render_refuses_secret),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_script_shape),
        cmocka_unit_test(test_copier_sent_for_bulk_only),
        cmocka_unit_test(test_bash_n),
        cmocka_unit_test(test_property_roundtrip),
        cmocka_unit_test(test_wrapper_exit_and_timeout),
        cmocka_unit_test(test_wrapper_signal),
        cmocka_unit_test(test_wrapper_setup_failures),
        cmocka_unit_test(test_wrapper_stdin),
        cmocka_unit_test(test_wrapper_piped_stdin),
        cmocka_unit_test(test_wrapper_framed_stdin),
        cmocka_unit_test(test_wrapper_cancel),
        cmocka_unit_test(test_outcome_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, teardown_all);
}
