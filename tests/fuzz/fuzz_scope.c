/* libFuzzer target for the scope and URL/host/CIDR parsers: the first byte picks the parser, the
 * rest is the text (NUL-terminated copy). A target that parses strictly is then checked against
 * a small scope; the answer must be one of the documented classes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scope.h"

static rx_scope *scope;

static void scope_init(void)
{
    rexec_error e;
    scope = rx_scope_new();
    if (scope == NULL || rx_scope_add_cidr(scope, "10.0.0.0/8", &e) != 0 ||
        rx_scope_add_cidr(scope, "fd00::/8", &e) != 0 ||
        rx_scope_add_domain(scope, "*.lab.internal", &e) != 0 ||
        rx_scope_add_domain(scope, "api.example:8443", &e) != 0)
        abort();
}

static int documented(int r)
{
    return r == 0 || r == REXEC_EREQUEST || r == REXEC_EDENIED || r == REXEC_ENOMEM ||
           r == REXEC_ECONFIG;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rexec_error e;
    if (scope == NULL)
        scope_init();
    if (size < 1)
        return 0;
    char *t = malloc(size);
    memcpy(t, data + 1, size - 1);
    t[size - 1] = 0;
    int r;
    switch (data[0] % 5) {
    case 0: r = rx_scope_parse_url(t, &e); if (r == 0) r = rx_scope_check_url(scope, t, &e); break;
    case 1: r = rx_scope_parse_host(t, &e); if (r == 0) r = rx_scope_check_host(scope, t, 0, &e); break;
    case 2: r = rx_scope_parse_cidr(t, &e); if (r == 0) r = rx_scope_check_cidr(scope, t, &e); break;
    case 3: { /* scope entries themselves, as a workspace gives them */
        rx_scope *s = rx_scope_new();
        r = s ? rx_scope_add_domain(s, t, &e) : REXEC_ENOMEM;
        if (s && r == 0)
            r = rx_scope_check_host(s, "a.lab.internal", 443, &e);
        rx_scope_free(s);
        break;
    }
    default: {
        rx_scope *s = rx_scope_new();
        r = s ? rx_scope_add_cidr(s, t, &e) : REXEC_ENOMEM;
        if (s && r == 0)
            r = rx_scope_check_cidr(s, "10.1.2.0/24", &e);
        rx_scope_free(s);
        break;
    }
    }
    if (!documented(r))
        abort();
    free(t);
    return 0;
}
