/* The renderer: turns an approved action into the `bash -s` script sent on the channel's stdin.
 * Shell words come from one quoting function (rx_shell_quote), never from printf. */
#ifndef RX_RENDER_H
#define RX_RENDER_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "redact.h"
#include "rexec.h"
#include "workspace.h"

/* Limits of what the VM's kernel accepts in one exec (MAX_ARG_STRLEN) and in all of argv+env:
 * checked before sending, so an oversized value is a clear error, not "Argument list too long". */
#define RX_MAX_ARG_STRLEN (128u * 1024u - 1u)
#define RX_MAX_ENV_TOTAL (1024u * 1024u)

#define RX_NONCE_LEN 32 /* hex characters */

/* Appends value as one single-quoted shell word ('it'\''s'). Any byte but NUL is safe. */
int rx_shell_quote(rx_buf *out, const void *value, size_t len);

/* Expands the action's template: each {name} becomes the value of the parameter of that name as
 * one quoted word; {{ and }} are literal braces; ${...} is left to the shell. values[i] belongs
 * to action->params[i]. Returns 0, or REXEC_EREQUEST when the result is too long. */
int rx_render_command(const rx_action *action, const rexec_param *values, rx_buf *out,
                      rexec_error *err);

/* The command as it is sent (render_params.c): each {name} becomes an expansion of the variable
 * __rx_p_NAME ("${__rx_p_NAME}", or ${__rx_p_NAME} inside "..." and heredocs), never the value's
 * text; bindings gets one `__rx_p_NAME='value'` line per parameter, quoted by rx_shell_quote,
 * which the call's shell runs before the command. A `shell` parameter is inserted raw. The
 * template must pass the loader's check (rx_ws_check_template); else REXEC_ECONFIG. */
int rx_render_wire(const rx_action *action, const rexec_param *values, rx_buf *command,
                   rx_buf *bindings, rexec_error *err);
/* A file action's command starts with the functions it calls (remote/xfer.sh and put.sh or
 * get.sh): fixed code, no value in it. */

typedef struct rx_render_in {
    const char *command;      /* the command as sent (rx_render_wire) */
    const char *bindings;     /* its parameter assignments (rx_render_wire), or NULL */
    const rx_secret *secrets; /* the action's secrets: exported on stdin, never on argv */
    size_t n_secrets;
    const char *cwd;          /* NULL: the login directory */
    double timeout_s;
    double kill_after_s;
    long long stdin_len;      /* -1: the command's stdin is /dev/null */
    int stdin_piped;          /* the command reads its stdin from a pipe as it arrives, not from
                               * a file staged first (the wrapper only; a runner always stages) */
    int stdin_framed;         /* stdin_len is 0 and unknown: the stdin follows in frames "LEN\n"
                               * + bytes up to "0\n" (a pipe streamed as read; the wrapper only) */
    rx_containment min_containment;
    rx_containment max_containment; /* the host's cap */
    const char *nonce;        /* RX_NONCE_LEN hex chars: marks the wrapper's status lines */
    const char *run_id;
} rx_render_in;

/* Renders the whole script (without the stdin bytes, which the caller sends after it).
 * Returns 0, or REXEC_EREQUEST / REXEC_ECONFIG naming the value that is too large. */
int rx_render_script(const rx_render_in *in, rx_buf *out, rexec_error *err);

/* A runner's call (remote/runner.sh): the code its contained shell runs (exports, stdin,
 * working directory, command), without the nonce. Same checks and errors as rx_render_script. */
int rx_render_runner_code(const rx_render_in *in, rx_buf *out, rexec_error *err);

/* Whether that call may run in a fork of its runner's slot rather than a fresh bash (a oneshot
 * command reading no variable the two could see differently: oneshot.h). The runner's frame
 * then says so; only a slot in a PID namespace acts on it. */
bool rx_render_runner_forks(const rx_render_in *in);

/* The command a channel runs for a script of script_len bytes (a call's wrapper, a check, a
 * runner's start), written into buf (RX_BOOT_CMD_MAX bytes; returns its length):
 *   bash -c 'LC_ALL=C IFS= read -r -N <script_len> __rx_s || exit 255; eval "unset __rx_s; $__rx_s"'
 * `bash -s` reads a script from a pipe one byte per read(), as it must not read past a command
 * (what follows may be the command's stdin): a runner's start (34 KB) cost 34,000 reads on the
 * VM, a call's wrapper 12,000. `read -N` takes the script in one read (a byte count: C locale),
 * and leaves what follows it (stdin, frames) in the pipe. Nothing runs until the whole script
 * is in: a script cut short fails the read, and bash exits 255. (Not `bash -s` running such a
 * line itself: bash 5.2 crashes when code run by eval under `bash -s` redirects fd 0.) A script
 * holding a NUL byte (bash drops those, so the count would be off) gets plain `bash -s`. */
#define RX_BOOT_CMD_MAX 160
size_t rx_render_boot_cmd(char *buf, size_t cap, const void *script, size_t script_len);

/* What starts a runner on a channel: its nonce and the host's containment cap, the wrapper's
 * and the runner's definitions, and the line that starts it. */
int rx_render_runner_start(rx_buf *out, const char *rnonce, int max_rank);

/* The script for `rexec check`: the wrapper's functions and the probe, reporting with the same
 * status lines as a call (nonce as in rx_render_in). */
int rx_render_check_script(rx_buf *out, const char *nonce);

/* A fresh nonce: RX_NONCE_LEN random hex characters. The wrapper's status lines carry it, so
 * the command cannot forge them by accident. Returns 0, or -1 without randomness. */
int rx_nonce_new(char out[RX_NONCE_LEN + 1]);

/* The embedded fragments (generated from remote/ at build time). */
extern const unsigned char rx_remote_wrapper[];
extern const size_t rx_remote_wrapper_len;
extern const unsigned char rx_remote_check[];
extern const size_t rx_remote_check_len;
extern const unsigned char rx_remote_runner[];
extern const size_t rx_remote_runner_len;
/* A stdin of at least this many bytes (or framed) takes remote/copier.sh along (render.c). */
#define RX_RENDER_COPIER_MIN (16LL << 20)

extern const unsigned char rx_remote_copier[];
extern const size_t rx_remote_copier_len;
extern const unsigned char rx_remote_xfer[], rx_remote_put[], rx_remote_get[];
extern const size_t rx_remote_xfer_len, rx_remote_put_len, rx_remote_get_len;

#endif
