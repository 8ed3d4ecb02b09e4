/* One-shot commands: a command the runner's call shell can `exec` instead of forking.
 *
 * `bash -c 'uname -a'` (what sshd runs for `ssh host uname -a`) does not fork for its last
 * simple command: it execs it. A runner's call shell runs the command through `eval`, which
 * bash never optimizes that way, so each call paid a fork and a wait that ssh does not. The
 * renderer puts `exec ` in front of a command that is one simple command bash would exec the
 * same way (docs/remote-contract.md, "One process for a simple command"). */
#ifndef RX_ONESHOT_H
#define RX_ONESHOT_H

#include <stdbool.h>
#include <stddef.h>

/* True when cmd is one simple command that `exec cmd` runs exactly as bash runs cmd: words of
 * plain characters, single-quoted strings and double-quoted strings without command
 * substitution, separated by blanks; no operator, redirection, newline, comment, assignment
 * or backslash; a first word that is a plain name and not a bash keyword or builtin.
 * Anything else (or anything this conservative reader is unsure of) is false: that command
 * is run as before, with a fork. */
bool rx_shell_oneshot(const char *cmd);

/* Whether the call's code names the variable name (n bytes): a secret it exports. */
typedef bool (*rx_shell_bound_fn)(void *ud, const char *name, size_t n);

/* True when cmd is oneshot and may run in a fork of the runner's slot instead of a fresh bash
 * (remote/runner.sh, docs/remote-contract.md "Oneshot calls in a fork of the slot"): the fork
 * gives the command the same environment, descriptors and state, but bash's own variables
 * ($BASHPID, $PPID, $SHLVL, $BASH_SUBSHELL, $RANDOM, $SECONDS, $LINENO, $BASH_*, ...) and
 * whatever the slot's shell once set (REPLY, ...) could expand to other values there. So every
 * $NAME, ${NAME} and ${#NAME} in it must name a variable that both take from the environment
 * unchanged or that the code binds itself: a parameter (__rx_p_*), a secret the code exports
 * (bound says which), or HOME, USER, LOGNAME, PATH, LANG, TMPDIR. Anything else: false, and
 * the call runs in a fresh bash as before. */
bool rx_shell_slot_forkable(const char *cmd, rx_shell_bound_fn bound, void *ud);

#endif
