/* The libssh2 ceiling (not a test): the least a libssh2 client can do to pull a command's stdout
 * or push a file into its stdin, in blocking mode, with one buffer and nothing else. rexec's bulk
 * path is measured against it (scripts/bench --bulk, docs/PERFORMANCE.md).
 *
 *   ssh_ceiling HOST PORT USER KEY COMMAND [--crypt LIST] [--mac LIST] [--window BYTES]
 *               [--chunk BYTES] [--stdin FILE] [--out FILE]
 *
 * Prints one line: bytes read (or written), seconds, MB/s, this process's CPU time and MB per CPU
 * second (steadier than wall time on a loaded machine), and the cipher and MAC negotiated.
 * Host key checking is off: this only ever talks to the benchmark's own lab on 127.0.0.1. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libssh2.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

static int die(const char *what, LIBSSH2_SESSION *s)
{
    char *m = NULL;
    if (s)
        libssh2_session_last_error(s, &m, NULL, 0);
    fprintf(stderr, "ssh_ceiling: %s%s%s\n", what, m ? ": " : "", m ? m : "");
    return 1;
}

static int tcp_connect(const char *host, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static long long push_file(LIBSSH2_CHANNEL *ch, const char *path, char *buf, size_t chunk)
{
    long long total = 0;
    int fd = open(path, O_RDONLY);
    ssize_t n;
    if (fd < 0)
        return -1;
    while ((n = read(fd, buf, chunk)) > 0)
        for (ssize_t off = 0; off < n;) {
            ssize_t w = libssh2_channel_write(ch, buf + off, (size_t)(n - off));
            if (w < 0)
                return close(fd), -1;
            off += w;
            total += w;
        }
    close(fd);
    libssh2_channel_send_eof(ch);
    return total;
}

static int out_fd = -1; /* --out FILE: what is read is written there (a download), else dropped */

static long long pull_stdout(LIBSSH2_CHANNEL *ch, char *buf, size_t chunk)
{
    long long total = 0;
    ssize_t n;
    while ((n = libssh2_channel_read(ch, buf, chunk)) > 0) {
        if (out_fd >= 0 && write(out_fd, buf, (size_t)n) != n)
            return -1;
        total += n;
    }
    return n < 0 ? -1 : total;
}

int main(int argc, char **argv)
{
    const char *crypt = NULL, *mac = NULL, *in = NULL;
    unsigned window = LIBSSH2_CHANNEL_WINDOW_DEFAULT;
    size_t chunk = 256 * 1024;
    if (argc < 6) {
        fprintf(stderr, "usage: ssh_ceiling HOST PORT USER KEY COMMAND [--crypt L] [--mac L] "
                        "[--window B] [--chunk B] [--stdin FILE] [--out FILE]\n");
        return 2;
    }
    for (int i = 6; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--crypt"))
            crypt = argv[i + 1];
        else if (!strcmp(argv[i], "--mac"))
            mac = argv[i + 1];
        else if (!strcmp(argv[i], "--window"))
            window = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--chunk"))
            chunk = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--stdin"))
            in = argv[i + 1];
        else if (!strcmp(argv[i], "--out") &&
                 (out_fd = open(argv[i + 1], O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
            return die("--out", NULL);
    }
    char *buf = malloc(chunk);
    int fd = tcp_connect(argv[1], atoi(argv[2]));
    if (buf == NULL || fd < 0 || libssh2_init(0) != 0)
        return die("cannot connect", NULL);
    LIBSSH2_SESSION *s = libssh2_session_init();
    if (crypt && (libssh2_session_method_pref(s, LIBSSH2_METHOD_CRYPT_CS, crypt) != 0 ||
                  libssh2_session_method_pref(s, LIBSSH2_METHOD_CRYPT_SC, crypt) != 0))
        return die("--crypt", s);
    if (mac && (libssh2_session_method_pref(s, LIBSSH2_METHOD_MAC_CS, mac) != 0 ||
                libssh2_session_method_pref(s, LIBSSH2_METHOD_MAC_SC, mac) != 0))
        return die("--mac", s);
    if (libssh2_session_handshake(s, fd) != 0)
        return die("handshake", s);
    if (libssh2_userauth_publickey_fromfile(s, argv[3], NULL, argv[4], NULL) != 0)
        return die("authentication", s);
    LIBSSH2_CHANNEL *ch = libssh2_channel_open_ex(s, "session", 7, window,
                                                  LIBSSH2_CHANNEL_PACKET_DEFAULT, NULL, 0);
    if (ch == NULL || libssh2_channel_exec(ch, argv[5]) != 0)
        return die("exec", s);
    double t0 = now_s(), c0 = cpu_s();
    long long total = in ? push_file(ch, in, buf, chunk) : pull_stdout(ch, buf, chunk);
    if (in) /* the remote has everything once its stdout closes */
        pull_stdout(ch, buf, chunk);
    double dt = now_s() - t0, dc = cpu_s() - c0;
    if (total < 0)
        return die("transfer", s);
    const char *c = libssh2_session_methods(s, LIBSSH2_METHOD_CRYPT_SC);
    const char *m = libssh2_session_methods(s, LIBSSH2_METHOD_MAC_SC);
    printf("%lld bytes %.3f s %.1f MB/s cpu %.3f s %.1f MB/cpu-s crypt=%s mac=%s\n", total, dt,
           (double)total / dt / 1e6, dc, (double)total / dc / 1e6, c ? c : "?", m ? m : "?");
    libssh2_channel_close(ch);
    libssh2_channel_free(ch);
    libssh2_session_disconnect(s, "done");
    libssh2_session_free(s);
    close(fd);
    free(buf);
    return 0;
}
