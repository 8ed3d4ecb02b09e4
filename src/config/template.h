/* Action templates ("systemctl restart {unit}") and secret names: the rules the loader checks and
 * the renderer relies on. Pure string functions; no I/O, no workspace types. */
#ifndef RX_TEMPLATE_H
#define RX_TEMPLATE_H

#include <stddef.h>

/* 1 when name is a valid shell variable name that is safe to export (not BASH_ENV, PATH, LD_*,
 * ...); 0 otherwise, with *why set to a static reason. */
int rx_secret_name_ok(const char *name, const char **why);

/* Called by rx_template_walk for literal text (n bytes at text) and for each placeholder {name}
 * (n bytes at name, without the braces). A non-zero return stops the walk and is returned. */
typedef int (*tmpl_text_fn)(void *ctx, const char *text, size_t n);
typedef int (*tmpl_param_fn)(void *ctx, const char *name, size_t n);

/* Walks template t once: {{ and }} are one literal brace, ${...} is the shell's, {name} is a
 * placeholder. The loader (checking) and the renderer (expanding) both read templates through
 * it, so they cannot disagree. Returns 0 or the first non-zero callback return. */
int rx_template_walk(const char *t, tmpl_text_fn text, tmpl_param_fn param, void *ctx);

/* Where each placeholder stands in the shell code around it. The renderer writes a value as one
 * single-quoted word, which holds only where a word can stand: not inside single or double quotes,
 * $'...', backticks, $(...), an arithmetic context ((( )), $(( )), $[ ]), a comment, a
 * heredoc body, nor right after a backslash. Returns 0 when every placeholder stands where a
 * word can, else 1 with the first offender's line and column (1-based) and the context in why. */
int rx_template_context(const char *t, size_t *line, size_t *col, const char **why);

#endif
