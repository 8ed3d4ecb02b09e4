/* Scope: which network targets an action may reach. IPv4/IPv6 CIDRs, domains (exact or
 * "*.suffix", matched on label boundaries) and host:port entries. Targets are parsed strictly so
 * that what a tool will connect to is exactly what was checked. */
#ifndef RX_SCOPE_H
#define RX_SCOPE_H

#include "rexec.h"

typedef struct rx_scope rx_scope;

rx_scope *rx_scope_new(void); /* NULL on ENOMEM */
void rx_scope_free(rx_scope *s);

/* Adds "10.0.0.0/8", "::1/128", "127.0.0.1" (a /32). REXEC_ECONFIG naming the entry if bad. */
int rx_scope_add_cidr(rx_scope *s, const char *cidr, rexec_error *err);
/* Adds "lab.internal", "*.lab.internal", "lab.internal:8443" or "[::1]:8080".
 * REXEC_ECONFIG naming the entry if bad. */
int rx_scope_add_domain(rx_scope *s, const char *entry, rexec_error *err);

/* Checks a target. Each returns 0 when the target parses and is in scope, REXEC_EREQUEST when it
 * does not parse strictly (ambiguous or non-canonical forms are refused), REXEC_EDENIED when it is
 * out of scope. err->msg says which and why, naming the value (targets are not secrets).
 * port is 0 when the target does not name one. */
int rx_scope_check_host(const rx_scope *s, const char *host, int port, rexec_error *err);
int rx_scope_check_url(const rx_scope *s, const char *url, rexec_error *err);
int rx_scope_check_cidr(const rx_scope *s, const char *cidr, rexec_error *err); /* inside a scope CIDR */

/* ---- Added by the scope module (the declarations above are the fixed contract) -------------- */

#define RX_TARGET_MAX_LEN 2048 /* a URL longer than this is refused */
#define RX_HOST_MAX_LEN 253    /* a host name longer than this is refused (RFC 1035) */

/* Syntax only, no scope: the same strict rules as the checks above, for url/host/cidr parameters
 * that are not in_scope. Each returns 0 or REXEC_EREQUEST with err->msg naming the value. */
int rx_scope_parse_url(const char *url, rexec_error *err);
int rx_scope_parse_host(const char *host, rexec_error *err);
int rx_scope_parse_cidr(const char *cidr, rexec_error *err);

#endif
