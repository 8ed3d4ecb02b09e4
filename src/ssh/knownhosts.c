/* known_hosts with OpenSSH's markers (see knownhosts.h): libssh2 parses the plain lines, this
 * file reads the marker lines itself (marker, host patterns and the key blob only). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "err.h"
#include "fsutil.h"
#include "knownhosts.h"

#define KH_MAX_BYTES (16u << 20)

/* OpenSSH's glob: '*' and '?' only ("[addr]:port" patterns hold literal brackets), no case. */
static int glob_match(const char *p, const char *s)
{
    for (; *p; p++, s++) {
        if (*p == '*') {
            for (p++; *s; s++)
                if (glob_match(p, s))
                    return 1;
            return *p == '\0';
        }
        if (*s == '\0' || (*p != '?' && tolower((unsigned char)*p) != tolower((unsigned char)*s)))
            return 0;
    }
    return *s == '\0';
}

/* base64 text (with or without padding) into out; returns the decoded length or -1. */
static int b64_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
    if (n == 0 || n % 4 != 0 || n / 4 * 3 > cap)
        return -1;
    int len = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
    if (len < 0)
        return -1;
    for (size_t i = n; i > 0 && in[i - 1] == '='; i--)
        len--;
    return len;
}

/* "|1|<salt>|<hash>": HMAC-SHA1 of the name keyed with the salt (ssh-keygen -H). */
static int hashed_match(const char *pat, size_t n, const char *name)
{
    const char *bar = memchr(pat + 3, '|', n - 3);
    unsigned char salt[64], want[64], got[EVP_MAX_MD_SIZE];
    unsigned int glen = 0;
    if (bar == NULL)
        return 0;
    int sl = b64_decode(pat + 3, (size_t)(bar - pat - 3), salt, sizeof(salt));
    int wl = b64_decode(bar + 1, (size_t)(pat + n - bar - 1), want, sizeof(want));
    if (sl <= 0 || wl != 20 ||
        HMAC(EVP_sha1(), salt, sl, (const unsigned char *)name, strlen(name), got, &glen) == NULL)
        return 0;
    return glen == 20 && memcmp(got, want, 20) == 0;
}

/* The host field: comma-separated patterns; a matching "!pattern" excludes the line. */
static int hosts_match(const char *field, size_t n, const char *name)
{
    int hit = 0;
    char pat[512];
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && field[j] != ',')
            j++;
        size_t len = j - i;
        int neg = len > 0 && field[i] == '!';
        if (len - neg < sizeof(pat) && len > (size_t)neg) {
            memcpy(pat, field + i + neg, len - neg);
            pat[len - neg] = '\0';
            int m = strncmp(pat, "|1|", 3) == 0 ? hashed_match(pat, len - neg, name)
                                                : glob_match(pat, name);
            if (m && neg)
                return 0;
            hit |= m;
        }
        i = j + 1;
    }
    return hit;
}

/* Splits off the next blank-separated field of *p (up to end); returns its length. */
static size_t next_field(const char **p, const char *end, const char **field)
{
    const char *s = *p;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    *field = s;
    while (s < end && *s != ' ' && *s != '\t')
        s++;
    *p = s;
    return (size_t)(s - *field);
}

/* A marker line: "@revoked|@cert-authority HOSTS KEYTYPE BASE64 [comment]". */
static void marker_line(const char *line, const char *end, unsigned lineno, const char *name,
                        const unsigned char *key, size_t klen, rx_kh_marks *m)
{
    const char *p = line, *marker, *hosts, *type, *b64;
    size_t ml = next_field(&p, end, &marker), hl = next_field(&p, end, &hosts);
    size_t tl = next_field(&p, end, &type), bl = next_field(&p, end, &b64);
    unsigned char *blob;
    (void)tl;
    if (hl == 0 || bl == 0 || !hosts_match(hosts, hl, name))
        return;
    if (ml == 15 && strncmp(marker, "@cert-authority", 15) == 0) {
        if (m->ca_line == 0)
            m->ca_line = lineno, m->ca_path = m->path;
        return;
    }
    if (!(ml == 8 && strncmp(marker, "@revoked", 8) == 0) || (blob = malloc(bl)) == NULL)
        return; /* an unknown marker: OpenSSH ignores the line too */
    int len = b64_decode(b64, bl, blob, bl);
    if (len >= 0 && (size_t)len == klen && memcmp(blob, key, klen) == 0 && m->revoked_line == 0)
        m->revoked_line = lineno, m->revoked_path = m->path;
    free(blob);
}

int rx_knownhosts_load(LIBSSH2_KNOWNHOSTS *kh, const char *path, const char *name,
                       const unsigned char *key, size_t klen, rx_kh_marks *m, rexec_error *err)
{
    char *text = NULL;
    size_t len = 0;
    unsigned lineno = 0;
    int r = rx_fs_read_file(path, KH_MAX_BYTES, &text, &len, REXEC_EHOSTKEY, err);
    if (r != 0)
        return r;
    m->path = path;
    for (const char *line = text, *end; line < text + len; line = end + 1) {
        end = memchr(line, '\n', (size_t)(text + len - line));
        if (end == NULL)
            end = text + len;
        lineno++;
        const char *s = line;
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        if (s == end || *s == '#' || *s == '\r')
            continue;
        if (*s == '@') {
            marker_line(s, end, lineno, name, key, klen, m);
            continue;
        }
        /* A line libssh2 cannot parse (a key type it does not know, say) is skipped, as
         * OpenSSH skips it: it cannot match a key libssh2 negotiated anyway.
         * The length includes the newline: libssh2 1.10 looks one byte past the length for it
         * and drops the last byte of the key when it finds one there. */
        size_t n = (size_t)(end - s) + (end < text + len);
        if (libssh2_knownhost_readline(kh, s, n, LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0)
            m->skipped++;
    }
    free(text);
    return 0;
}
