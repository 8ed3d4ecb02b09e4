/* File actions ("put" and "get" in the catalog, docs/workspace.md): their declarations, the fixed
 * command the loader gives them, and the path a call's values make. */
#ifndef RX_TRANSFER_H
#define RX_TRANSFER_H

#include <cjson/cJSON.h>

#include "buf.h"
#include "rexec.h"
#include "workspace.h"

/* The parameters a put action carries besides the operator's: the controller's sha256 of the
 * file (64 lowercase hex) and its size in bytes. Set by `rexec put` and the Python client; the
 * VM refuses a file that does not match them. */
#define RX_PUT_SHA_PARAM "content_sha256"
#define RX_PUT_SIZE_PARAM "content_size"
/* A put's largest file unless its "max_bytes" says otherwise: 1 GiB. */
#define RX_PUT_DEFAULT_MAX (1LL << 30)

/* The loader's part (rx_ws_is_transfer, rx_ws_load_transfer) is declared in workspace.h, so
 * that workspace.c does not include this header (no include cycle). */

/* The file's path for the call's values (values[i] belongs to a->params[i]), checked as a whole:
 * absolute, no control character, no "." or ".." component, at most 4096 bytes.
 * REXEC_EREQUEST naming the path otherwise. */
int rx_transfer_path(const rx_action *a, const rexec_param *values, rx_buf *out,
                     rexec_error *err);

/* "put", "get" or NULL. */
const char *rx_transfer_name(rx_transfer t);

#endif
