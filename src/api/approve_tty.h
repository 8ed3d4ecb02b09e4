/* The operator's confirmation at a terminal, exactly as `rexec approve ID` does it: loads the
 * challenge, shows on /dev/tty what will run (host, action, effective risk and why, the rendered
 * command, parameters, secrets by name, stdin size and sha256, expiry; control and invisible
 * characters escaped) and asks for the challenge's confirmation code, read back from /dev/tty
 * (never stdin/stdout: a pipe cannot approve; type-ahead is discarded). Returns 0 when approved
 * (or already approved), REXEC_EDENIED when there is no terminal, the code is wrong, or the
 * challenge is unknown, used or expired; REXEC_EAUDIT when approvals/ fails. Private to src/api:
 * front ends reach it through rexec_approve_tty / rexec_approve_tty_at. */
#ifndef RX_APPROVE_TTY_H
#define RX_APPROVE_TTY_H

#include "buf.h"
#include "rexec.h"
#include "workspace.h"

int rx_approve_tty(const rx_ws *ws, const char *challenge_id, rexec_error *err);

/* Appends s as the prompt shows it: every character a person cannot see escaped (\n, \x1b,
 * \u202e, \U000e0041; unicode_vis.h), and a combining mark with no base before it. 0, or the
 * rx_buf error. */
int rx_approval_clean(rx_buf *b, const char *s);

#endif
