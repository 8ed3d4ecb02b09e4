/* The status-line filter (marker.h). */
#include <stdio.h>
#include <string.h>

#include "marker.h"

void rx_marker_init(rx_marker *m, const char *nonce, void (*emit)(void *, const unsigned char *, size_t),
                    void (*line)(void *, const char *), void *ud)
{
    memset(m, 0, sizeof(*m));
    m->plen = (size_t)snprintf(m->prefix, sizeof(m->prefix), "\036rexec:%s:", nonce);
    m->emit = emit;
    m->line = line;
    m->ud = ud;
}

static void emit(rx_marker *m, const unsigned char *p, size_t n)
{
    if (n)
        m->emit(m->ud, p, n);
}

static void body_byte(rx_marker *m, unsigned char c)
{
    if (c == '\n' || m->blen == RX_MARKER_BODY_MAX - 1) {
        m->body[m->blen] = 0;
        m->in_body = 0;
        m->blen = 0;
        m->line(m->ud, m->body);
        return;
    }
    m->body[m->blen++] = (char)c;
}

void rx_marker_feed(rx_marker *m, const unsigned char *p, size_t n)
{
    size_t start = 0; /* first byte of p not yet emitted or consumed */
    for (size_t i = 0; i < n; i++) {
        if (m->in_body) {
            body_byte(m, p[i]);
            start = i + 1;
        } else if (p[i] == (unsigned char)m->prefix[m->matched]) {
            if (m->matched == 0)
                emit(m, p + start, i - start);
            if (++m->matched == m->plen) {
                m->in_body = 1;
                m->matched = 0;
            }
            start = i + 1;
        } else if (m->matched > 0) {
            emit(m, (const unsigned char *)m->prefix, m->matched); /* a false start */
            m->matched = 0;
            start = i;
            i--; /* this byte may begin a marker */
        }
    }
    if (!m->in_body && m->matched == 0)
        emit(m, p + start, n - start);
}

void rx_marker_flush(rx_marker *m)
{
    if (m->matched > 0)
        emit(m, (const unsigned char *)m->prefix, m->matched);
    m->matched = 0;
}
