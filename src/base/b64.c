/* Standard base64 (RFC 4648, with padding); see b64.h. */
#include <stdint.h>

#include "b64.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t rexec_base64_encode(char *out, const void *in, size_t n)
{
    const unsigned char *p = in;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = b64_alphabet[(v >> 6) & 63];
        out[o++] = b64_alphabet[v & 63];
    }
    if (i < n) { /* one or two bytes left: "xx==" or "xxx=" */
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = 0;
    return o;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

long rexec_base64_decode(void *out, const char *in, size_t n)
{
    unsigned char *d = out;
    size_t o = 0;
    if (n % 4 != 0)
        return -1;
    for (size_t i = 0; i < n; i += 4) {
        int pad = (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=');
        int a = b64_value((unsigned char)in[i]), b = b64_value((unsigned char)in[i + 1]);
        int c = pad >= 2 ? 0 : b64_value((unsigned char)in[i + 2]);
        int e = pad >= 1 ? 0 : b64_value((unsigned char)in[i + 3]);
        if (a < 0 || b < 0 || c < 0 || e < 0 || (pad && i + 4 != n))
            return -1; /* not base64, or padding before the end */
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)e;
        d[o++] = (unsigned char)(v >> 16);
        if (pad < 2)
            d[o++] = (unsigned char)(v >> 8);
        if (pad < 1)
            d[o++] = (unsigned char)v;
    }
    return (long)o;
}
