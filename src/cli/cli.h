/* The rexec command line: a thin front end over the library (include/rexec.h) and a few
 * workspace-level modules (audit, approvals). One file a command: src/cli/cmd_<name>.c. */
#ifndef RX_CLI_H
#define RX_CLI_H

/* Options that apply to every command, before or after it (`rexec run ... -w DIR`). */
typedef struct cli_global {
    const char *workspace; /* --workspace, $REXEC_WORKSPACE, or "." */
    const char *socket;    /* --socket, $REXEC_SOCKET, or NULL */
    int no_progress;       /* --no-progress: no progress line on a terminal */
} cli_global;

/* Every command: argv[0] is the command name; returns the process exit code (docs/exit-codes.md). */
typedef int (*cli_cmd_fn)(const cli_global *g, int argc, char **argv);

int cli_run(const cli_global *g, int argc, char **argv);     /* run and eval */
int cli_check(const cli_global *g, int argc, char **argv);
int cli_hosts(const cli_global *g, int argc, char **argv);
int cli_actions(const cli_global *g, int argc, char **argv);
int cli_groups(const cli_global *g, int argc, char **argv);
int cli_audit(const cli_global *g, int argc, char **argv);   /* audit verify|show */
int cli_approve(const cli_global *g, int argc, char **argv);
int cli_deny(const cli_global *g, int argc, char **argv);
int cli_approvals(const cli_global *g, int argc, char **argv);
/* `approvals watch|web` (cmd_approvals_ui.c); argv[0] is "watch" or "web". */
int cli_approvals_ui(const cli_global *g, int argc, char **argv);
int cli_serve(const cli_global *g, int argc, char **argv);
int cli_evidence(const cli_global *g, int argc, char **argv); /* evidence prune */
int cli_complete(const cli_global *g, int argc, char **argv); /* hidden: bash completion */
int cli_interface(const cli_global *g, int argc, char **argv); /* hidden: the table as JSON */
/* `hosts import-ansible INVENTORY [--groups]` (cmd_import_ansible.c); argv[1] is the subcommand. */
int cli_import_ansible(int argc, char **argv);

/* Prints "rexec: <msg>\n" to stderr (and {"error", "exit_status"} on stdout with --json) and
 * returns code. msg goes through cli_redact first: a message may echo any argument. (In the
 * light front, front.c, an error before the request is sent hands the command to the full
 * program instead.) */
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* What cli_error prints, for a msg already redacted (print.c). */
void cli_error_show(int code, const char *msg, int json);

/* ---- the one redaction path (output.c; docs/redaction.md, "Messages") ------------------------
 * Every message the CLI prints and every field of its --json output passes through cli_redact:
 * with the loaded context's redactor (cli_redact_use), else with one built from the workspace's
 * rexec.json (cli_redact_workspace: loaded at the first use, every secret that resolves), else,
 * when the workspace does not load, the secret shapes only. */
void cli_redact_workspace(const char *dir);
/* The context whose redactor to use from now on; NULL before it is closed. */
struct rexec_ctx;
void cli_redact_use(const struct rexec_ctx *ctx);
/* From now on what is printed is rexec serve's replies, which serve redacted: cli_redact
 * passes them as they are (no workspace is loaded, no secret file read); output.c says why. */
void cli_redact_serve_replies(void);
/* s redacted: malloc'd, never NULL ("[REDACTED:UNAVAILABLE]" when memory runs out). */
char *cli_redact(const char *s);
/* 1 when the workspace's secrets are known to the redaction path (it loaded). */
int cli_redact_knows_secrets(void);
/* An argument the CLI echoes in a message: as it is when the workspace's secrets are known
 * (cli_error redacts it then); else, when it is long enough to be a secret (8 bytes or more,
 * docs/redaction.md "Minimum length"), "[NOT SHOWN]": nothing could say whether it is one. */
const char *cli_arg(const char *s);

/* stdin_spool.c: `--stdin PATH` ("-": rexec's own stdin) is a pipe, FIFO, socket or terminal,
 * which the call sends as it reads it. */
int cli_stdin_streams(const char *path);
/* ... or "-" redirected from a regular file: either way the call opens it by name. */
int cli_stdin_by_name(const char *path);
/* A fan-out's piped stdin, read once for every host: copied into an unlinked 0600 file in a
 * private directory under $TMPDIR, up to max bytes, a pause of at most pause_s; *path is then
 * "/proc/self/fd/N" (a regular file each call streams on its own). 0 or the exit code. */
int cli_stdin_spool(const char *path, unsigned long long max, double pause_s, char out[32]);

/* print.c and output.c: what a call prints, the same for direct and serve runs. */
#include <stddef.h>

#include "rexec.h"

/* A libuv call that failed with rc: "rexec: WHAT: <libuv's message>", exit 70; when no file
 * descriptor was left (UV_EMFILE, UV_ENFILE) "too many open files (RLIMIT_NOFILE is N): ...",
 * exit 71 (docs/exit-codes.md). */
int cli_uv_error(int rc, const char *what);
/* uv_loop_init, refused as cli_uv_error says (a loop that failed to initialise must not run). */
int cli_uv_loop_init(uv_loop_t *loop);
/* The " (too many open files: RLIMIT_NOFILE is N)" note for an errno-style message that names
 * EMFILE or ENFILE, else "". */
const char *cli_nofile_note(const char *msg);
/* The soft RLIMIT_NOFILE as text ("8", "unlimited") in buf. */
const char *cli_nofile_limit(char *buf, size_t n);
/* A library error: "rexec: <msg>" and its exit code (docs/exit-codes.md), or, when the message
 * names EMFILE/ENFILE, exit 71 with the RLIMIT_NOFILE it ran into. */
int cli_lib_error(const rexec_error *e);
/* Before a command opens anything: refused (exit 71, naming RLIMIT_NOFILE and the counts) when
 * fewer than need descriptors are free. Without it a command run under a tiny limit would fail
 * half-way (after an intent record, or inside libuv's own set-up). */
#define CLI_FDS_MAX 256
/* What each command needs free, measured under `ulimit -n` (tests/e2e/t_cli_nofile.sh) with a
 * margin: libuv's first loop alone takes 4 (its signal pipe, epoll, eventfd) and aborts the
 * process when it cannot have them; a call on one host then needs its connection, the audit
 * lock and log, head.json, the evidence files and the recorder's. */
#define CLI_FDS_RUN 18   /* run, eval, serve: one host (a fan-out: cmd_run.c, fit_parallel) */
#define CLI_FDS_CHECK 12
#define CLI_FDS_LIST 10  /* hosts, actions, groups */
#define CLI_FDS_AUDIT 4  /* audit verify, show, head, prune, recover */
/* A fan-out: each host's connection stays open (warm) until the run ends, each running call
 * holds its evidence directory and files (3), and an append of the recorder, the signal
 * watchers and the evidence commit need CLI_FDS_SPARE more at once. */
#define CLI_FDS_PER_CONN 1
#define CLI_FDS_PER_CALL 3
#define CLI_FDS_SPARE 6
/* Descriptors free now: RLIMIT_NOFILE's soft limit minus those open (LONG_MAX unlimited). */
long cli_fds_free(void);
int cli_fds_check(const char *what, int need);


typedef struct cli_prefixer {
    const char *host;
    char *partial[2];
    size_t len[2];
} cli_prefixer;

void cli_write_all(int fd, const void *p, size_t n);
void cli_prefix_write(cli_prefixer *p, int stream, const void *data, size_t len);
void cli_prefix_flush(cli_prefixer *p);
void cli_show_result(const rexec_result *res, int json, int eval);
/* Says, once a challenge was written by the caller's own user (directly, or by a serve running
 * as that user), that approvals are then only that user's discipline. */
void cli_note_one_user(void);

void cli_show_check(const rexec_check_result *r, int json);

/* The value of "--name VALUE" or "--name=VALUE" at argv[*i] (moving *i past VALUE); NULL when
 * argv[*i] is not --name, with *missing set when VALUE is absent. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *missing);

/* client.c: run, eval ("run"/"eval", req) and check ("check", req NULL) through a running
 * `rexec serve`; returns the exit status a direct call would have. */
int cli_client_call(const char *socket_path, const char *op, const rexec_request *req,
                    const char *targets, int json, int parallel);
/* The fan-out's controls (`run --batch ...`) for the next cli_client_call. */
void cli_client_fanout(const rexec_fanout_spec *spec);

/* rexec_ctx_new, and with $REXEC_DEBUG set, the context's log lines on stderr as
 * "rexec: debug: ..." (the library never reads the environment itself). */
int cli_ctx_new(rexec_ctx **out, uv_loop_t *loop, const char *workspace_dir, rexec_error *err);
/* rexec_ctx_close, after the redaction path has stopped using ctx's redactor. */
void cli_ctx_close(rexec_ctx *ctx);
/* A JSON text with every string (keys too) through cli_redact; malloc'd. */
char *cli_redact_json_text(const char *text);

/* sink.c: --output FILE. cli_sink_open makes the temporary file next to FILE (0, or the exit
 * code, 73 when it cannot be made, after saying why); while cli_sink_active, a call's stdout
 * goes to cli_sink_write (-1 once a write failed: stop the call); cli_sink_finish renames it onto
 * FILE when the call succeeded whole, else removes it (0, or 73 after saying why). */
int cli_sink_open(const char *path);
int cli_sink_active(void);
int cli_sink_write(const void *data, size_t len);
int cli_sink_finish(const rexec_result *res, int json);
/* A put's hash of what it sent (the result's put_sha256, kept by cli_sink_finish), for put's
 * closing line; NULL until a host's file went whole. */
const char *cli_put_sent_sha(void);
void cli_sink_abort(void);

/* cmd_put.c: `rexec put HOST ACTION LOCAL_FILE` and `rexec get HOST ACTION LOCAL_FILE`, calls
 * of a file action made through cli_run. */
int cli_put(const cli_global *g, int argc, char **argv);

/* Help text of a command (NULL for the overview); shared by `rexec help X` and `X --help`. */
const char *cli_help_text(const char *command);

#endif
