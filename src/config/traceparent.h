/* W3C Trace Context's traceparent (https://www.w3.org/TR/trace-context/#traceparent-header):
 * a caller's trace id, carried through a call into its audit record, evidence, serve's log and
 * its result, so that a distributed trace finds what rexec did for it. rexec checks the form
 * and records the value as it came; it starts no span of its own. */
#ifndef RX_TRACEPARENT_H
#define RX_TRACEPARENT_H

#include "rexec.h"

/* "00-" 32 hex "-" 16 hex "-" 2 hex: lowercase hex only, trace id and parent id not all zeros,
 * version not "ff". A later version (01..fe) may carry more after the flags, behind a "-"
 * (the spec's rule for versions a parser does not know). At most this long: */
#define RX_TRACEPARENT_MAX 256

/* 0 when value is a valid traceparent; else REXEC_EREQUEST with err saying what is wrong
 * (prefixed with what, e.g. "--traceparent" or "traceparent"). */
int rx_traceparent_check(const char *value, const char *what, rexec_error *err);

#endif
