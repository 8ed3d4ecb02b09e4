/* The command that starts every script on the VM (render.h, rx_render_boot_cmd). Apart from
 * render.c so that the lifecycle test (tests/lifecycle), which links exec.c and runner.c without
 * the renderer, runs the same command. */
#include <stdio.h>
#include <string.h>

#include "render.h"

size_t rx_render_boot_cmd(char *buf, size_t cap, const void *script, size_t script_len)
{
    int n = -1;
    if (script_len > 0 && memchr(script, 0, script_len) == NULL)
        n = snprintf(buf, cap, "bash -c 'LC_ALL=C IFS= read -r -N %zu __rx_s || exit 255; "
                               "eval \"unset __rx_s; $__rx_s\"'", script_len);
    if (n <= 0 || (size_t)n >= cap)
        n = snprintf(buf, cap, "bash -s");
    return (size_t)n;
}
