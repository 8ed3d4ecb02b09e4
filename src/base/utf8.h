/* UTF-8 (RFC 3629), the one decoder every module uses: the strict request and workspace
 * parsers, the redactor's JSON forms and the approval prompt's escaping. */
#ifndef RX_UTF8_H
#define RX_UTF8_H

#include <stddef.h>

/* Decodes the well-formed sequence at p[0..n): returns its length (1 for ASCII, 2-4 otherwise)
 * and its code point in *cp (cp may be NULL), or 0 when it is not well-formed (overlong forms,
 * surrogates U+D800..U+DFFF, anything above U+10FFFF, a truncated or stray continuation byte). */
size_t rx_utf8_decode(const unsigned char *p, size_t n, unsigned *cp);

/* Checks that p[0..len) is well-formed UTF-8 throughout. NUL is valid UTF-8: callers that
 * refuse it check it themselves. Returns 0, or -1 with the offset of the first bad byte in *bad
 * (bad may be NULL). */
int rx_utf8_check(const void *p, size_t len, size_t *bad);

#endif
