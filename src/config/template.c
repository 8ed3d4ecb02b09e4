/* Action templates and secret names, as the loader checks them (template.h). The renderer
 * (src/shell/render.c) expands templates with the same walker, so both read a template alike. */
#include <string.h>

#include "err.h"
#include "template.h"

/* Names that change how bash, the dynamic loader or the wrapper itself behave. */
static const char *const bad_names[] = {
    "ENV", "PATH", "IFS", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS", "CDPATH",
    "GLOBIGNORE", "HOME", "SHELL", "PROMPT_COMMAND", "TMPDIR", "HOSTALIASES", "LOCALDOMAIN",
    "RES_OPTIONS", "PWD", "OLDPWD", "SHLVL", "EUID", "UID", "PPID", "RANDOM", "SECONDS",
    "LINENO", "OPTIND", "OPTARG", "MAIL", "MAILPATH", "INPUTRC", "HISTFILE", "TIMEFORMAT",
    "EPOCHREALTIME", "EPOCHSECONDS", "SRANDOM", "FUNCNAME", "GROUPS", "HOSTNAME", "TERM",
    "_",
    /* These break the wrapper itself: TMOUT puts a timeout on its watchdog's `read` (the call
     * is cancelled after TMOUT seconds), FUNCNEST aborts its nested functions, EXECIGNORE hides
     * timeout/unshare/head from it, POSIXLY_CORRECT switches bash to POSIX mode. GLIBC_TUNABLES
     * and GCONV_PATH steer libc the way LD_* steer the loader. */
    "TMOUT", "FUNCNEST", "EXECIGNORE", "POSIXLY_CORRECT", "GLIBC_TUNABLES", "GCONV_PATH",
};
/* Whole families, not one name at a time: every interpreter's loader and option variables
 * (PERLLIB, PERL5OPT, PYTHONHOME, PYTHONPATH, RUBYLIB, RUBYOPT, NODE_PATH, NODE_OPTIONS, ...)
 * and the JVM's option variables, which load code into whatever the action runs. */
static const char *const bad_prefixes[] = {
    "BASH", "LD_", "DYLD_", "LC_", "__rx", "SSH_", "PERL", "PYTHON", "RUBY", "GEM_", "BUNDLE_",
    "NODE_", "NPM_CONFIG_", "LUA_", "PHP", "TCL", "GIT_", "MALLOC_", "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "NLSPATH", "LOCPATH", "GCONV_"};

int rx_secret_name_ok(const char *name, const char **why)
{
    const char *reason = NULL;
    size_t n = strlen(name);
    if (n == 0 || n > 128 || !(name[0] == '_' || ((name[0] | 32) >= 'a' && (name[0] | 32) <= 'z')))
        reason = "a name must match ^[A-Za-z_][A-Za-z0-9_]*$";
    for (size_t i = 0; reason == NULL && i < n; i++)
        if (!(name[i] == '_' || (name[i] >= '0' && name[i] <= '9') ||
              ((name[i] | 32) >= 'a' && (name[i] | 32) <= 'z')))
            reason = "a name must match ^[A-Za-z_][A-Za-z0-9_]*$";
    for (size_t i = 0; reason == NULL && i < sizeof(bad_names) / sizeof(*bad_names); i++)
        if (strcmp(name, bad_names[i]) == 0)
            reason = "this variable changes how the shell or the wrapper behaves";
    for (size_t i = 0; reason == NULL && i < sizeof(bad_prefixes) / sizeof(*bad_prefixes); i++)
        if (strncmp(name, bad_prefixes[i], strlen(bad_prefixes[i])) == 0)
            reason = "this prefix family is read by the shell, a loader, an interpreter or rexec";
    if (why)
        *why = reason;
    return reason == NULL;
}

/* Length of a placeholder name at p ("{name}" with p just after '{'), or 0 if none. */
static size_t placeholder_len(const char *p)
{
    size_t n = 0;
    if (!(p[0] == '_' || ((p[0] | 32) >= 'a' && (p[0] | 32) <= 'z')))
        return 0;
    while (p[n] == '_' || (p[n] >= '0' && p[n] <= '9') || ((p[n] | 32) >= 'a' && (p[n] | 32) <= 'z'))
        n++;
    return p[n] == '}' ? n : 0;
}

int rx_template_walk(const char *t, tmpl_text_fn text, tmpl_param_fn param, void *ctx)
{
    int r = 0;
    for (size_t i = 0; r == 0 && t[i];) {
        size_t n;
        if ((t[i] == '{' && t[i + 1] == '{') || (t[i] == '}' && t[i + 1] == '}')) {
            r = text(ctx, t + i, 1);
            i += 2;
        } else if (t[i] == '$' && t[i + 1] == '{') {
            r = text(ctx, t + i, 2); /* ${VAR} is the shell's, not ours */
            i += 2;
        } else if (t[i] == '{' && (n = placeholder_len(t + i + 1)) > 0) {
            r = param(ctx, t + i + 1, n);
            i += n + 2;
        } else {
            r = text(ctx, t + i, 1);
            i++;
        }
    }
    return r;
}

/* ---- where a placeholder stands (rx_template_context) ---------------------------------------- */

/* The shell contexts a rendered value ('...' quoted) would not survive as one literal word. */
enum { SH_SQ = 1, SH_DQ, SH_BQ, SH_CMD, SH_ARITH, SH_PARAM, SH_ANSI, SH_COMMENT, SH_HEREDOC };

static const char *const sh_names[] = {
    NULL, "inside single quotes", "inside double quotes", "inside backticks", "inside $(...)",
    "inside an arithmetic context", "inside ${...}", "inside $'...'", "inside a comment",
    "inside a heredoc"};

#define SH_DEPTH 32

typedef struct sh_lex {
    const char *t;        /* the template (for look-ahead and columns) */
    unsigned char st[SH_DEPTH];
    int depth[SH_DEPTH];  /* open parentheses / braces inside $( ), (( )), ${ } */
    int top;              /* st[top - 1] is the innermost context; 0: plain words */
    int esc;              /* the previous byte was an unquoted backslash */
    size_t skip;          /* bytes already consumed by look-ahead */
    char delim[64];       /* a heredoc's delimiter, once "<<" was seen on this line */
    int dash, pending;
    size_t bad_at;        /* offset of the first placeholder in a bad context */
    const char *why;
} sh_lex;

static void sh_push(sh_lex *l, int s)
{
    if (l->top < SH_DEPTH) {
        l->st[l->top] = (unsigned char)s;
        l->depth[l->top++] = 0;
    }
}

static int sh_cur(const sh_lex *l)
{
    return l->top ? l->st[l->top - 1] : 0;
}

/* "<<WORD" / "<<-'WORD'": remembers the delimiter; the body starts at the next newline. */
static void sh_heredoc(sh_lex *l, const char *p)
{
    size_t k = 0;
    l->dash = *p == '-';
    p += l->dash;
    while (*p == ' ' || *p == '\t')
        p++;
    for (; *p && !strchr(" \t\n;&|<>()", *p) && k + 1 < sizeof(l->delim); p++)
        if (*p != '\'' && *p != '"' && *p != '\\')
            l->delim[k++] = *p;
    l->delim[k] = 0;
    l->pending = k > 0;
}

/* At a newline inside a heredoc body: does the next line close it? */
static int sh_heredoc_ends(sh_lex *l, const char *nl)
{
    const char *p = nl + 1;
    size_t n = strlen(l->delim);
    while (l->dash && *p == '\t')
        p++;
    if (strncmp(p, l->delim, n) != 0 || (p[n] != '\n' && p[n] != 0))
        return 0;
    l->skip = (size_t)(p + n - nl - 1);
    return 1;
}

/* One byte of code outside quotes (plain words, $( ), (( )), ${ }, backticks). */
static void sh_code(sh_lex *l, const char *p, int s)
{
    char c = p[0], d = p[1];
    const char *prev = p > l->t ? p - 1 : NULL;
    if (c == '\\') {
        l->esc = 1;
    } else if (c == '\'') {
        sh_push(l, SH_SQ);
    } else if (c == '"') {
        sh_push(l, SH_DQ);
    } else if (c == '`') {
        if (s == SH_BQ)
            l->top--;
        else
            sh_push(l, SH_BQ);
    } else if (c == '$' && d == '(' && p[2] == '(') {
        sh_push(l, SH_ARITH), l->skip = 2;
    } else if (c == '$' && d == '(') {
        sh_push(l, SH_CMD), l->skip = 1;
    } else if (c == '$' && d == '[') {
        sh_push(l, SH_ARITH), l->skip = 1;
    } else if (c == '$' && d == '\'') {
        sh_push(l, SH_ANSI), l->skip = 1;
    } else if (c == '$' && d == '{') {
        sh_push(l, SH_PARAM), l->skip = 1;
    } else if (c == '(' && d == '(' && s != SH_ARITH) {
        sh_push(l, SH_ARITH), l->skip = 1;
    } else if (c == '(' || c == '[' || c == '{') {
        if (s)
            l->depth[l->top - 1]++;
    } else if ((c == ')' || c == ']' || c == '}') && s && l->depth[l->top - 1] > 0) {
        l->depth[l->top - 1]--;
    } else if (c == ')' && s == SH_CMD) {
        l->top--;
    } else if (c == ')' && s == SH_ARITH && d == ')') {
        l->top--, l->skip = 1;
    } else if (c == ']' && s == SH_ARITH) {
        l->top--;
    } else if (c == '}' && s == SH_PARAM) {
        l->top--;
    } else if (c == '#' && (prev == NULL || strchr(" \t\n;&|()", *prev))) {
        sh_push(l, SH_COMMENT);
    } else if (c == '<' && d == '<' && p[2] != '<' && (prev == NULL || *prev != '<')) {
        sh_heredoc(l, p + 2);
    } else if (c == '\n' && l->pending) {
        l->pending = 0;
        if (!sh_heredoc_ends(l, p))
            sh_push(l, SH_HEREDOC);
    }
}

static void sh_byte(sh_lex *l, const char *p)
{
    int s = sh_cur(l);
    if (l->skip) {
        l->skip--;
        return;
    }
    if (l->esc) { /* the escaped byte is literal (a backslash-newline joins lines) */
        l->esc = 0;
        return;
    }
    switch (s) {
    case SH_SQ:
        l->top -= *p == '\'';
        return;
    case SH_ANSI:
        if (*p == '\\')
            l->esc = 1;
        l->top -= *p == '\'';
        return;
    case SH_COMMENT:
        if (*p == '\n') {
            l->top--;
            sh_byte(l, p); /* the newline may start a heredoc body */
        }
        return;
    case SH_HEREDOC:
        if (*p == '\n' && sh_heredoc_ends(l, p))
            l->top--;
        return;
    case SH_DQ:
        if (*p == '"')
            l->top--;
        else if (*p == '\\')
            l->esc = 1;
        else if (*p == '`' || *p == '$')
            sh_code(l, p, s);
        return;
    default:
        sh_code(l, p, s);
    }
}

static int sh_text(void *ctx, const char *text, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sh_byte(ctx, text + i);
    return 0;
}

static int sh_param(void *ctx, const char *name, size_t n)
{
    sh_lex *l = ctx;
    int s = 0;
    (void)n;
    if (l->skip)
        l->skip = 0; /* look-ahead never spans a placeholder */
    /* ${x:-{v}} outside double quotes is a quoted word as well: only what encloses it counts */
    for (int i = l->top - 1; i >= 0 && s == 0; i--)
        s = l->st[i] == SH_PARAM ? 0 : l->st[i];
    if (s == 0 && !l->esc)
        return 0;
    l->bad_at = (size_t)(name - 1 - l->t);
    l->why = l->esc ? "right after a backslash" : sh_names[s];
    return 1;
}

int rx_template_context(const char *t, size_t *line, size_t *col, const char **why)
{
    sh_lex l = {.t = t};
    if (rx_template_walk(t, sh_text, sh_param, &l) == 0)
        return 0;
    size_t ln = 1, start = 0;
    for (size_t i = 0; i < l.bad_at; i++)
        if (t[i] == '\n')
            ln++, start = i + 1;
    *line = ln;
    *col = l.bad_at - start + 1;
    *why = l.why;
    return 1;
}
