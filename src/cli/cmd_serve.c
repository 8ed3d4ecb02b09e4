/* `rexec serve --socket PATH`: see docs/serve-protocol.md. */
#include "cli.h"

int cli_serve(const cli_global *g, int argc, char **argv)
{
    (void)g, (void)argc, (void)argv;
    return cli_error(64, "serve: not available in this build yet");
}
