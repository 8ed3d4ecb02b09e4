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

/* What a placeholder's values can be, for where it may stand: data (string, path, url, host,
 * cidr: anything the type's grammar lets through), an int (digits and a sign, grammar-checked),
 * an enum (one of the catalog's own fixed strings), or the shell type (inserted raw, L3). */
typedef enum rx_tmpl_kind { RX_TK_DATA = 0, RX_TK_INT, RX_TK_ENUM, RX_TK_SHELL } rx_tmpl_kind;
typedef rx_tmpl_kind (*tmpl_kind_fn)(void *ud, const char *name, size_t n);

/* How the renderer writes a placeholder: "${__rx_p_NAME}" (where a word stands), ${__rx_p_NAME}
 * (already inside "...", a heredoc body or arithmetic), or the value itself (shell type). */
typedef enum rx_tmpl_form { RX_TF_QUOTED = 0, RX_TF_BARE, RX_TF_RAW } rx_tmpl_form;

typedef struct rx_tmpl_diag {
    size_t line, col; /* 1-based: the placeholder refused, or what could not be read */
    const char *why;  /* static text: "stands inside single quotes, ..." */
    int unsure;       /* the template has a construct this reader cannot classify */
    int flow;         /* a value could flow (through a variable) to ref_line:ref_col */
    size_t ref_line, ref_col;
} rx_tmpl_diag;

/* Reads template t as bash would (template_ctx.c) and gives, for each placeholder in order, the
 * form the renderer writes (*forms, malloc'd, *n_forms entries; may be NULL when there are none).
 * Returns 0; 1 when a placeholder stands where bash would evaluate its value as code or would not
 * expand it, or the template has a construct this reader cannot classify (then *d says where and
 * why, and nothing is allocated); -1 when out of memory. kind(ud, name, n) says what the
 * placeholder's parameter holds. */
int rx_template_forms(const char *t, tmpl_kind_fn kind, void *ud, unsigned char **forms,
                      size_t *n_forms, rx_tmpl_diag *d);

/* The variable a placeholder's value is bound to on the VM: "__rx_p_" and the parameter's name. */
#define RX_TMPL_VAR_PREFIX "__rx_p_"

#endif
