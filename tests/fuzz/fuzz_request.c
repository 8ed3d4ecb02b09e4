/* libFuzzer target for the request parser (`--request FILE`, serve's run objects): any bytes
 * either parse into a request whose view can be built, or fail with REXEC_EREQUEST/ENOMEM and a
 * message; never a crash, a leak or undefined behaviour. */
#include <stdint.h>
#include <stdlib.h>

#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rx_request r;
    rexec_error e;
    if (rx_request_parse((const char *)data, size, &r, &e) == 0) {
        rexec_request pub;
        rexec_param *params = NULL;
        if (rx_request_view(&r, &pub, &params) == 0 && pub.n_params > 0 && params == NULL)
            abort();
        free(params);
    } else if (e.code != REXEC_EREQUEST && e.code != REXEC_ENOMEM) {
        abort(); /* bad input has one error class */
    }
    rx_request_free(&r);
    return 0;
}
