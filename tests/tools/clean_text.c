/* clean_text: each line of stdin as the approval prompt shows it (rx_approval_clean), one line
 * out per line in. For tests/unit/t_invisible.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approve_tty.h"

int main(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        rx_buf b;
        if (line[n - 1] == '\n')
            line[n - 1] = 0;
        rx_buf_init(&b, 1 << 20);
        if (rx_approval_clean(&b, line) != 0 || rx_buf_addc(&b, '\n') != 0)
            return 1;
        fwrite(b.data, 1, b.len, stdout);
        rx_buf_free(&b);
    }
    free(line);
    return 0;
}
