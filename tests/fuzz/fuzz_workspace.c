/* libFuzzer target for the workspace loader: the input is rexec.json in a scratch workspace
 * (with a key file and an empty known_hosts, so that valid documents load). Any bytes either
 * load (and free) or fail with one documented class and a message; never a crash or a leak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workspace.h"

static char dir[64];

static void cleanup(void)
{
    static const char *const names[] = {"rexec.json", "known_hosts", "keys/id_ed25519", "keys", ""};
    char path[128];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        remove(path);
    }
}

static void put(const char *name, const void *p, size_t n)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        abort();
    chmod(path, 0600);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rx_ws *ws = NULL;
    rexec_error e;
    if (dir[0] == 0) {
        snprintf(dir, sizeof(dir), "/tmp/rexec-fuzz-ws.XXXXXX");
        if (mkdtemp(dir) == NULL)
            abort();
        char keys[96];
        snprintf(keys, sizeof(keys), "%s/keys", dir);
        mkdir(keys, 0700);
        put("keys/id_ed25519", "k", 1);
        put("known_hosts", "", 0);
        atexit(cleanup);
    }
    put("rexec.json", data, size);
    int r = rx_ws_load(&ws, dir, &e);
    if (r == 0)
        rx_ws_free(ws);
    else if (r != REXEC_ECONFIG && r != REXEC_ENOMEM && r != REXEC_EUSAGE)
        abort();
    return 0;
}
