/* Where each placeholder of an action template stands, and what the renderer may write there
 * (template.h: rx_template_forms).
 *
 * Safety does not rest on this reader. The renderer never writes a value's text into the
 * script: a placeholder becomes an expansion of a variable that holds the value
 * ("${__rx_p_NAME}"), so bash takes the value as data wherever this reader is wrong about the
 * quoting around it. What this reader decides is only (1) whether the expansion is quoted
 * (inside "..." and heredoc bodies it already is) and (2) whether the template is refused:
 * bash evaluates an expansion's value as code in a few places (arithmetic, array subscripts,
 * names given to declare/read/printf -v/test -v, the arguments of eval/source/trap/let, the
 * string after bash -c, the command word), and there a placeholder is refused at load unless
 * its values cannot hold code (int, enum). Anything this reader cannot classify with certainty
 * (a backslash-newline, two heredocs on a line, a very long delimiter, nesting too deep) makes
 * every placeholder of the template refused, with the position of what it could not read. */
#include <stdlib.h>
#include <string.h>

#include "template.h"

enum { SH_SQ = 1, SH_DQ, SH_BQ, SH_CMD, SH_ARITH, SH_PARAM, SH_ANSI, SH_COMMENT, SH_HEREDOC,
       SH_HEREDOC_Q };

static const char *const sh_names[] = {
    NULL,
    "stands inside single quotes, where bash would not expand it",
    NULL,
    NULL,
    NULL,
    "stands in an arithmetic context, where bash evaluates a value as code (only an int "
    "parameter may stand there)",
    NULL,
    "stands inside $'...', where bash would not expand it",
    "stands in a comment",
    NULL,
    "stands in a heredoc whose delimiter is quoted, where bash would not expand it"};

#define SH_DEPTH 32
#define SH_MAX_PH 64 /* placeholders waiting for the end of their simple command */

/* What the words of one simple command said, for its placeholders. */
enum {
    D_EVAL = 1 << 0,     /* eval, source, ., trap, let, alias, ...: arguments run as code */
    D_NAMES = 1 << 1,    /* declare, read, unset, ...: arguments are names (subscripts run) */
    D_PRINTF = 1 << 2,   /* printf (with -v: a name) */
    D_OPT_V = 1 << 3,    /* a -v or -R word (printf -v, test -v, [[ -v ]]) */
    D_TEST = 1 << 4,     /* test or [ */
    D_DBRACKET = 1 << 5, /* [[ ... ]] */
    D_ARITHOP = 1 << 6,  /* -eq -ne -lt -le -gt -ge: operands evaluated as arithmetic in [[ ]] */
    D_SHELL = 1 << 7,    /* bash, sh, ... su: a -c argument is code */
    D_WAIT = 1 << 8,     /* wait (-p names a variable) */
};

typedef struct sh_ph {
    size_t at;           /* offset of the '{' */
    rx_tmpl_kind kind;
    unsigned cmd_pos : 1, after_c : 1, subscript : 1, assign : 1;
} sh_ph;

/* One code level (the template itself, $( ), <( ), backticks): its current simple command. */
typedef struct sh_cmd {
    int words;        /* words ended so far in this command */
    int cmd_seen;     /* its command word (not an assignment or reserved word) was seen */
    int in_word, plain, redir_next, redir_word, in_dbl; /* in_dbl: inside [[ ... ]] */
    char word[40];    /* the current word's literal text, when it is plain so far */
    size_t wlen;
    int prev_c;       /* the previous word was -c (or -lc, -ec, ...) */
    unsigned flags;
    int n_ph;
    sh_ph ph[SH_MAX_PH];
} sh_cmd;

typedef struct sh_lex {
    const char *t;
    tmpl_kind_fn kind_fn;
    void *ud;
    unsigned char st[SH_DEPTH];
    int depth[SH_DEPTH];
    size_t start[SH_DEPTH]; /* where each frame opened (a ${...}'s "${") */
    sh_cmd *cmd[SH_DEPTH + 1]; /* cmd[0]: the template's own level; others per code frame */
    int top, esc, pending, dash, quoted_delim, int_decl;
    size_t skip;
    char delim[64];
    /* the result */
    unsigned char *forms;
    size_t n_forms, cap_forms;
    size_t unsure_at, bad_at;
    const char *unsure, *why;
    int nomem;
} sh_lex;

/* ---- errors ---------------------------------------------------------------------------------- */

static void sh_bad(sh_lex *l, size_t at, const char *why)
{
    if (l->why == NULL) {
        l->why = why;
        l->bad_at = at;
    }
}

static void sh_unsure(sh_lex *l, size_t at, const char *why)
{
    if (l->unsure == NULL) {
        l->unsure = why;
        l->unsure_at = at;
    }
}

/* ---- frames ---------------------------------------------------------------------------------- */

static int sh_cur(const sh_lex *l)
{
    return l->top ? l->st[l->top - 1] : 0;
}

static int is_code_frame(int s)
{
    return s == 0 || s == SH_CMD || s == SH_BQ;
}

/* The command state of the innermost code level. */
static sh_cmd *sh_code_cmd(sh_lex *l)
{
    for (int i = l->top - 1; i >= 0; i--)
        if (is_code_frame(l->st[i]))
            return l->cmd[i + 1];
    return l->cmd[0];
}

static void cmd_end(sh_lex *l, sh_cmd *c);

static void sh_push(sh_lex *l, int s, size_t at)
{
    if (l->top >= SH_DEPTH) {
        sh_unsure(l, at, "nests quotes and substitutions too deeply");
        return;
    }
    if (is_code_frame(s)) {
        sh_cmd *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            l->nomem = 1;
            return;
        }
        l->cmd[l->top + 1] = c;
    }
    l->st[l->top] = (unsigned char)s;
    l->start[l->top] = at;
    l->depth[l->top++] = 0;
}

static void sh_pop(sh_lex *l)
{
    if (l->top == 0)
        return;
    l->top--;
    if (is_code_frame(l->st[l->top]) && l->cmd[l->top + 1]) {
        cmd_end(l, l->cmd[l->top + 1]);
        free(l->cmd[l->top + 1]);
        l->cmd[l->top + 1] = NULL;
    }
}

/* ---- words and simple commands ---------------------------------------------------------------- */

static int word_is(const sh_cmd *c, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(c->word, *list) == 0)
            return 1;
    return 0;
}

static const char *const w_reserved[] = {"!", "{", "}", "if", "then", "else", "elif", "fi", "do",
                                         "done", "while", "until", "time", "esac", NULL};
static const char *const w_eval[] = {"eval", "source", ".", "trap", "let", "alias", "bind",
                                     "complete", "compgen", "fc", "enable", "coproc", NULL};
static const char *const w_names[] = {"declare", "typeset", "local", "export", "readonly", "read",
                                      "mapfile", "readarray", "unset", "getopts", "shopt", NULL};
static const char *const w_shells[] = {"bash", "sh", "dash", "zsh", "ksh", "mksh", "busybox", "su",
                                       "runuser", NULL}; /* by the last path component */
static const char *const w_arithop[] = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge", NULL};

/* An assignment word so far: NAME= or NAME[...]= (then the rest is its value). */
static int word_is_assignment(const sh_cmd *c)
{
    size_t i = 0;
    if (c->wlen == 0 || !(c->word[0] == '_' || ((c->word[0] | 32) >= 'a' && (c->word[0] | 32) <= 'z')))
        return 0;
    while (i < c->wlen && (c->word[i] == '_' || (c->word[i] >= '0' && c->word[i] <= '9') ||
                           ((c->word[i] | 32) >= 'a' && (c->word[i] | 32) <= 'z')))
        i++;
    return i < c->wlen && (c->word[i] == '=' || c->word[i] == '[' ||
                           (c->word[i] == '+' && i + 1 < c->wlen && c->word[i + 1] == '='));
}

/* NAME[ with no ] yet: a placeholder here is an array subscript (bash evaluates it). */
static int word_in_subscript(const sh_cmd *c)
{
    const char *b = memchr(c->word, '[', c->wlen);
    return b != NULL && memchr(b, ']', c->wlen - (size_t)(b - c->word)) == NULL &&
           word_is_assignment(c);
}

static void word_end(sh_lex *l, sh_cmd *c)
{
    (void)l;
    if (!c->in_word)
        return;
    c->word[c->wlen < sizeof(c->word) ? c->wlen : sizeof(c->word) - 1] = 0;
    int plain = c->plain && c->wlen < sizeof(c->word);
    int was_c = 0;
    if (c->redir_word) {
        /* a redirection's target: not a command word */
    } else if (plain) {
        if (word_is(c, w_eval))
            c->flags |= D_EVAL;
        if (word_is(c, w_names))
            c->flags |= D_NAMES;
        const char *base = strrchr(c->word, '/');
        for (const char *const *w = w_shells; *w; w++)
            if (strcmp(base ? base + 1 : c->word, *w) == 0)
                c->flags |= D_SHELL;
        if (strcmp(c->word, "printf") == 0)
            c->flags |= D_PRINTF;
        if (strcmp(c->word, "wait") == 0)
            c->flags |= D_WAIT;
        if (strcmp(c->word, "test") == 0 || strcmp(c->word, "[") == 0)
            c->flags |= D_TEST;
        if (strcmp(c->word, "-v") == 0 || strcmp(c->word, "-R") == 0 ||
            strcmp(c->word, "-p") == 0)
            c->flags |= D_OPT_V;
        if (word_is(c, w_arithop))
            c->flags |= D_ARITHOP;
        if (c->word[0] == '-' && c->word[1] != '-' && c->wlen >= 2 && c->word[c->wlen - 1] == 'c')
            was_c = 1;
        /* declare -i x / local -ia ...: assignments to x evaluate their value as arithmetic */
        if ((c->flags & D_NAMES) && (c->word[0] == '-' || c->word[0] == '+') &&
            strchr(c->word, 'i') != NULL)
            l->int_decl = 1;
    }
    if (!c->cmd_seen && !c->redir_word) {
        if (plain && strcmp(c->word, "[[") == 0) {
            c->flags |= D_DBRACKET;
            c->in_dbl = 1;
            c->cmd_seen = 1;
        } else if (!(plain && word_is(c, w_reserved)) && !word_is_assignment(c)) {
            c->cmd_seen = 1;
        }
    }
    if (plain && c->in_dbl && strcmp(c->word, "]]") == 0)
        c->in_dbl = 0;
    c->prev_c = was_c;
    c->words++;
    c->in_word = 0;
    c->redir_word = 0;
    c->wlen = 0;
    c->plain = 1;
}

/* The reason a data placeholder of this command may not stand where it does, or NULL. */
static const char *ph_danger(const sh_lex *l, const sh_cmd *c, const sh_ph *p)
{
    if (p->cmd_pos)
        return "is the command word: the value would choose the program to run";
    if (p->subscript)
        return "stands in an array subscript, which bash evaluates as arithmetic";
    if (c->flags & D_EVAL)
        return "is an argument of eval, source, trap, let or a like builtin, which run their "
               "arguments as code";
    if (p->after_c && (c->flags & D_SHELL))
        return "follows -c of a shell: the value would run as code";
    if (c->flags & D_NAMES)
        return "is an argument of declare, read, unset or a like builtin, which take names "
               "(bash evaluates a name's subscript)";
    if ((c->flags & D_PRINTF) && (c->flags & D_OPT_V))
        return "stands in a printf -v command, whose -v takes a name";
    if ((c->flags & D_TEST) && (c->flags & D_OPT_V))
        return "stands in a test -v, which takes a name";
    if ((c->flags & D_WAIT) && (c->flags & D_OPT_V))
        return "stands in a wait -p, which takes a name";
    if ((c->flags & D_DBRACKET) && (c->flags & (D_ARITHOP | D_OPT_V)))
        return "stands in [[ ]] with -eq/-ne/-lt/-le/-gt/-ge or -v, which evaluate their "
               "operands as arithmetic or names";
    if (p->assign && l->int_decl)
        return "is assigned to a variable in a template that declares integer variables "
               "(declare -i), whose assignments bash evaluates as arithmetic";
    return NULL;
}

/* The simple command is over: its data placeholders are judged by all of its words. */
static void cmd_end(sh_lex *l, sh_cmd *c)
{
    word_end(l, c);
    for (int i = 0; i < c->n_ph; i++) {
        const sh_ph *p = &c->ph[i];
        const char *why = p->kind == RX_TK_DATA ? ph_danger(l, c, p) : NULL;
        if (why)
            sh_bad(l, p->at, why);
    }
    memset(c, 0, sizeof(*c));
    c->plain = 1;
}

static void word_add(sh_cmd *c, char ch, int plain)
{
    if (!c->in_word) {
        c->in_word = 1;
        c->plain = 1;
        c->wlen = 0;
    }
    if (!plain)
        c->plain = 0;
    if (c->wlen < sizeof(c->word) - 1)
        c->word[c->wlen] = ch;
    c->wlen++;
}

/* A byte at a code level that is not a quote or substitution opener. */
static void code_word_byte(sh_lex *l, sh_cmd *c, const char *p)
{
    char ch = *p;
    if (ch == ' ' || ch == '\t') {
        word_end(l, c);
    } else if (ch == '\n' || ch == ';' || ch == '&' || ch == '|' || ch == '(' || ch == ')') {
        if (c->in_dbl && ch != '\n' && ch != ';') {
            word_end(l, c); /* && || ( ) inside [[ ]] are its own operators */
            return;
        }
        cmd_end(l, c);
    } else if (ch == '<' || ch == '>') {
        word_end(l, c);
        c->redir_next = !c->in_dbl;
    } else {
        if (!c->in_word && c->redir_next) {
            c->redir_word = 1;
            c->redir_next = 0;
        }
        word_add(c, ch, 1);
    }
}

/* ---- heredocs ---------------------------------------------------------------------------------- */

/* "<<WORD" / "<<-'WORD'": remembers the delimiter; the body starts at the next newline. */
static void sh_heredoc(sh_lex *l, const char *p)
{
    size_t k = 0, at = (size_t)(p - l->t);
    if (l->pending)
        sh_unsure(l, at, "has two heredocs on one line");
    l->dash = *p == '-';
    p += l->dash;
    while (*p == ' ' || *p == '\t')
        p++;
    l->quoted_delim = 0;
    for (; *p && !strchr(" \t\n;&|<>()", *p); p++) {
        if (*p == '\'' || *p == '"' || *p == '\\') {
            l->quoted_delim = 1;
            continue;
        }
        if (*p == '$' || *p == '`' || *p == '{')
            sh_unsure(l, at, "has a heredoc delimiter with an expansion in it");
        if (k + 1 >= sizeof(l->delim)) {
            sh_unsure(l, at, "has a heredoc delimiter longer than 63 characters");
            break;
        }
        l->delim[k++] = *p;
    }
    l->delim[k] = 0;
    if (k == 0)
        sh_unsure(l, at, "has a heredoc operator without a plain delimiter");
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

/* ---- bytes ------------------------------------------------------------------------------------- */

/* '$' or '`' (in code, inside "..." and in an unquoted heredoc body): a substitution starts? */
static int sh_dollar(sh_lex *l, const char *p, int s, int in_code)
{
    char c = p[0], d = p[1];
    size_t at = (size_t)(p - l->t);
    if (c == '`') {
        if (s == SH_BQ)
            sh_pop(l);
        else
            sh_push(l, SH_BQ, at);
    } else if (c == '$' && d == '(' && p[2] == '(') {
        sh_push(l, SH_ARITH, at), l->skip = 2;
    } else if (c == '$' && d == '(') {
        sh_push(l, SH_CMD, at), l->skip = 1;
    } else if (c == '$' && d == '[') {
        sh_push(l, SH_ARITH, at), l->skip = 1;
    } else if (c == '$' && d == '{') {
        sh_push(l, SH_PARAM, at), l->skip = 1;
    } else if (in_code && c == '$' && d == '\'') {
        sh_push(l, SH_ANSI, at), l->skip = 1; /* only outside "...": there $' is two bytes */
    } else if (in_code && c == '$' && d == '"') {
        sh_push(l, SH_DQ, at), l->skip = 1;
    } else {
        return 0;
    }
    return 1;
}

static void sh_code(sh_lex *l, const char *p, int s)
{
    char c = p[0], d = p[1];
    const char *prev = p > l->t ? p - 1 : NULL;
    size_t at = (size_t)(p - l->t);
    sh_cmd *cmd = is_code_frame(s) ? sh_code_cmd(l) : NULL;
    if (c == '\\') {
        if (d == '\n')
            sh_unsure(l, at, "has a backslash-newline (a line continuation can join any token)");
        l->esc = 1;
        if (cmd)
            word_add(cmd, c, 0);
    } else if (c == '\'') {
        sh_push(l, SH_SQ, at);
        if (cmd)
            word_add(cmd, c, 0);
    } else if (c == '"') {
        sh_push(l, SH_DQ, at);
        if (cmd)
            word_add(cmd, c, 0);
    } else if ((c == '<' || c == '>') && d == '(' && cmd) {
        word_end(l, cmd);
        sh_push(l, SH_CMD, at), l->skip = 1; /* <(...) >(...): a command of its own */
        word_add(cmd, c, 0);
    } else if ((c == '$' || c == '`') && (cmd ? word_add(cmd, c, 0), 1 : 1) &&
               sh_dollar(l, p, s, 1)) {
        /* the substitution is part of the enclosing word (added first: a closing backtick
         * frees the inner command's state) */
    } else if (c == '(' && d == '(' && s != SH_ARITH && (cmd == NULL || !cmd->in_word)) {
        sh_push(l, SH_ARITH, at), l->skip = 1;
    } else if (!cmd && (c == '(' || c == '[' || c == '{') && s) {
        l->depth[l->top - 1]++;
    } else if ((c == ')' || c == ']' || c == '}') && s && s != SH_BQ && l->depth[l->top - 1] > 0) {
        l->depth[l->top - 1]--;
        if (cmd)
            code_word_byte(l, cmd, p);
    } else if (c == ')' && s == SH_CMD) {
        sh_pop(l);
    } else if (c == ')' && s == SH_ARITH && d == ')') {
        sh_pop(l), l->skip = 1;
    } else if (c == ']' && s == SH_ARITH) {
        sh_pop(l);
    } else if (c == '}' && s == SH_PARAM) {
        sh_pop(l);
    } else if (c == '#' && (prev == NULL || strchr(" \t\n;&|()", *prev))) {
        if (cmd)
            word_end(l, cmd);
        sh_push(l, SH_COMMENT, at);
    } else if (c == '<' && d == '<' && p[2] != '<' && (prev == NULL || *prev != '<')) {
        sh_heredoc(l, p + 2);
        if (cmd)
            word_end(l, cmd), cmd->redir_next = 1;
        l->skip = 1;
    } else if (c == '\n' && l->pending) {
        l->pending = 0;
        if (cmd)
            cmd_end(l, cmd);
        if (!sh_heredoc_ends(l, p))
            sh_push(l, l->quoted_delim ? SH_HEREDOC_Q : SH_HEREDOC, at);
    } else if (cmd) {
        if ((c == '(' || c == '{' || c == '[') && s)
            l->depth[l->top - 1]++;
        code_word_byte(l, cmd, p);
    } else if ((c == '(' || c == '[' || c == '{') && s) {
        l->depth[l->top - 1]++;
    }
}

static void sh_byte(sh_lex *l, const char *p)
{
    int s = sh_cur(l);
    if (l->skip) {
        l->skip--;
        return;
    }
    if (l->esc) { /* the escaped byte is literal */
        l->esc = 0;
        if (is_code_frame(s))
            word_add(sh_code_cmd(l), *p, 0);
        return;
    }
    switch (s) {
    case SH_SQ:
        if (*p == '\'')
            sh_pop(l);
        return;
    case SH_ANSI:
        if (*p == '\\')
            l->esc = 1;
        else if (*p == '\'')
            sh_pop(l);
        return;
    case SH_COMMENT:
        if (*p == '\n') {
            sh_pop(l);
            sh_byte(l, p); /* the newline ends the command, and may start a heredoc body */
        }
        return;
    case SH_HEREDOC_Q:
        if (*p == '\n' && sh_heredoc_ends(l, p))
            sh_pop(l);
        return;
    case SH_HEREDOC:
        if (*p == '\n' && sh_heredoc_ends(l, p))
            sh_pop(l);
        else if (*p == '\\')
            l->esc = 1;
        else if (*p == '$' || *p == '`')
            sh_dollar(l, p, s, 0);
        return;
    case SH_DQ:
        if (*p == '"')
            sh_pop(l);
        else if (*p == '\\') {
            if (p[1] == '\n')
                sh_unsure(l, (size_t)(p - l->t), "has a backslash-newline inside \"...\"");
            l->esc = 1;
        } else if (*p == '$' || *p == '`')
            sh_dollar(l, p, s, 0);
        return;
    default:
        sh_code(l, p, s);
    }
}

static int sh_text(void *ctx, const char *text, size_t n)
{
    sh_lex *l = ctx;
    for (size_t i = 0; i < n && !l->nomem; i++)
        sh_byte(l, text + i);
    return 0;
}

/* ---- placeholders ------------------------------------------------------------------------------ */

static int forms_add(sh_lex *l, rx_tmpl_form f)
{
    if (l->n_forms == l->cap_forms) {
        size_t cap = l->cap_forms ? l->cap_forms * 2 : 8;
        unsigned char *n = realloc(l->forms, cap);
        if (n == NULL) {
            l->nomem = 1;
            return -1;
        }
        l->forms = n;
        l->cap_forms = cap;
    }
    l->forms[l->n_forms++] = (unsigned char)f;
    return 0;
}

/* ${NAME<op>word}: a placeholder may stand in the word of these operators only (a default, an
 * alternative, a pattern to remove); a substring offset, a subscript, an indirection or a
 * replacement pattern is refused. start is the offset of the "${". */
static int param_word_ok(const sh_lex *l, size_t start, size_t at)
{
    const char *p = l->t + start + 2, *end = l->t + at;
    if (p < end && (*p == '#' || *p == '!'))
        return 0;
    if (p < end && (*p == '_' || ((*p | 32) >= 'a' && (*p | 32) <= 'z'))) {
        while (p < end && (*p == '_' || (*p >= '0' && *p <= '9') || ((*p | 32) >= 'a' && (*p | 32) <= 'z')))
            p++;
    } else if (p < end && (strchr("@*?$!-0123456789", *p) != NULL)) {
        p++;
    } else {
        return 0;
    }
    if (p < end && *p == ':')
        p++;
    return p < end && strchr("-+=?#%", *p) != NULL;
}

static int sh_param(void *ctx, const char *name, size_t n)
{
    sh_lex *l = ctx;
    size_t at = (size_t)(name - 1 - l->t);
    rx_tmpl_kind k = l->kind_fn(l->ud, name, n);
    int s = sh_cur(l);
    rx_tmpl_form form = RX_TF_QUOTED;
    if (l->skip)
        l->skip = 0; /* look-ahead never spans a placeholder */
    if (l->esc) {
        sh_bad(l, at, "stands right after a backslash");
        l->esc = 0;
    } else if (s == SH_SQ || s == SH_ANSI || s == SH_COMMENT || s == SH_HEREDOC_Q) {
        sh_bad(l, at, sh_names[s]);
    } else if (s == SH_ARITH) {
        if (k != RX_TK_INT)
            sh_bad(l, at, sh_names[SH_ARITH]);
        form = RX_TF_BARE;
    } else if (s == SH_DQ || s == SH_HEREDOC) {
        form = RX_TF_BARE; /* already inside quotes: no word splitting, no globbing */
    } else if (s == SH_PARAM) {
        if (k != RX_TK_INT && !param_word_ok(l, l->start[l->top - 1], at))
            sh_bad(l, at, "stands inside ${...} where it is not the word of a -, +, =, ?, # or "
                          "% operator (a substring offset, a subscript or an indirection is "
                          "evaluated as code)");
    } else {
        sh_cmd *c = sh_code_cmd(l);
        if (c->n_ph == SH_MAX_PH) {
            sh_bad(l, at, "is one placeholder too many in one simple command");
        } else {
            int at_cmd_pos = !c->cmd_seen && !c->redir_next && !c->redir_word &&
                             !(c->in_word && word_is_assignment(c));
            c->ph[c->n_ph++] = (sh_ph){.at = at, .kind = k, .cmd_pos = at_cmd_pos,
                                       .after_c = c->prev_c && !c->in_word,
                                       .subscript = c->in_word && word_in_subscript(c),
                                       .assign = c->in_word && word_is_assignment(c)};
        }
        if (!c->in_word && c->redir_next) {
            c->redir_word = 1;
            c->redir_next = 0;
        }
        word_add(c, '{', 0); /* the word holds an expansion: not a plain word any more */
    }
    if (k == RX_TK_SHELL)
        form = RX_TF_RAW;
    forms_add(l, form);
    return l->nomem;
}

/* ---- the whole template ------------------------------------------------------------------------ */

static void position(const char *t, size_t at, size_t *line, size_t *col)
{
    size_t ln = 1, start = 0;
    for (size_t i = 0; i < at && t[i]; i++)
        if (t[i] == '\n')
            ln++, start = i + 1;
    *line = ln;
    *col = at - start + 1;
}

int rx_template_forms(const char *t, tmpl_kind_fn kind, void *ud, unsigned char **forms,
                      size_t *n_forms, rx_tmpl_diag *d)
{
    sh_lex l = {.t = t, .kind_fn = kind, .ud = ud};
    sh_cmd top;
    memset(&top, 0, sizeof(top));
    top.plain = 1;
    l.cmd[0] = &top;
    *forms = NULL;
    *n_forms = 0;
    memset(d, 0, sizeof(*d));
    rx_template_walk(t, sh_text, sh_param, &l);
    size_t end = strlen(t);
    if (l.top > 0 && l.st[l.top - 1] != SH_COMMENT && l.st[l.top - 1] != SH_HEREDOC &&
        l.st[l.top - 1] != SH_HEREDOC_Q)
        sh_unsure(&l, l.start[l.top - 1], "opens a quote or substitution it does not close");
    while (l.top > 0)
        sh_pop(&l);
    cmd_end(&l, &top);
    if (l.nomem) {
        free(l.forms);
        return -1;
    }
    /* What this reader could not read may have misled it about everything after: that first. */
    if (l.unsure != NULL && l.n_forms > 0) {
        l.why = l.unsure;
        l.bad_at = l.unsure_at;
        d->unsure = 1;
    }
    if (l.why != NULL) {
        free(l.forms);
        position(t, l.bad_at < end ? l.bad_at : end, &d->line, &d->col);
        d->why = l.why;
        return 1;
    }
    *forms = l.forms;
    *n_forms = l.n_forms;
    return 0;
}
