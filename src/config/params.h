/* Typed parameter validation: a value is checked against its spec before it is rendered. */
#ifndef RX_PARAMS_H
#define RX_PARAMS_H

#include <stddef.h>

#include "rexec.h"
#include "scope.h"
#include "workspace.h"

#define RX_PARAM_DEFAULT_MAX_LEN 4096

/* Validates value (len bytes) against spec. Returns 0, REXEC_EREQUEST (65) naming the parameter
 * and the rule it broke (NUL byte, invalid UTF-8, too long, pattern, range, enum, malformed url,
 * host, cidr or path), or REXEC_EDENIED (77) when spec->in_scope and the target is outside scope.
 * Messages name the parameter; they may quote a value only if the value is short and printable. */
int rx_param_validate(const rx_param_spec *spec, const char *value, size_t len,
                      const rx_scope *scope, rexec_error *err);

#endif
