/* Standard base64 (RFC 4648, "+/" and "=" padding) without libcrypto, so that the light
 * `rexec` front (src/cli/front.c) prints --json results without loading it. The functions are
 * public (rexec_base64_encode/decode in include/rexec.h); this header is for the library. */
#ifndef RX_B64_H
#define RX_B64_H

#include "rexec.h"

#endif
