/* Scope matching. Every target is parsed strictly into one canonical form (an IPv4 address, an
 * IPv6 address, or a lowercase LDH host name, plus a port) and only that form is matched, so an
 * ambiguity that a tool might resolve differently from us is refused, never guessed at.
 * docs/scope.md lists every rule. Names are never resolved: a domain entry trusts the name, a
 * CIDR entry matches address literals only. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "jsonx.h"
#include "scope.h"

#define WHY_MAX 200
#define SHOW_MAX 200     /* longest value quoted in a message */
#define CIDR_MAX_LEN 64  /* "ffff:...:255.255.255.255/128" fits */
#define ENTRY_MAX_LEN (RX_HOST_MAX_LEN + 16)

enum { F_BRACKETED = 1, F_WILDCARD_OK = 2, F_CONFIG = 4 };

typedef struct rx_net {
    int family;
    unsigned char addr[16];
    int prefix;
} rx_net;

/* A domain or IP-literal entry, optionally restricted to one port. */
typedef struct rx_name {
    char *name;   /* lowercase; ".suffix" when wildcard; NULL for an IP literal */
    int wildcard;
    int family;   /* IP literal: AF_INET or AF_INET6 */
    unsigned char addr[16];
    int port;     /* 0 = any port */
} rx_name;

struct rx_scope {
    rx_net *nets;
    size_t n_nets;
    rx_name *names;
    size_t n_names;
};

/* What a target resolved to, in canonical form. */
typedef struct target {
    int family; /* AF_INET, AF_INET6, or 0 for a host name */
    unsigned char addr[16];
    char name[RX_HOST_MAX_LEN + 1]; /* lowercase name, or the address as inet_ntop writes it */
    int port;   /* 0 = none named */
    int wildcard;
} target;

static const unsigned char mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static int why_set(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int why_set(char *why, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, WHY_MAX, fmt, ap);
    va_end(ap);
    return -1;
}

static int addr_len(int family)
{
    return family == AF_INET ? 4 : 16;
}

/* ---- Lexical rules shared by every form --------------------------------------------------- */

/* Refuses bytes no target needs and that parsers disagree on: controls, whitespace, non-ASCII
 * (a tool may IDNA-map it to some other name), and backslashes (WHATWG reads them as '/'). */
static int ascii_scan(const char *s, size_t len, char *why)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ')
            return why_set(why, "whitespace at byte %zu", i);
        if (c < 0x20 || c == 0x7f)
            return why_set(why, "control character at byte %zu", i);
        if (c >= 0x80)
            return why_set(why, "non-ASCII byte at offset %zu (write internationalized names "
                                "in punycode, xn--)", i);
        if (c == '\\')
            return why_set(why, "backslash is not allowed");
    }
    return 0;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Decimal 0..max, no sign, no leading zeros: "080" and "+1" are not numbers here. */
static int parse_dec(const char *s, size_t len, long max, long *out)
{
    long v = 0;
    if (len == 0 || len > 6 || (len > 1 && s[0] == '0'))
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_port(const char *s, size_t len, int *port, char *why)
{
    long v;
    if (len == 0)
        return why_set(why, "empty port");
    if (parse_dec(s, len, 65535, &v) != 0 || v == 0)
        return why_set(why, "port must be a decimal number from 1 to 65535 without leading zeros");
    *port = (int)v;
    return 0;
}

/* ---- Host names --------------------------------------------------------------------------- */

/* WHATWG URL parsers read a name whose last label is a number ("1.2.3.4.5", "a.0x10") as an
 * IPv4 address; no real TLD looks like that, so refuse rather than guess. */
static int numeric_label(const char *l, size_t n)
{
    size_t i = 0;
    if (n >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
        for (i = 2; i < n; i++)
            if (!is_digit(l[i]) && !strchr("abcdefABCDEF", l[i]))
                return 0;
        return 1;
    }
    for (i = 0; i < n; i++)
        if (!is_digit(l[i]))
            return 0;
    return 1;
}

static int check_label(const char *l, size_t n, char *why)
{
    if (n == 0)
        return why_set(why, "empty label in host name");
    if (n > 63)
        return why_set(why, "label longer than 63 bytes in host name");
    if (l[0] == '-' || l[n - 1] == '-')
        return why_set(why, "a label may not start or end with '-'");
    for (size_t i = 0; i < n; i++) {
        if (l[i] == '*')
            return why_set(why, "'*' is only allowed as a leading \"*.\" in a scope entry");
        if (!is_alnum(l[i]) && l[i] != '-')
            return why_set(why, "character '%c' is not allowed in a host name (letters, digits, "
                                "'-' and '.')", l[i]);
    }
    return 0;
}

/* An LDH name (RFC 1123), no trailing dot, lowercased into t->name. */
static int parse_name(const char *s, size_t len, int flags, target *t, char *why)
{
    if (s[len - 1] == '.')
        return why_set(why, "trailing dot is not allowed (write the name without it)");
    if ((flags & F_WILDCARD_OK) && len > 2 && s[0] == '*' && s[1] == '.') {
        t->wildcard = 1;
        s++;
        len--; /* keep the '.' so that matching stays on a label boundary */
    }
    const char *l = s + t->wildcard, *end = s + len;
    while (l <= end) {
        const char *dot = memchr(l, '.', (size_t)(end - l));
        size_t n = dot ? (size_t)(dot - l) : (size_t)(end - l);
        if (check_label(l, n, why) != 0)
            return -1;
        if (dot == NULL && numeric_label(l, n))
            return why_set(why, "the last label is numeric: neither a host name nor a canonical "
                                "IPv4 address");
        l += n + 1;
    }
    for (size_t i = 0; i < len; i++)
        t->name[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
    t->name[len] = 0;
    return 0;
}

/* ---- Address literals --------------------------------------------------------------------- */

/* IPv6 special forms: mapped ::ffff:a.b.c.d is the IPv4 address (the kernel connects to it over
 * IPv4), so a target becomes AF_INET; a scope entry must say the IPv4 form itself. */
static int ip6_special(target *t, int flags, char *why)
{
    static const unsigned char zero[16];
    if (memcmp(t->addr, mapped_prefix, 12) == 0) {
        if (flags & F_CONFIG)
            return why_set(why, "an IPv4-mapped address: write the IPv4 address instead");
        memmove(t->addr, t->addr + 12, 4);
        t->family = AF_INET;
        return 0;
    }
    if (memcmp(t->addr, zero, 16) == 0)
        return why_set(why, "the unspecified address :: is not a target");
    if (memcmp(t->addr, zero, 12) == 0 && !(memcmp(t->addr, zero, 15) == 0 && t->addr[15] == 1))
        return why_set(why, "a deprecated IPv4-compatible IPv6 address");
    return 0;
}

/* 1 when s is an address literal (parsed into t), 0 when it is not one, -1 when refused. */
static int parse_ip(const char *s, int flags, target *t, char *why)
{
    const char *colon = strchr(s, ':');
    if (colon != NULL) {
        if (strchr(colon + 1, ':') == NULL)
            return why_set(why, "':' is not allowed in a host name (a port is given apart)");
        if (strchr(s, '%') != NULL)
            return why_set(why, "IPv6 zone ids are not allowed");
        if (inet_pton(AF_INET6, s, t->addr) != 1)
            return why_set(why, "invalid IPv6 address");
        t->family = AF_INET6;
        if (ip6_special(t, flags, why) != 0)
            return -1;
    } else if (inet_pton(AF_INET, s, t->addr) == 1) {
        t->family = AF_INET;
        if (memcmp(t->addr, "\0\0\0\0", 4) == 0)
            return why_set(why, "the unspecified address 0.0.0.0 is not a target");
    } else {
        struct in_addr ia;
        /* inet_aton takes what the resolver takes: 127.1, 0x7f.1, 0177.0.0.1, 2130706433 */
        if (inet_aton(s, &ia) != 0)
            return why_set(why, "non-canonical IPv4 address (write a dotted quad such as "
                                "127.0.0.1)");
        return 0;
    }
    inet_ntop(t->family, t->addr, t->name, sizeof(t->name));
    return 1;
}

/* A host: an address literal or a name. s[0..len) need not be NUL-terminated. */
static int parse_host_text(const char *s, size_t len, int flags, target *t, char *why)
{
    char buf[RX_HOST_MAX_LEN + 1];
    if (len == 0)
        return why_set(why, "empty host");
    if (len > RX_HOST_MAX_LEN)
        return why_set(why, "host longer than %d bytes", RX_HOST_MAX_LEN);
    memcpy(buf, s, len);
    buf[len] = 0;
    if ((flags & F_BRACKETED) && strchr(buf, ':') == NULL)
        return why_set(why, "only an IPv6 address may be written in brackets");
    if (strchr(buf, '%') != NULL && strchr(buf, ':') == NULL)
        return why_set(why, "percent-encoding is not allowed in a host");
    int r = parse_ip(buf, flags, t, why);
    if (r != 0)
        return r < 0 ? -1 : 0;
    return parse_name(buf, len, flags, t, why);
}

/* ---- URLs --------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int port;
} schemes[] = {{"http", 80}, {"https", 443}};

/* "scheme://": only the schemes above, compared case-insensitively; sets the default port. */
static int parse_scheme(const char *url, const char **rest, int *port, char *why)
{
    size_t n = 0;
    while (is_alnum(url[n]) || url[n] == '+' || url[n] == '-' || url[n] == '.')
        n++;
    if (n == 0 || url[n] != ':' || !((url[0] | 0x20) >= 'a' && (url[0] | 0x20) <= 'z'))
        return why_set(why, "missing scheme (expected http:// or https://)");
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        if (strlen(schemes[i].name) != n || strncasecmp(url, schemes[i].name, n) != 0)
            continue;
        if (strncmp(url + n, "://", 3) != 0)
            return why_set(why, "expected \"//\" after \"%.*s:\"", (int)n, url);
        *rest = url + n + 3;
        *port = schemes[i].port;
        return 0;
    }
    return why_set(why, "scheme \"%.*s\" is not allowed (http, https)", n > 16 ? 16 : (int)n, url);
}

/* host[:port] or [v6][:port]; the host ends the authority or is followed by ":port". */
static int parse_authority(const char *a, size_t n, target *t, char *why)
{
    const char *h = a, *colon;
    size_t hlen;
    int flags = 0;
    if (memchr(a, '@', n) != NULL)
        return why_set(why, "userinfo is not allowed in a URL");
    if (n > 0 && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (close == NULL)
            return why_set(why, "unterminated '[' in host");
        h = a + 1;
        hlen = (size_t)(close - h);
        colon = close + 1 < a + n ? close + 1 : NULL;
        if (colon != NULL && *colon != ':')
            return why_set(why, "unexpected character after ']'");
        flags = F_BRACKETED;
    } else {
        colon = memchr(a, ':', n);
        hlen = colon ? (size_t)(colon - a) : n;
        if (colon && memchr(colon + 1, ':', n - hlen - 1) != NULL)
            return why_set(why, "an IPv6 address must be written in brackets");
    }
    if (colon != NULL && parse_port(colon + 1, (size_t)(a + n - colon - 1), &t->port, why) != 0)
        return -1;
    return parse_host_text(h, hlen, flags, t, why);
}

/* Path, query and fragment: RFC 3986 characters only, "%XX" well-formed, one '#'. Anything else
 * (brackets, braces, quotes) a tool may glob, re-encode or reinterpret. */
static int check_tail(const char *s, char *why)
{
    int frag = 0;
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        if (c == '@')
            return why_set(why, "'@' is not allowed anywhere in a URL (a parser may read it as "
                                "userinfo; percent-encode it as %%40)");
        if (c == '%' && (!strchr("0123456789abcdefABCDEF", s[i + 1]) || !s[i + 1] ||
                         !strchr("0123456789abcdefABCDEF", s[i + 2]) || !s[i + 2]))
            return why_set(why, "malformed percent-encoding at byte %zu", i);
        if (c == '#' && frag++)
            return why_set(why, "more than one '#'");
        if (!is_alnum(c) && !strchr("-._~!$&'()*+,;=:/?#%", c))
            return why_set(why, "character '%c' is not allowed in a URL (percent-encode it)", c);
    }
    return 0;
}

static int parse_url(const char *url, target *t, char *why)
{
    const char *rest = NULL;
    size_t len = strlen(url);
    if (len == 0)
        return why_set(why, "empty URL");
    if (len > RX_TARGET_MAX_LEN)
        return why_set(why, "URL longer than %d bytes", RX_TARGET_MAX_LEN);
    if (ascii_scan(url, len, why) != 0 || parse_scheme(url, &rest, &t->port, why) != 0)
        return -1;
    size_t alen = strcspn(rest, "/?#");
    if (parse_authority(rest, alen, t, why) != 0)
        return -1;
    return check_tail(rest + alen, why);
}

/* ---- CIDRs -------------------------------------------------------------------------------- */

static int net_contains(const unsigned char *net, int prefix, const unsigned char *addr)
{
    int full = prefix / 8, rem = prefix % 8;
    if (memcmp(net, addr, (size_t)full) != 0)
        return 0;
    if (rem == 0)
        return 1;
    unsigned char mask = (unsigned char)(0xff << (8 - rem));
    return (net[full] & mask) == (addr[full] & mask);
}

/* Host bits set is refused: "10.0.0.1/8" is a typo or a trick, and the tool may read it either
 * way. A mapped range is IPv4 in disguise: a target must say so; a scope entry may not. */
static int cidr_rules(const rx_net *n, int flags, char *why)
{
    unsigned char masked[16] = {0};
    char txt[INET6_ADDRSTRLEN];
    memcpy(masked, n->addr, (size_t)addr_len(n->family));
    for (int b = n->prefix; b < addr_len(n->family) * 8; b++)
        masked[b / 8] &= (unsigned char)~(0x80 >> (b % 8));
    if (memcmp(masked, n->addr, (size_t)addr_len(n->family)) != 0) {
        inet_ntop(n->family, masked, txt, sizeof(txt));
        return why_set(why, "host bits are set (did you mean %s/%d?)", txt, n->prefix);
    }
    if (n->family != AF_INET6)
        return 0;
    int shorter = n->prefix < 96 ? n->prefix : 96;
    int inside = n->prefix >= 96 && net_contains(mapped_prefix, 96, n->addr);
    if (inside || (!(flags & F_CONFIG) && net_contains(n->addr, shorter, mapped_prefix)))
        return why_set(why, "%s the IPv4-mapped range ::ffff:0:0/96: write IPv4 CIDRs instead",
                       inside ? "inside" : "overlaps");
    return 0;
}

static int parse_cidr(const char *s, int flags, rx_net *n, char *why)
{
    char buf[CIDR_MAX_LEN + 1];
    size_t len = strlen(s);
    long prefix;
    if (len == 0)
        return why_set(why, "empty CIDR");
    if (len > CIDR_MAX_LEN)
        return why_set(why, "CIDR longer than %d bytes", CIDR_MAX_LEN);
    if (ascii_scan(s, len, why) != 0)
        return -1;
    memcpy(buf, s, len + 1);
    char *slash = strchr(buf, '/');
    if (slash != NULL)
        *slash = 0;
    n->family = strchr(buf, ':') ? AF_INET6 : AF_INET;
    if (n->family == AF_INET6 && strchr(buf, '%') != NULL)
        return why_set(why, "IPv6 zone ids are not allowed");
    if (inet_pton(n->family, buf, n->addr) != 1)
        return why_set(why, "invalid %s address", n->family == AF_INET ? "IPv4" : "IPv6");
    n->prefix = addr_len(n->family) * 8;
    if (slash != NULL) {
        if (parse_dec(slash + 1, strlen(slash + 1), n->prefix, &prefix) != 0)
            return why_set(why, "prefix length must be a decimal number from 0 to %d",
                           n->prefix);
        n->prefix = (int)prefix;
    }
    return cidr_rules(n, flags, why);
}

/* ---- Scope entries ------------------------------------------------------------------------ */

rx_scope *rx_scope_new(void)
{
    return calloc(1, sizeof(rx_scope));
}

void rx_scope_free(rx_scope *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n_names; i++)
        free(s->names[i].name);
    free(s->names);
    free(s->nets);
    free(s);
}

static int config_fail(rexec_error *err, const char *entry, const char *why)
{
    char q[SHOW_MAX + 16];
    return rx_fail(err, REXEC_ECONFIG, "scope entry %s: %s",
                   rx_msg_quote(q, sizeof(q), entry, strlen(entry), SHOW_MAX), why);
}

int rx_scope_add_cidr(rx_scope *s, const char *cidr, rexec_error *err)
{
    char why[WHY_MAX];
    rx_net n;
    if (parse_cidr(cidr, F_CONFIG, &n, why) != 0)
        return config_fail(err, cidr, why);
    rx_net *p = realloc(s->nets, (s->n_nets + 1) * sizeof(*p));
    if (p == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    s->nets = p;
    s->nets[s->n_nets++] = n;
    return 0;
}

/* "name", "*.name", "name:port", "ip", "ip:port", "v6", "[v6]", "[v6]:port". */
static int parse_entry(const char *e, target *t, char *why)
{
    size_t len = strlen(e), hlen = len;
    const char *h = e, *colon = NULL;
    int flags = F_WILDCARD_OK | F_CONFIG;
    if (len > ENTRY_MAX_LEN)
        return why_set(why, "longer than %d bytes", ENTRY_MAX_LEN);
    if (ascii_scan(e, len, why) != 0)
        return -1;
    if (e[0] == '[') {
        const char *close = strchr(e, ']');
        if (close == NULL || (close[1] != 0 && close[1] != ':'))
            return why_set(why, "expected \"[IPv6]\" or \"[IPv6]:port\"");
        h = e + 1;
        hlen = (size_t)(close - h);
        colon = close[1] ? close + 1 : NULL;
        flags |= F_BRACKETED;
    } else if ((colon = strchr(e, ':')) != NULL && strchr(colon + 1, ':') != NULL) {
        colon = NULL; /* a bare IPv6 address: no port */
    } else if (colon != NULL) {
        hlen = (size_t)(colon - e);
    }
    if (colon != NULL && parse_port(colon + 1, strlen(colon + 1), &t->port, why) != 0)
        return -1;
    return parse_host_text(h, hlen, flags, t, why);
}

int rx_scope_add_domain(rx_scope *s, const char *entry, rexec_error *err)
{
    char why[WHY_MAX];
    target t = {0};
    if (parse_entry(entry, &t, why) != 0)
        return config_fail(err, entry, why);
    rx_name *p = realloc(s->names, (s->n_names + 1) * sizeof(*p));
    if (p == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    s->names = p;
    rx_name *n = &s->names[s->n_names];
    memset(n, 0, sizeof(*n));
    n->port = t.port;
    n->family = t.family;
    memcpy(n->addr, t.addr, sizeof(n->addr));
    n->wildcard = t.wildcard;
    if (t.family == 0 && (n->name = strdup(t.name)) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    s->n_names++;
    return 0;
}

/* ---- Matching ----------------------------------------------------------------------------- */

/* A port-restricted entry matches only a target that names that port: a bare host lets the tool
 * pick any port. A wildcard's stored ".suffix" keeps the match on a label boundary. */
static int name_matches(const rx_name *e, const target *t)
{
    if (e->port != 0 && e->port != t->port)
        return 0;
    if (e->name == NULL)
        return t->family == e->family && memcmp(t->addr, e->addr, (size_t)addr_len(e->family)) == 0;
    if (t->family != 0)
        return 0;
    if (!e->wildcard)
        return strcmp(e->name, t->name) == 0;
    size_t nl = strlen(t->name), sl = strlen(e->name);
    return nl > sl && strcmp(t->name + nl - sl, e->name) == 0;
}

static int target_in_scope(const rx_scope *s, const target *t)
{
    for (size_t i = 0; t->family != 0 && i < s->n_nets; i++)
        if (s->nets[i].family == t->family &&
            net_contains(s->nets[i].addr, s->nets[i].prefix, t->addr))
            return 1;
    for (size_t i = 0; i < s->n_names; i++)
        if (name_matches(&s->names[i], t))
            return 1;
    return 0;
}

static int target_fail(rexec_error *err, const char *value, const char *why)
{
    char q[SHOW_MAX + 16];
    return rx_fail(err, REXEC_EREQUEST, "target %s: %s",
                   rx_msg_quote(q, sizeof(q), value, strlen(value), SHOW_MAX), why);
}

static int target_check(const rx_scope *s, const char *value, const target *t, rexec_error *err)
{
    char q[SHOW_MAX + 16], port[16] = "";
    if (s != NULL && target_in_scope(s, t))
        return 0;
    if (t->port != 0)
        snprintf(port, sizeof(port), " port %d", t->port);
    return rx_fail(err, REXEC_EDENIED, "target %s: %s%s is not in scope",
                   rx_msg_quote(q, sizeof(q), value, strlen(value), SHOW_MAX), t->name, port);
}

/* Parses a bare host (no brackets: it is not a URL) with an optional separate port. */
static int host_parse(const char *host, int port, target *t, char *why)
{
    size_t len = strlen(host);
    if (len > RX_HOST_MAX_LEN)
        return why_set(why, "host longer than %d bytes", RX_HOST_MAX_LEN);
    if (ascii_scan(host, len, why) != 0)
        return -1;
    if (len > 0 && (host[0] == '[' || host[len - 1] == ']'))
        return why_set(why, "write an IPv6 address without brackets");
    if (port < 0 || port > 65535)
        return why_set(why, "port %d out of range (1..65535)", port);
    t->port = port;
    return parse_host_text(host, len, 0, t, why);
}

int rx_scope_check_host(const rx_scope *s, const char *host, int port, rexec_error *err)
{
    char why[WHY_MAX];
    target t = {0};
    if (host == NULL)
        return rx_fail(err, REXEC_EREQUEST, "target: no host");
    if (host_parse(host, port, &t, why) != 0)
        return target_fail(err, host, why);
    return target_check(s, host, &t, err);
}

int rx_scope_check_url(const rx_scope *s, const char *url, rexec_error *err)
{
    char why[WHY_MAX];
    target t = {0};
    if (url == NULL)
        return rx_fail(err, REXEC_EREQUEST, "target: no URL");
    if (parse_url(url, &t, why) != 0)
        return target_fail(err, url, why);
    return target_check(s, url, &t, err);
}

/* A target CIDR is in scope when it lies wholly inside one scope CIDR (or is the one address of
 * a portless IP-literal entry). */
static int cidr_in_scope(const rx_scope *s, const rx_net *n)
{
    for (size_t i = 0; i < s->n_nets; i++) {
        const rx_net *e = &s->nets[i];
        if (e->family == n->family && e->prefix <= n->prefix &&
            net_contains(e->addr, e->prefix, n->addr))
            return 1;
    }
    for (size_t i = 0; i < s->n_names; i++) {
        const rx_name *e = &s->names[i];
        if (e->name == NULL && e->port == 0 && e->family == n->family &&
            n->prefix == addr_len(n->family) * 8 &&
            memcmp(e->addr, n->addr, (size_t)addr_len(n->family)) == 0)
            return 1;
    }
    return 0;
}

int rx_scope_check_cidr(const rx_scope *s, const char *cidr, rexec_error *err)
{
    char why[WHY_MAX], q[SHOW_MAX + 16];
    rx_net n;
    if (cidr == NULL)
        return rx_fail(err, REXEC_EREQUEST, "target: no CIDR");
    if (parse_cidr(cidr, 0, &n, why) != 0)
        return target_fail(err, cidr, why);
    if (s != NULL && cidr_in_scope(s, &n))
        return 0;
    return rx_fail(err, REXEC_EDENIED, "target %s: not inside a scope CIDR",
                   rx_msg_quote(q, sizeof(q), cidr, strlen(cidr), SHOW_MAX));
}

/* ---- Syntax only -------------------------------------------------------------------------- */

int rx_scope_parse_url(const char *url, rexec_error *err)
{
    char why[WHY_MAX];
    target t = {0};
    if (url == NULL || parse_url(url, &t, why) != 0)
        return target_fail(err, url ? url : "", url ? why : "no URL");
    return 0;
}

int rx_scope_parse_host(const char *host, rexec_error *err)
{
    char why[WHY_MAX];
    target t = {0};
    if (host == NULL || host_parse(host, 0, &t, why) != 0)
        return target_fail(err, host ? host : "", host ? why : "no host");
    return 0;
}

int rx_scope_parse_cidr(const char *cidr, rexec_error *err)
{
    char why[WHY_MAX];
    rx_net n;
    if (cidr == NULL || parse_cidr(cidr, 0, &n, why) != 0)
        return target_fail(err, cidr ? cidr : "", cidr ? why : "no CIDR");
    return 0;
}
