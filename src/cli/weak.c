/* Commands still being written elsewhere: weak stand-ins the real ones replace at link time. */
#include "cli.h"

__attribute__((weak)) int cli_approve(const cli_global *g, int argc, char **argv)
{
    (void)g, (void)argc, (void)argv;
    return cli_error(64, "approve: not available in this build yet");
}

__attribute__((weak)) int cli_approvals(const cli_global *g, int argc, char **argv)
{
    (void)g, (void)argc, (void)argv;
    return cli_error(64, "approvals: not available in this build yet");
}
