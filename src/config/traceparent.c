/* traceparent's form (traceparent.h). */
#include "traceparent.h"

#include <string.h>

#include "err.h"

/* n lowercase hex digits at p; *nonzero set when one of them is not '0'. */
static int hex_run(const char *p, size_t n, int *nonzero)
{
    *nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
        *nonzero |= p[i] != '0';
    }
    return 1;
}

int rx_traceparent_check(const char *v, const char *what, rexec_error *err)
{
    static const char form[] = "VERSION-TRACEID-PARENTID-FLAGS, e.g. "
                               "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    int nz;
    size_t len = v ? strlen(v) : 0;
    if (len < 55 || len > RX_TRACEPARENT_MAX || v[2] != '-' || v[35] != '-' || v[52] != '-')
        return rx_fail(err, REXEC_EREQUEST, "%s: not a W3C traceparent (%s: lowercase hex, 55 "
                       "characters)", what, form);
    if (!hex_run(v, 2, &nz) || strncmp(v, "ff", 2) == 0)
        return rx_fail(err, REXEC_EREQUEST, "%s: the version must be 2 lowercase hex digits, "
                       "not ff (%s)", what, form);
    if (!hex_run(v + 3, 32, &nz) || !nz)
        return rx_fail(err, REXEC_EREQUEST, "%s: the trace id must be 32 lowercase hex digits, "
                       "not all zeros (%s)", what, form);
    if (!hex_run(v + 36, 16, &nz) || !nz)
        return rx_fail(err, REXEC_EREQUEST, "%s: the parent id must be 16 lowercase hex digits, "
                       "not all zeros (%s)", what, form);
    if (!hex_run(v + 53, 2, &nz))
        return rx_fail(err, REXEC_EREQUEST, "%s: the flags must be 2 lowercase hex digits (%s)",
                       what, form);
    /* version 00 is exactly 55 characters; a later one may go on after a '-' */
    if (len > 55 && (strncmp(v, "00", 2) == 0 || v[55] != '-'))
        return rx_fail(err, REXEC_EREQUEST, "%s: unexpected characters after the flags (%s)",
                       what, form);
    for (size_t i = 55; i < len; i++)
        if (v[i] < 0x21 || v[i] > 0x7e)
            return rx_fail(err, REXEC_EREQUEST, "%s: only printable ASCII may follow the flags",
                           what);
    return 0;
}
