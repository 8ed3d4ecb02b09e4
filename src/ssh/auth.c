/* Public-key authentication from a key file or from an ssh-agent (see auth.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "auth.h"
#include "buf.h"
#include "err.h"
#include "fsutil.h"

#define KEY_FILE_MAX (64 * 1024)

struct rx_auth {
    int started;
    int key_via_agent; /* a passphrase key without key_passphrase, tried through the agent */
    /* key file */
    rx_buf pass;
    int have_pass;
    /* agent */
    LIBSSH2_AGENT *agent;
    struct libssh2_agent_publickey *id; /* the identity being tried */
    unsigned char *filter;              /* blob of the public key to use, or NULL */
    size_t filter_len;
    int tried, listed;
    double deadline; /* monotonic seconds: the end of the current agent step */
    int timed_out;
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

rx_auth *rx_auth_new(void)
{
    rx_auth *a = calloc(1, sizeof(*a));
    if (a)
        rx_buf_init(&a->pass, KEY_FILE_MAX);
    return a;
}

void rx_auth_free(rx_auth *a)
{
    if (a == NULL)
        return;
    rx_buf_free(&a->pass);
    if (a->agent) {
        libssh2_agent_disconnect(a->agent);
        libssh2_agent_free(a->agent);
    }
    free(a->filter);
    free(a);
}

ssize_t rx_auth_agent_io(rx_auth *a, int sending, int fd, void *buf, size_t len, int flags)
{
    for (;;) {
        ssize_t n = sending ? send(fd, buf, len, flags | MSG_DONTWAIT | MSG_NOSIGNAL)
                            : recv(fd, buf, len, flags | MSG_DONTWAIT);
        /* The agent closed the socket: an error, not 0 (libssh2 1.10 reads again for ever). */
        if (n == 0 && !sending && len > 0)
            return -ECONNRESET;
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        double left = a ? a->deadline - mono_now() : 0;
        struct pollfd p = {.fd = fd, .events = sending ? POLLOUT : POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) == 0) {
            if (a)
                a->timed_out = 1;
            return -ETIMEDOUT;
        }
    }
}

/* ---- key file ------------------------------------------------------------------------------- */

/* 1 when the private key in path is encrypted (PEM "ENCRYPTED", or an OpenSSH-format key whose
 * cipher is not "none"), 0 when not or unknown. Only for the message of a failure. */
static int key_encrypted(const char *path)
{
    static const char begin[] = "-----BEGIN OPENSSH PRIVATE KEY-----";
    char *text = NULL, b64[256];
    size_t len = 0, n = 0;
    unsigned char raw[200];
    rexec_error e;
    int enc = 0;
    if (rx_fs_read_file(path, KEY_FILE_MAX, &text, &len, REXEC_EAUTH, &e) != 0)
        return 0;
    const char *body = strstr(text, begin);
    if (strstr(text, "ENCRYPTED") != NULL)
        enc = 1;
    else if (body) {
        for (const char *c = body + sizeof(begin) - 1; *c && *c != '-' && n < sizeof(b64) - 4; c++)
            if (*c != '\n' && *c != '\r')
                b64[n++] = *c;
        n -= n % 4;
        int rl = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)n);
        /* "openssh-key-v1\0", then the cipher name as a length-prefixed string */
        if (rl > 19 && memcmp(raw, "openssh-key-v1", 15) == 0) {
            unsigned cl = (unsigned)raw[15] << 24 | raw[16] << 16 | raw[17] << 8 | raw[18];
            enc = !(cl == 4 && rl >= 23 && memcmp(raw + 19, "none", 4) == 0);
        }
    }
    OPENSSL_cleanse(text, len);
    free(text);
    return enc;
}

/* The message of a passphrase key that nothing can unlock: both ways out, as ssh has them. */
static int needs_passphrase(const rx_host *h, rexec_error *err)
{
    return rx_fail(err, REXEC_EAUTH,
                   "the key %s is protected by a passphrase: set \"key_passphrase\" to the name "
                   "of a secret holding it, or load the key into an ssh-agent (ssh-add %s) and run "
                   "rexec with SSH_AUTH_SOCK set",
                   h->key, h->key);
}

/* OpenSSH's rule (sshkey_perm_ok): a private key of our own uid that its group or others may
 * read or write is refused, in ssh's words, unless the host says "key_permissions": "ignore". */
static int key_permissions_ok(const rx_host *h, rexec_error *err)
{
    struct stat st;
    if (h->key_perms_ignore || stat(h->key, &st) != 0)
        return 0; /* a missing file is reported by libssh2's attempt, with its errno */
    if (st.st_uid != getuid() || (st.st_mode & 077) == 0)
        return 0;
    return rx_fail(err, REXEC_EAUTH,
                   "Permissions 0%3.3o for '%s' are too open. It is required that your private "
                   "key files are NOT accessible by others. This private key will be ignored. "
                   "(chmod 600 it, or set \"key_permissions\": \"ignore\" on the host)",
                   (unsigned)(st.st_mode & 0777), h->key);
}

static int key_failed(rx_auth *a, LIBSSH2_SESSION *ssh, const rx_host *h, int rc, rexec_error *err)
{
    char *m = NULL;
    struct stat st;
    libssh2_session_last_error(ssh, &m, NULL, 0);
    if (rc == LIBSSH2_ERROR_FILE && stat(h->key, &st) != 0)
        return rx_fail(err, REXEC_EAUTH, "cannot read the key %s: %s", h->key, strerror(errno));
    if (rc == LIBSSH2_ERROR_FILE && key_encrypted(h->key)) {
        if (!a->have_pass)
            return needs_passphrase(h, err);
        return rx_fail(err, REXEC_EAUTH,
                       "cannot unlock the key %s with the passphrase from secret %s (wrong "
                       "passphrase, or a key format libssh2 cannot read)",
                       h->key, h->key_passphrase);
    }
    return rx_fail(err, REXEC_EAUTH, "public key authentication as %s with %s failed: %s",
                   h->user, h->key, m && *m ? m : "unknown libssh2 error");
}

static int auth_key(rx_auth *a, LIBSSH2_SESSION *ssh, const rx_host *h, rexec_error *err)
{
    if (!a->started) {
        a->started = 1;
        /* Read once per connection, wiped when the connection is authenticated or fails. */
        if (h->key_passphrase) {
            int r = rx_ws_secret_value(h->ws, h->key_passphrase, &a->pass, err);
            if (r != 0)
                return rx_fail_prefix(err, "key_passphrase: "), RX_AUTH_FAILED;
            a->have_pass = 1;
        }
    }
    int rc = libssh2_userauth_publickey_fromfile_ex(
        ssh, h->user, (unsigned)strlen(h->user), NULL, h->key,
        a->have_pass ? (const char *)a->pass.data : NULL);
    if (rc == LIBSSH2_ERROR_EAGAIN)
        return RX_AUTH_AGAIN;
    rx_buf_free(&a->pass);
    if (rc != 0)
        return key_failed(a, ssh, h, rc, err), RX_AUTH_FAILED;
    return RX_AUTH_DONE;
}

/* ---- agent ---------------------------------------------------------------------------------- */

/* The blob of the public key in path ("TYPE BASE64 [comment]", as ssh-keygen writes *.pub);
 * a private key's path is taken to mean its ".pub" next to it. */
static int read_filter(rx_auth *a, const char *path, rexec_error *err)
{
    char *text = NULL, alt[4096];
    size_t len = 0;
    int r = rx_fs_read_file(path, KEY_FILE_MAX, &text, &len, REXEC_EAUTH, err);
    if (r == 0 && strstr(text, "PRIVATE KEY") != NULL) {
        OPENSSL_cleanse(text, len);
        free(text);
        snprintf(alt, sizeof(alt), "%s.pub", path);
        path = alt;
        r = rx_fs_read_file(path, KEY_FILE_MAX, &text, &len, REXEC_EAUTH, err);
    }
    if (r != 0)
        return rx_fail_prefix(err, "key (the agent identity to use): ");
    const char *b = strchr(text, ' ');
    size_t n = b ? strcspn(b + 1, " \t\r\n") : 0;
    a->filter = n ? malloc(n) : NULL;
    int bl = a->filter && n % 4 == 0 ? EVP_DecodeBlock(a->filter, (const unsigned char *)b + 1, (int)n) : -1;
    for (size_t i = n; bl > 0 && i > 0 && b[i] == '='; i--)
        bl--;
    free(text);
    if (bl <= 0)
        return rx_fail(err, REXEC_EAUTH, "key %s: not an OpenSSH public key (TYPE BASE64 [comment])",
                       path);
    a->filter_len = (size_t)bl;
    return 0;
}

static int id_wanted(const rx_auth *a, const struct libssh2_agent_publickey *id)
{
    return a->filter == NULL ||
           (id->blob_len == a->filter_len && memcmp(id->blob, a->filter, a->filter_len) == 0);
}

/* The next identity after a->id that the filter lets through; 0, or 1 when there is none. */
static int next_identity(rx_auth *a)
{
    struct libssh2_agent_publickey *id = a->id;
    while (libssh2_agent_get_identity(a->agent, &id, id) == 0) {
        a->listed++;
        if (id_wanted(a, id)) {
            a->id = id;
            return 0;
        }
    }
    return 1;
}

static int agent_io_failed(rx_auth *a, const char *sock, const char *what, double timeout,
                           rexec_error *err)
{
    if (a->timed_out)
        return rx_fail(err, REXEC_EAUTH, "the ssh-agent at %s did not answer within %.1f s (%s)",
                       sock, timeout, what);
    return rx_fail(err, REXEC_EAUTH, "the ssh-agent at %s failed (%s)", sock, what);
}

static int agent_start(rx_auth *a, LIBSSH2_SESSION *ssh, const rx_host *h, const char *sock,
                       double timeout, rexec_error *err)
{
    if (sock == NULL || *sock == '\0')
        return rx_fail(err, REXEC_EAUTH,
                       "auth is \"agent\" but SSH_AUTH_SOCK is not set (start ssh-agent and "
                       "ssh-add the key, then run rexec from that environment)");
    if (h->key && read_filter(a, h->key, err) != 0)
        return err->code;
    if ((a->agent = libssh2_agent_init(ssh)) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (libssh2_agent_connect(a->agent) != 0)
        return rx_fail(err, REXEC_EAUTH, "cannot connect to the ssh-agent at %s (SSH_AUTH_SOCK): %s",
                       sock, strerror(errno));
    if (libssh2_agent_list_identities(a->agent) != 0)
        return agent_io_failed(a, sock, "listing its keys", timeout, err);
    if (next_identity(a) != 0) {
        if (a->key_via_agent)
            return rx_fail(err, REXEC_EAUTH,
                           "the key %s is protected by a passphrase and the ssh-agent at %s "
                           "does not hold it: ssh-add %s, or set \"key_passphrase\" to the name "
                           "of a secret holding the passphrase",
                           h->key, sock, h->key);
        if (h->key)
            return rx_fail(err, REXEC_EAUTH,
                           "the ssh-agent at %s does not hold the key %s (it holds %d key%s; "
                           "ssh-add it)",
                           sock, h->key, a->listed, a->listed == 1 ? "" : "s");
        return rx_fail(err, REXEC_EAUTH, "the ssh-agent at %s holds no keys (ssh-add one)", sock);
    }
    return 0;
}

static int auth_agent(rx_auth *a, LIBSSH2_SESSION *ssh, const rx_host *h, double timeout_s,
                      rexec_error *err)
{
    const char *sock = getenv("SSH_AUTH_SOCK");
    double timeout = timeout_s > 0 && timeout_s < RX_AGENT_TIMEOUT_S ? timeout_s : RX_AGENT_TIMEOUT_S;
    a->deadline = mono_now() + timeout; /* for whatever this step asks of the agent */
    if (!a->started) {
        a->started = 1;
        if (agent_start(a, ssh, h, sock, timeout, err) != 0)
            return RX_AUTH_FAILED;
    }
    for (;;) {
        int rc = libssh2_agent_userauth(a->agent, h->user, a->id);
        if (rc == LIBSSH2_ERROR_EAGAIN)
            return RX_AUTH_AGAIN;
        if (rc == 0)
            return RX_AUTH_DONE;
        a->tried++;
        if (a->timed_out || rc == LIBSSH2_ERROR_AGENT_PROTOCOL)
            return agent_io_failed(a, sock, "signing", timeout, err), RX_AUTH_FAILED;
        /* Only a refusal of this key moves on to the next; anything else ends the session. */
        if ((rc != LIBSSH2_ERROR_AUTHENTICATION_FAILED && rc != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED) ||
            next_identity(a) != 0)
            break;
    }
    char *m = NULL;
    libssh2_session_last_error(ssh, &m, NULL, 0);
    rx_fail(err, REXEC_EAUTH, "the server refused %s for user %s (%d key%s tried from the "
            "ssh-agent at %s): %s",
            h->key ? "the agent's key" : "every key of the agent", h->user, a->tried,
            a->tried == 1 ? "" : "s", sock, m && *m ? m : "unknown libssh2 error");
    return RX_AUTH_FAILED;
}

/* As ssh does: a key that needs a passphrase nobody configured is looked for in the agent
 * when there is one (SSH_AUTH_SOCK), by its public half (KEY.pub, as for "auth": "agent"). */
static int key_wants_agent(const rx_host *h)
{
    const char *sock = getenv("SSH_AUTH_SOCK");
    char pub[4096];
    struct stat st;
    if (h->key_passphrase || sock == NULL || *sock == '\0' || !key_encrypted(h->key))
        return 0;
    snprintf(pub, sizeof(pub), "%s.pub", h->key);
    return stat(pub, &st) == 0;
}

int rx_auth_step(rx_auth *a, LIBSSH2_SESSION *ssh, const rx_host *h, double timeout_s,
                 rexec_error *err)
{
    if (h->auth == RX_AUTH_KEY && !a->started && !a->key_via_agent) {
        if (key_permissions_ok(h, err) != 0)
            return RX_AUTH_FAILED;
        a->key_via_agent = key_wants_agent(h);
    }
    return h->auth == RX_AUTH_AGENT || a->key_via_agent ? auth_agent(a, ssh, h, timeout_s, err)
                                                        : auth_key(a, ssh, h, err);
}
