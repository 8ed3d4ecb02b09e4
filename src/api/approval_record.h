/* The audit record of a decision on a challenge (docs/audit.md, "Approval records"): who
 * decided (user and uid), how (tty, socket, web, serve), what (approved, denied, withdrawn) and
 * the comment or reason. Private to src/api/. */
#ifndef RX_APPROVAL_RECORD_H
#define RX_APPROVAL_RECORD_H

#include <cjson/cJSON.h>

#include "approvals.h"
#include "rexec.h"

/* The record of c as decided now (its state and decision members say how). NULL: no memory. */
cJSON *rx_approval_record(const rx_challenge *c);

/* Appends it to ctx's audit log through the recorder (serve). */
int rx_ctx_audit_approval(rexec_ctx *ctx, const rx_challenge *c, rexec_error *err);

/* Appends it to ws's audit log, opened and closed for it (the CLI). */
int rx_ws_audit_approval(const rx_ws *ws, const rx_challenge *c, rexec_error *err);

#endif
