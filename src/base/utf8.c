/* UTF-8 decoding and validation (utf8.h). */
#include "utf8.h"

#include <stdint.h>
#include <string.h>

/* The second byte's range carries the rules against overlongs (E0, F0), surrogates (ED) and
 * code points above U+10FFFF (F4). */
size_t rx_utf8_decode(const unsigned char *p, size_t n, unsigned *cp)
{
    unsigned char c = p[0], lo = 0x80, hi = 0xBF;
    size_t need;
    unsigned v;
    if (n == 0)
        return 0;
    if (c < 0x80) {
        if (cp)
            *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF)
        need = 2, v = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 3, v = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 4, v = c & 0x07;
    else
        return 0; /* continuation byte, C0/C1 (always overlong) or F5..FF */
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (n < need || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 1; i < need; i++) {
        if (i > 1 && (p[i] < 0x80 || p[i] > 0xBF))
            return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    if (cp)
        *cp = v;
    return need;
}

int rx_utf8_check(const void *p, size_t len, size_t *bad)
{
    const unsigned char *s = p;
    size_t i = 0;
    while (i < len) {
        /* ASCII, 8 bytes at a time: the bulk of what is checked (request lines, base64) */
        uint64_t w;
        while (len - i >= 8 && (memcpy(&w, s + i, 8), (w & 0x8080808080808080ull) == 0))
            i += 8;
        if (i == len)
            break;
        size_t n = rx_utf8_decode(s + i, len - i, NULL);
        if (n == 0) {
            if (bad)
                *bad = i;
            return -1;
        }
        i += n;
    }
    return 0;
}
