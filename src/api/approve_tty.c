/* The operator's confirmation at a terminal (approve_tty.h): what `rexec approve ID` and
 * `rexec run --approve` show on /dev/tty, and the code read back from it. The challenge files and
 * their state changes are policy/approvals.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "approvals.h"
#include "approval_record.h"
#include "approve_tty.h"
#include "buf.h"
#include "err.h"
#include "fsutil.h"
#include "unicode_vis.h"
#include "utf8.h"

#define AP_ANSWER_MAX 64 /* a longer answer is wrong anyway */
#define AP_SHOW_MAX (64u << 20)

/* Appends s with every character a person cannot see shown as an escape (\n, \x1b, \u202e,
 * \U000e0041): controls, bidirectional and zero-width characters, tags, fillers, blanks other
 * than the space, unassigned code points (unicode_vis.h), and a combining mark with no base to
 * sit on. A value must not be able to make the command the operator reads differ from the one
 * that runs. */
int rx_approval_clean(rx_buf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    const unsigned char *end = p + strlen((const char *)p);
    int r = 0, base = 0; /* base: the last thing shown is a visible character a mark can sit on */
    while (p < end && r == 0) {
        unsigned c = 0;
        size_t n = rx_utf8_decode(p, (size_t)(end - p), &c);
        int shown = 0;
        if (n == 0)
            r = rx_buf_addf(b, "\\x%02x", *p), n = 1;
        else if (c == '\n' || c == '\t' || c == '\r')
            r = rx_buf_addf(b, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
        else if (rx_uni_hidden(c) || (rx_uni_combining(c) && !base))
            r = rx_buf_addf(b, c < 0x80 ? "\\x%02x" : c <= 0xFFFF ? "\\u%04x" : "\\U%08x", c);
        else
            r = rx_buf_add(b, p, n), shown = c != ' ';
        base = shown;
        p += n;
    }
    return r;
}

static int put_line(rx_buf *b, const char *label, const char *value)
{
    int r = rx_buf_addf(b, "  %-10s ", label);
    if (r == 0)
        r = rx_approval_clean(b, value);
    return r ? r : rx_buf_adds(b, "\n");
}

static void ap_when(int64_t t, int64_t now, char *out, size_t cap)
{
    char ts[32];
    int64_t left = t - now;
    rx_approval_time_str(t, ts);
    int64_t a = left < 0 ? -left : left;
    snprintf(out, cap, "%s (%s%lldm %02llds%s)", ts, left > 0 ? "in " : "", (long long)(a / 60),
             (long long)(a % 60), left > 0 ? "" : " ago");
}

static int show_lists(rx_buf *b, const rx_challenge *c)
{
    char line[160];
    int r = 0;
    if (c->n_params == 0)
        r = put_line(b, "params:", "none");
    for (size_t i = 0; r == 0 && i < c->n_params; i++) {
        r = rx_buf_addf(b, "  %-10s ", i ? "" : "params:");
        if (r == 0 && (r = rx_approval_clean(b, c->param_names[i])) == 0 && (r = rx_buf_adds(b, "=")) == 0)
            r = rx_approval_clean(b, c->param_values[i]);
        r = r ? r : rx_buf_adds(b, "\n");
    }
    for (size_t i = 0; r == 0 && i < c->n_secrets; i++)
        r = put_line(b, i ? "" : "secrets:", c->secrets[i]);
    if (r == 0 && c->n_secrets > 0)
        r = rx_buf_adds(b, "             (handed over by name; values are never shown)\n");
    if (r == 0 && c->n_secrets == 0)
        r = put_line(b, "secrets:", "none");
    if (c->has_stdin)
        snprintf(line, sizeof(line), "%llu bytes, sha256 %s", (unsigned long long)c->stdin_len,
                 c->stdin_sha256);
    else
        snprintf(line, sizeof(line), "none (/dev/null)");
    return r ? r : put_line(b, "stdin:", line);
}

/* What will run, for the operator to read before typing the code. */
static int show_challenge(rx_buf *b, const rx_challenge *c)
{
    char risk[160], when[80];
    int r = rx_buf_adds(b, "\nrexec: approval requested\n");
    snprintf(risk, sizeof(risk), "%s (%s)", c->risk, c->risk_why ? c->risk_why : "declared");
    if (r == 0 && (r = put_line(b, "id:", c->id)) == 0 &&
        (r = put_line(b, "host:", c->host)) == 0 &&
        (r = put_line(b, "action:", c->action)) == 0 && (r = put_line(b, "risk:", risk)) == 0)
        r = put_line(b, "command:", c->rendered ? c->rendered : "(not recorded)");
    if (r == 0)
        r = show_lists(b, c);
    ap_when(c->created, rx_approvals_now(), when, sizeof(when));
    if (r == 0 && (r = put_line(b, "requested:", when)) == 0) {
        ap_when(c->expires, rx_approvals_now(), when, sizeof(when));
        r = put_line(b, "expires:", when);
    }
    return r;
}

static int tty_open(int *fd, rexec_error *err)
{
    int f = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (f < 0)
        return rx_fail(err, REXEC_EDENIED, "approval needs an operator at a terminal, and this "
                       "process has none (/dev/tty: %s): run `rexec approve ID` in a terminal",
                       strerror(errno));
    if (!isatty(f)) {
        close(f);
        return rx_fail(err, REXEC_EDENIED, "/dev/tty is not a terminal: not approved");
    }
    *fd = f;
    return 0;
}

static int tty_write(int fd, const void *p, size_t n, rexec_error *err)
{
    if (rx_fs_write_all(fd, p, n) != 0)
        return rx_fail(err, REXEC_EDENIED, "/dev/tty: %s: not approved", strerror(errno));
    return 0;
}

/* Reads one line from the terminal until the challenge's deadline. A line longer than cap is
 * kept cut (it cannot be the code anyway). A signal that has a handler (Ctrl-C under `run
 * --approve`, whose event loop catches SIGINT) ends the prompt: not approved. */
/* Waits with ppoll and the caller's signal mask (waitmask): the interrupting signals are blocked
 * everywhere else (see tty_confirm), so one that arrives between the prompt and the wait is
 * delivered in ppoll as EINTR instead of being handled early and then waited through. */
static int tty_read_line(int fd, int64_t deadline, const sigset_t *waitmask, char *ans,
                         size_t cap, rexec_error *err)
{
    size_t n = 0;
    for (;;) {
        int64_t left = deadline - rx_approvals_now();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        struct timespec ts = {left > 60 ? 60 : (time_t)left, 0};
        char ch;
        if (left <= 0)
            return rx_fail(err, REXEC_EDENIED, "no answer before the challenge expired");
        int k = ppoll(&p, 1, &ts, waitmask);
        if (k == 0)
            continue;
        ssize_t m = k < 0 ? -1 : read(fd, &ch, 1);
        if (m < 0 && errno == EINTR)
            return rx_fail(err, REXEC_EDENIED, "interrupted: not approved");
        if (m < 0 && errno == EAGAIN)
            continue;
        if (m <= 0)
            return rx_fail(err, REXEC_EDENIED, "no answer from the terminal: not approved");
        if (ch == '\n' || ch == '\r')
            break;
        if (n + 1 < cap)
            ans[n++] = ch;
    }
    ans[n] = 0;
    return 0;
}

/* Shows the challenge and asks for its code; 0 when the operator typed it back exactly. */
static int tty_confirm(int fd, const rx_challenge *c, rexec_error *err)
{
    sigset_t hold, waitmask;
    int held = 0;
    char ans[AP_ANSWER_MAX], prompt[160];
    rx_buf b;
    int r;

    rx_buf_init(&b, AP_SHOW_MAX);
    if ((r = show_challenge(&b, c)) != 0) {
        r = rx_fail(err, REXEC_ENOMEM, "approvals: cannot show challenge %s", c->id);
        goto out;
    }
    snprintf(prompt, sizeof(prompt), "\nTo approve, type the code %s and press Enter "
             "(anything else refuses): ", c->code);
    /* Type-ahead is dropped: only an answer typed after the prompt counts. */
    /* From before the prompt is shown until the answer is read, an interrupting signal must end
     * the wait (Ctrl-C at the prompt): hold them, and let ppoll take them atomically. */
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT), sigaddset(&hold, SIGTERM), sigaddset(&hold, SIGHUP);
    sigaddset(&hold, SIGQUIT), sigaddset(&hold, SIGUSR1), sigaddset(&hold, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &hold, &waitmask);
    held = 1;
    tcflush(fd, TCIFLUSH);
    if ((r = tty_write(fd, b.data, b.len, err)) != 0 ||
        (r = tty_write(fd, prompt, strlen(prompt), err)) != 0 ||
        (r = tty_read_line(fd, c->expires, &waitmask, ans, sizeof(ans), err)) != 0)
        goto out;
    size_t lead = strspn(ans, " \t"), n = strlen(ans);
    while (n > lead && (ans[n - 1] == ' ' || ans[n - 1] == '\t'))
        ans[--n] = 0;
    if (strcmp(ans + lead, c->code) != 0)
        r = rx_fail(err, REXEC_EDENIED, "wrong confirmation code: challenge %s not approved",
                    c->id);
out:
    if (held)
        pthread_sigmask(SIG_SETMASK, &waitmask, NULL);
    rx_buf_free(&b);
    return r;
}

static void ap_user(char *buf, size_t cap)
{
    struct passwd *pw = getpwuid(getuid());
    if (pw != NULL && pw->pw_name != NULL)
        snprintf(buf, cap, "%s", pw->pw_name);
    else
        snprintf(buf, cap, "uid %u", (unsigned)getuid());
}

/* The terminal's own name for the record ("/dev/pts/3"): ttyname of /dev/tty says only
 * "/dev/tty", so look for a standard descriptor on the same controlling terminal. */
static void ap_tty_name(char *buf, size_t cap)
{
    for (int fd = 0; fd < 3; fd++)
        if (isatty(fd) && tcgetsid(fd) == getsid(0) && ttyname_r(fd, buf, cap) == 0)
            return;
    snprintf(buf, cap, "/dev/tty");
}

/* The approval, then its audit record (who, uid, via tty, the terminal). The approval stands
 * when the record cannot be written: the challenge file holds it, and the message says so. */
static int approve_recorded(const rx_ws *ws, const rx_challenge *c, const char *user,
                            const char *tty, rexec_error *err)
{
    rx_approval_decision d = {.approve = 1, .user = user, .uid = (long)getuid(), .via = "tty",
                              .tty = tty, .expect_hash = c->request_hash};
    rx_challenge after;
    rexec_error e;
    int r = rx_approvals_decide(ws, c->id, &d, &after, err);
    if (r == 0 && rx_ws_audit_approval(ws, &after, &e) != 0)
        fprintf(stderr, "rexec: approved %s, but its audit record could not be written: %s\n",
                c->id, e.msg);
    if (r == 0 || r == 1)
        rx_challenge_free(&after);
    return r == 1 ? 0 : r;
}

int rx_approve_tty(const rx_ws *ws, const char *challenge_id, rexec_error *err)
{
    char user[128], tty[128], msg[256], t[32];
    rx_challenge c;
    int fd = -1, r;

    if ((r = rx_approvals_load(ws, challenge_id, &c, err)) != 0)
        return r;
    if ((r = rx_approvals_approvable(&c, NULL, err)) != 0)
        goto out; /* 1: already approved, nothing to ask */
    if ((r = tty_open(&fd, err)) != 0 || (r = tty_confirm(fd, &c, err)) != 0)
        goto out;
    ap_user(user, sizeof(user));
    ap_tty_name(tty, sizeof(tty));
    if ((r = approve_recorded(ws, &c, user, tty, err)) != 0)
        goto out;
    rx_approval_time_str(rx_approvals_now() + rx_approvals_ttl(ws), t);
    snprintf(msg, sizeof(msg), "approved %s: the caller may now run it once with --grant %s "
             "(until %s)\n", c.id, c.id, t);
    tty_write(fd, msg, strlen(msg), err);
out:
    if (fd >= 0 && r != 0 && r != 1) {
        snprintf(msg, sizeof(msg), "not approved: %.200s\n", err ? err->msg : "refused");
        rx_fs_write_all(fd, msg, strlen(msg));
    }
    if (fd >= 0)
        close(fd);
    rx_challenge_free(&c);
    return r == 1 ? 0 : r;
}
