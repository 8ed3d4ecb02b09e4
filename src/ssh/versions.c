/* rexec_dependency_versions: the libraries in use at run time (not the headers compiled
 * against), for `rexec --version` and bug reports: a distribution may update them underneath. */
#include <stdio.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <uv.h>

#include "rexec.h"
#include "ssh_int.h" /* the one includer of libssh2.h */

const char *rexec_dependency_versions(void)
{
    /* Written once; callers run on one thread (docs/architecture.md). */
    static char text[256];
    if (text[0] == 0)
        snprintf(text, sizeof text, "libssh2 %s\nlibuv %s\n%s\ncJSON %s",
                 libssh2_version(0) ? libssh2_version(0) : "?", uv_version_string(),
                 OpenSSL_version(OPENSSL_VERSION), cJSON_Version());
    return text;
}
