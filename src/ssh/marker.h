/* A stream filter for the remote side's status lines, "\036rexec:<nonce>:<body>\n": the lines
 * are cut out of the stream and their bodies handed over; every other byte passes through in
 * order. Only bytes that match a prefix of the marker are held back, and \036 appears once in
 * the marker, so a failed match never hides the start of another. The command cannot produce a
 * line that matches: it never sees the nonce. */
#ifndef RX_MARKER_H
#define RX_MARKER_H

#include <stddef.h>

#define RX_MARKER_BODY_MAX 160

typedef struct rx_marker {
    char prefix[80]; /* "\036rexec:<nonce>:" */
    size_t plen;
    size_t matched;  /* bytes of prefix matched (held back) */
    int in_body;
    char body[RX_MARKER_BODY_MAX];
    size_t blen;
    void (*emit)(void *ud, const unsigned char *p, size_t n); /* the stream's own bytes */
    void (*line)(void *ud, const char *body);                 /* a status line's body */
    void *ud;
} rx_marker;

void rx_marker_init(rx_marker *m, const char *nonce, void (*emit)(void *, const unsigned char *, size_t),
                    void (*line)(void *, const char *), void *ud);
void rx_marker_feed(rx_marker *m, const unsigned char *p, size_t n);
void rx_marker_flush(rx_marker *m); /* the stream ended: a held-back partial match is output */

#endif
