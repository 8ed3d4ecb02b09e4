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

/* True when cmd is one simple command that `exec cmd` runs exactly as bash runs cmd: words of
 * plain characters, single-quoted strings and double-quoted strings without command
 * substitution, separated by blanks; no operator, redirection, newline, comment, assignment
 * or backslash; a first word that is a plain name and not a bash keyword or builtin.
 * Anything else (or anything this conservative reader is unsure of) is false: that command
 * is run as before, with a fork. */
bool rx_shell_oneshot(const char *cmd);

#endif
