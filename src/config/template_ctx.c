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
#include <stdint.h>
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
#define SH_MAX_NAMES 64 /* variables the flow analysis tracks (bitmasks of 64) */
#define SH_MAX_EDGES 256
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
    D_INTERP = 1 << 9,   /* the command word is an interpreter: python, perl, awk, sed, ... */
    D_RUNS = 1 << 10,    /* the command word runs its arguments as a command: env, xargs, ssh */
    D_FIND_EXEC = 1 << 11, /* find ... -exec / -execdir / -ok */
    D_READS = 1 << 12,   /* read, mapfile, readarray: their name operands take what is read */
    D_SET = 1 << 13,     /* set: set -- sets the positional parameters */
    D_FOR = 1 << 14,     /* for NAME in ...: the next word names the variable */
};

typedef struct sh_ph {
    size_t at;           /* offset of the '{' */
    rx_tmpl_kind kind;
    int word;            /* the index of its word in the command */
    unsigned cmd_pos : 1, after_c : 1, after_e : 1, after_v : 1, subscript : 1, assign : 1,
        redir_in : 1, first_arg : 1, embedded : 1;
} sh_ph;

/* One code level (the template itself, $( ), <( ), backticks): its current simple command. */
typedef struct sh_cmd {
    int words;        /* words ended so far in this command */
    int cmd_seen;     /* its command word (not an assignment or reserved word) was seen */
    int in_word, plain, redir_next, redir_word, in_dbl; /* in_dbl: inside [[ ... ]] */
    char word[40];    /* the current word's literal text, when it is plain so far */
    size_t wlen;
    int prev_c;       /* the previous word was -c (or -lc, -ec, ...) */
    int prev_e;       /* the previous word gives an interpreter code: -e, -c, --eval, ... */
    int prev_v;       /* the previous word is -v, -R or -p (a name follows) */
    int in_array;     /* inside NAME=( ... ): array elements */
    int args;         /* words after the command word that are not options */
    int word_other;   /* the current word holds something besides a placeholder and quotes */
    int redir_in;     /* the pending redirection reads (<, <<<) */
    int wrapper_skip; /* words a wrapper (nohup, timeout 5, sudo) puts before its command */
    int pipe_out;     /* the command ends with | */
    size_t start_at;  /* where its first word began */
    size_t word_at;   /* where the current word began */
    size_t let_at;    /* a let word (offset + 1) */
    unsigned flags;
    int int_flag;     /* declare/local/typeset with -i: its names are integers */
    /* flow: the variables the current word and the whole command read, and whether a data
     * placeholder is in them (at any depth) */
    uint64_t word_refs, cmd_refs, idents;
    int word_data, cmd_data;
    int for_target;   /* a for command: the name id of its variable, + 1 */
    int n_ph;
    sh_ph ph[SH_MAX_PH];
    /* placeholders of earlier commands of this pipeline, which feed this one's stdin */
    int n_pipe;
    size_t pipe_at[SH_MAX_PH];
} sh_cmd;

typedef struct sh_lex {
    const char *t;
    tmpl_kind_fn kind_fn;
    void *ud;
    unsigned char st[SH_DEPTH];
    int depth[SH_DEPTH];
    size_t start[SH_DEPTH]; /* where each frame opened (a ${...}'s "${") */
    sh_cmd *cmd[SH_DEPTH + 1]; /* cmd[0]: the template's own level; others per code frame */
    int top, esc, pending, dash, quoted_delim;
    unsigned hd_flags;   /* what the commands of a heredoc's line are (its body feeds them) */
    /* flow: variables by id; a value assigned from what holds data or a tainted variable taints
     * its target; a variable read as arithmetic or as a name (arith_at) must not be tainted */
    char names[SH_MAX_NAMES][32];
    int n_names;
    size_t arith_at[SH_MAX_NAMES]; /* where it is first read that way, + 1 */
    struct { int target, data; uint64_t srcs; } edges[SH_MAX_EDGES];
    int n_edges, has_function;
    int n_data;          /* data placeholders seen */
    size_t pos;          /* the byte being read */
    size_t first_data_at;
    size_t skip;
    char delim[64];
    /* the result */
    unsigned char *forms;
    size_t n_forms, cap_forms;
    size_t unsure_at, bad_at;
    const char *unsure, *why;
    int nomem;
} sh_lex;

static int is_ident_start(char c)
{
    return c == '_' || ((c | 32) >= 'a' && (c | 32) <= 'z');
}

static int is_ident_char(char c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

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
static int flow_id(sh_lex *l, const char *name, size_t n);
static int ref_at(sh_lex *l, const char *p);
static void flow_ref(sh_lex *l, int id, size_t at);
static void flow_arith(sh_lex *l, int id, size_t at);
static void flow_edge(sh_lex *l, int target, uint64_t srcs, int data);
static void flow_arith_text(sh_lex *l, const char *text, size_t n, size_t at);

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
/* Programs whose arguments include code of their own language, or a script to run. */
static const char *const w_interp[] = {
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "luajit",
    "awk", "gawk", "mawk", "nawk", "busybox", "sed", "tclsh", "wish", "expect", "Rscript", "R",
    "julia", "pwsh", "osascript", "deno", "bun", "irb", "guile", "racket", "gdb", "jshell",
    "groovy", "scala", "swift", "vim", "vi", "nvim", "emacs", "ed", "ex", "m4", "make", NULL};
/* Programs that run their arguments (or stdin's words) as a command. */
static const char *const w_runs[] = {"env", "xargs", "watch", "ssh", "parallel", "script",
                                     "nsenter", "chroot", "run-parts", "dbus-send", NULL};
/* Prefixes that run the command that follows them: the command word is the next non-option
 * word (after their own operand, for those that take one). */
static const char *const w_wrappers[] = {"nohup", "sudo", "doas", "exec", "command", "builtin",
                                         "nice", "ionice", "setsid", "stdbuf", "strace", "ltrace",
                                         "taskset", "chrt", "unshare", "time", "caffeinate",
                                         "unbuffer", "fakeroot", "eatmydata", NULL};
static const char *const w_wrappers1[] = {"timeout", "flock", NULL}; /* one operand first */

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

static int base_is(const char *word, const char *const *list)
{
    const char *b = strrchr(word, '/');
    b = b ? b + 1 : word;
    for (; *list; list++)
        if (strcmp(b, *list) == 0 ||
            (strncmp(b, *list, strlen(*list)) == 0 && strspn(b + strlen(*list), "0123456789.") ==
                                                          strlen(b + strlen(*list))))
            return 1; /* python3.11, perl5.36 */
    return 0;
}

/* An option word: -x, --long (a lone - is stdin, an operand). */
static int is_option(const sh_cmd *c)
{
    return c->wlen > 1 && c->word[0] == '-';
}

static int code_option(const sh_cmd *c)
{
    static const char *const opts[] = {"--eval", "--command", "--expression", "--exec", "-ex",
                                       "--execute", "--script", "-E", "-r", "--run", NULL};
    return (c->word[0] == '-' && c->word[1] != '-' && c->wlen >= 2 &&
            (c->word[c->wlen - 1] == 'c' || c->word[c->wlen - 1] == 'e')) ||
           word_is(c, opts);
}

/* The placeholders in the word that just ended: was there more to the word than them? */
static void word_mark_embedded(sh_cmd *c)
{
    for (int i = c->n_ph - 1; i >= 0 && c->ph[i].word == c->words; i--)
        if (c->word_other)
            c->ph[i].embedded = 1;
}

/* A plain argument word's meaning for the command. */
static void word_flags(sh_cmd *c)
{
    if (strcmp(c->word, "-v") == 0 || strcmp(c->word, "-R") == 0 || strcmp(c->word, "-p") == 0)
        c->flags |= D_OPT_V;
    if (word_is(c, w_arithop))
        c->flags |= D_ARITHOP;
    if (strcmp(c->word, "-exec") == 0 || strcmp(c->word, "-execdir") == 0 ||
        strcmp(c->word, "-ok") == 0 || strcmp(c->word, "-okdir") == 0)
        c->flags |= D_FIND_EXEC;
    /* declare -i x / local -ia ...: assignments to x evaluate their value as arithmetic */
    if ((c->flags & D_NAMES) && (c->word[0] == '-' || c->word[0] == '+') && strchr(c->word, 'i'))
        c->int_flag = 1; /* its names' assignments are evaluated as arithmetic */
}

/* The command word (or, after a wrapper, the command it runs): what kind of program runs. */
static void command_word(sh_lex *l, sh_cmd *c, int plain)
{
    if (!plain) {
        c->cmd_seen = 1; /* an expansion or quoted word: judged by its placeholders */
        return;
    }
    if (base_is(c->word, w_wrappers) || base_is(c->word, w_wrappers1)) {
        c->wrapper_skip = base_is(c->word, w_wrappers1) ? 1 : 0;
        return; /* the next non-option word is the command */
    }
    if (c->wrapper_skip > 0 && !is_option(c)) {
        c->wrapper_skip--;
        return;
    }
    if (is_option(c) || (c->wlen > 0 && strchr(c->word, '=') && !word_is_assignment(c)))
        return; /* sudo -u x, env-style settings after a wrapper */
    c->cmd_seen = 1;
    if (strcmp(c->word, "function") == 0)
        l->has_function = 1;
    if (word_is(c, w_eval))
        c->flags |= D_EVAL;
    if (strcmp(c->word, "let") == 0)
        c->let_at = c->word_at + 1;
    if (word_is(c, w_names))
        c->flags |= D_NAMES;
    if (strcmp(c->word, "read") == 0 || strcmp(c->word, "mapfile") == 0 ||
        strcmp(c->word, "readarray") == 0)
        c->flags |= D_READS;
    if (strcmp(c->word, "set") == 0)
        c->flags |= D_SET;
    if (strcmp(c->word, "for") == 0 || strcmp(c->word, "select") == 0)
        c->flags |= D_FOR;
    if (strcmp(c->word, "printf") == 0)
        c->flags |= D_PRINTF;
    if (strcmp(c->word, "wait") == 0)
        c->flags |= D_WAIT;
    if (strcmp(c->word, "test") == 0 || strcmp(c->word, "[") == 0)
        c->flags |= D_TEST;
    if (base_is(c->word, w_shells))
        c->flags |= D_SHELL;
    if (base_is(c->word, w_interp))
        c->flags |= D_INTERP;
    if (base_is(c->word, w_runs))
        c->flags |= D_RUNS;
}

/* A word ends: what it reads goes to the command; an assignment's target takes what the value
 * reads (and data); the names some commands take are noted. */
static void word_flow(sh_lex *l, sh_cmd *c, int plain, int was_cmd)
{
    size_t n = 0;
    while (n < c->wlen && n < sizeof(c->word) && is_ident_char(c->word[n]))
        n++;
    int ident = plain && n == c->wlen && n > 0 && is_ident_start(c->word[0]);
    if (word_is_assignment(c) && n > 0 && !c->redir_word) {
        int id = flow_id(l, c->word, n);
        flow_edge(l, id, c->word_refs, c->word_data);
        if (c->int_flag)
            flow_arith(l, id, c->word_at);
    } else if (ident && was_cmd && (c->flags & D_FOR) && c->args == 1) {
        c->for_target = flow_id(l, c->word, n) + 1;
    } else if (ident && was_cmd && (c->flags & (D_DBRACKET | D_READS))) {
        int id = flow_id(l, c->word, n);
        if (id >= 0)
            c->idents |= (uint64_t)1 << id;
    } else if (ident && was_cmd && c->int_flag) {
        flow_arith(l, flow_id(l, c->word, n), c->word_at); /* declare -i x */
    }
    if (plain && was_cmd && c->let_at)
        flow_arith_text(l, c->word, c->wlen < sizeof(c->word) ? c->wlen : 0, c->word_at);
    c->cmd_refs |= c->word_refs;
    c->cmd_data |= c->word_data;
    c->word_refs = 0;
    c->word_data = 0;
}

static void word_end(sh_lex *l, sh_cmd *c)
{
    if (!c->in_word)
        return;
    c->word[c->wlen < sizeof(c->word) ? c->wlen : sizeof(c->word) - 1] = 0;
    int plain = c->plain && c->wlen < sizeof(c->word);
    int was_c = 0, was_e = 0, was_v = 0, was_cmd = c->cmd_seen;
    word_mark_embedded(c);
    if (c->redir_word) {
        /* a redirection's target: not a command word */
    } else if (plain) {
        word_flags(c);
        if (c->word[0] == '-' && c->word[1] != '-' && c->wlen >= 2 && c->word[c->wlen - 1] == 'c')
            was_c = 1;
        was_e = code_option(c);
        was_v = strcmp(c->word, "-v") == 0 || strcmp(c->word, "-R") == 0 ||
                strcmp(c->word, "-p") == 0;
    }
    if (c->in_array) {
        /* an element of NAME=( ... ) */
    } else if (!c->cmd_seen && !c->redir_word) {
        if (plain && strcmp(c->word, "[[") == 0) {
            c->flags |= D_DBRACKET;
            c->in_dbl = 1;
            c->cmd_seen = 1;
        } else if (!(plain && word_is(c, w_reserved)) && !word_is_assignment(c)) {
            command_word(l, c, plain);
        }
    } else if (was_cmd && !c->redir_word && !(plain && is_option(c))) {
        c->args++;
    }
    word_flow(l, c, plain, was_cmd);
    if (plain && c->in_dbl && strcmp(c->word, "]]") == 0)
        c->in_dbl = 0;
    c->prev_c = was_c;
    c->prev_e = was_e;
    c->prev_v = was_v;
    c->words++;
    c->in_word = 0;
    c->redir_word = 0;
    c->wlen = 0;
    c->plain = 1;
    c->word_other = 0;
}

/* The reason a data placeholder of this command may not stand where it does, or NULL. */
static const char *ph_danger(const sh_cmd *c, const sh_ph *p)
{
    if (p->cmd_pos)
        return "is the command word: the value would choose the program to run";
    if (p->subscript)
        return "stands in an array subscript, which bash evaluates as arithmetic";
    if (c->flags & D_EVAL)
        return "is an argument of eval, source, trap, let or a like builtin, which run their "
               "arguments as code";
    if ((c->flags & D_SHELL) && (p->after_c || p->first_arg || p->redir_in))
        return "is given to a shell as its script (after -c, as its script file, or on its "
               "stdin): the value would run as code";
    if ((c->flags & D_INTERP) && (p->after_e || p->first_arg || p->embedded || p->redir_in))
        return "is given to an interpreter (python, perl, awk, sed, ...) as part of its program "
               "or script: the value would run as code";
    if (c->flags & (D_RUNS | D_FIND_EXEC))
        return "is an argument of a program that runs its arguments as a command (env, xargs, "
               "ssh, watch, find -exec, ...)";
    if ((c->flags & D_NAMES) && !p->assign && !p->redir_in)
        return "is an argument of declare, read, unset or a like builtin, which take names "
               "(bash evaluates a name's subscript); NAME={v} is fine";
    if ((c->flags & D_PRINTF) && p->after_v)
        return "follows printf -v, which takes a name";
    if ((c->flags & D_TEST) && p->after_v)
        return "follows test -v, which takes a name";
    if ((c->flags & D_WAIT) && p->after_v)
        return "follows wait -p, which takes a name";
    if ((c->flags & D_DBRACKET) && (c->flags & (D_ARITHOP | D_OPT_V)))
        return "stands in [[ ]] with -eq/-ne/-lt/-le/-gt/-ge or -v, which evaluate their "
               "operands as arithmetic or names";
    return NULL;
}

/* What the command's words say about the flow of values, once all of them are read. */
static void cmd_flow(sh_lex *l, sh_cmd *c)
{
    uint64_t read_as_arith = 0;
    if ((c->flags & D_DBRACKET) && (c->flags & (D_ARITHOP | D_OPT_V)))
        read_as_arith = c->cmd_refs | c->idents; /* [[ x -eq $y ]], [[ -v x ]] */
    if (c->let_at)
        read_as_arith = c->cmd_refs;
    for (int i = 0; i < l->n_names; i++)
        if (read_as_arith >> i & 1)
            flow_arith(l, i, c->let_at ? c->let_at - 1 : c->start_at);
    if (c->for_target) /* for x in WORDS: x takes each word */
        flow_edge(l, c->for_target - 1, c->cmd_refs, c->cmd_data);
    if (c->flags & D_READS) /* read x <<< {v}, mapfile a < file: the names take what is read */
        for (int i = 0; i < l->n_names; i++)
            if (c->idents >> i & 1)
                flow_edge(l, i, c->cmd_refs, c->cmd_data);
    if (c->flags & D_SET) /* set -- WORDS: the positional parameters */
        flow_edge(l, flow_id(l, "@", 1), c->cmd_refs, c->cmd_data);
}

static const char *const pipe_why =
    "is written into a pipe read by a shell or an interpreter, which runs what it reads";

/* The simple command is over: its data placeholders are judged by all of its words, and the
 * ones of the earlier commands of its pipeline by what this one is. */
static void cmd_end(sh_lex *l, sh_cmd *c)
{
    word_end(l, c);
    int feeds_code = (c->flags & (D_SHELL | D_INTERP | D_EVAL | D_RUNS)) != 0;
    for (int i = 0; i < c->n_pipe; i++)
        if (feeds_code)
            sh_bad(l, c->pipe_at[i], pipe_why);
    for (int i = 0; i < c->n_ph; i++) {
        const sh_ph *p = &c->ph[i];
        const char *why = p->kind == RX_TK_DATA ? ph_danger(c, p) : NULL;
        if (why)
            sh_bad(l, p->at, why);
    }
    if (l->pending)
        l->hd_flags |= c->flags; /* this line's heredoc feeds these commands */
    cmd_flow(l, c);
    /* the next command of the pipeline reads what this one writes */
    size_t carry[SH_MAX_PH];
    int n = 0;
    if (c->pipe_out) {
        for (int i = 0; i < c->n_pipe && n < SH_MAX_PH; i++)
            carry[n++] = c->pipe_at[i];
        for (int i = 0; i < c->n_ph && n < SH_MAX_PH; i++)
            if (c->ph[i].kind == RX_TK_DATA)
                carry[n++] = c->ph[i].at;
    }
    memset(c, 0, sizeof(*c));
    c->plain = 1;
    memcpy(c->pipe_at, carry, (size_t)n * sizeof(*carry));
    c->n_pipe = n;
}

static void word_add(sh_lex *l, sh_cmd *c, char ch, int plain)
{
    if (!c->in_word) {
        c->word_at = l->pos;
        if (c->words == 0)
            c->start_at = l->pos;
        c->in_word = 1;
        c->plain = 1;
        c->wlen = 0;
        c->word_other = 0;
    }
    if (ch != '"' && ch != '\'' && !(ch == '{' && !plain))
        c->word_other = 1;
    if (!plain)
        c->plain = 0;
    if (c->wlen < sizeof(c->word) - 1)
        c->word[c->wlen] = ch;
    c->wlen++;
}

/* A byte at a code level that is not a quote or substitution opener. */
static void code_word_byte(sh_lex *l, sh_cmd *c, const char *p)
{
    char ch = *p, prev = p > l->t ? p[-1] : 0, next = p[1];
    if (ch == ' ' || ch == '\t') {
        word_end(l, c);
    } else if (ch == '&' && (prev == '>' || prev == '<' || next == '>')) {
        word_end(l, c); /* >&2, <&0, &>file: a redirection, not a separator */
        c->redir_next = !c->in_dbl;
    } else if (ch == '\n' || ch == ';' || ch == '&' || ch == '|' || ch == '(' || ch == ')') {
        if (c->in_dbl && ch != '\n' && ch != ';') {
            word_end(l, c); /* && || ( ) inside [[ ]] are its own operators */
            return;
        }
        if (ch == '(' && next == ')' && c->in_word && !c->cmd_seen)
            l->has_function = 1; /* name() { ...; }: its $1.. are any call's arguments */
        if (ch == '(' && c->in_word && c->wlen > 0 && c->word[c->wlen - 1 < sizeof(c->word) ? c->wlen - 1 : 0] == '=' &&
            word_is_assignment(c)) {
            word_end(l, c); /* NAME=( elements ): an array's values, not a subshell */
            c->in_array = 1;
            return;
        }
        if (ch == ')' && c->in_array) {
            word_end(l, c);
            c->in_array = 0;
            return;
        }
        if (ch == '|' && next != '|' && prev != '|')
            c->pipe_out = 1; /* | or |&: the next command reads this one's output */
        cmd_end(l, c);
    } else if (ch == '<' || ch == '>') {
        word_end(l, c);
        c->redir_next = !c->in_dbl;
        c->redir_in = ch == '<';
    } else {
        if (!c->in_word && c->redir_next) {
            c->redir_word = 1;
            c->redir_next = 0;
        }
        word_add(l, c, ch, 1);
    }
}

/* ---- heredocs ---------------------------------------------------------------------------------- */

/* "<<WORD" / "<<-'WORD'": remembers the delimiter; the body starts at the next newline. */
static void sh_heredoc(sh_lex *l, const char *p)
{
    size_t k = 0, at = (size_t)(p - l->t);
    if (l->pending)
        sh_unsure(l, at, "has two heredocs on one line");
    l->hd_flags = 0; /* from here to the line's end: the commands its body feeds */
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
    if (c == '$' && d == '{')
        flow_ref(l, ref_at(l, p + 2), at);
    else if (c == '$' && (is_ident_start(d) || (d >= '0' && d <= '9') || d == '@' || d == '*'))
        flow_ref(l, ref_at(l, p + 1), at);
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

/* ---- flow: can a value reach what bash evaluates? ---------------------------------------------- */

/* The id of variable name[0..n) ("@" for the positional parameters), or -1 (table full: then
 * the template is not read with certainty). */
static int flow_id(sh_lex *l, const char *name, size_t n)
{
    if (n == 0 || n >= sizeof(l->names[0]))
        return -1;
    for (int i = 0; i < l->n_names; i++)
        if (strncmp(l->names[i], name, n) == 0 && l->names[i][n] == 0)
            return i;
    if (l->n_names == SH_MAX_NAMES) {
        sh_unsure(l, l->pos, "uses more variables than rexec follows (64)");
        return -1;
    }
    memcpy(l->names[l->n_names], name, n);
    l->names[l->n_names][n] = 0;
    return l->n_names++;
}

/* Variable id is read as arithmetic or as a name at offset at. */
static void flow_arith(sh_lex *l, int id, size_t at)
{
    if (id >= 0 && l->arith_at[id] == 0)
        l->arith_at[id] = at + 1;
}

static void flow_edge(sh_lex *l, int target, uint64_t srcs, int data)
{
    if (target < 0 || (srcs == 0 && !data))
        return;
    if (l->n_edges == SH_MAX_EDGES) {
        sh_unsure(l, l->pos, "has more assignments than rexec follows");
        return;
    }
    l->edges[l->n_edges].target = target;
    l->edges[l->n_edges].srcs = srcs;
    l->edges[l->n_edges++].data = data;
}

/* $NAME, ${NAME...}, $1, $@ at p (just after the '$' or "${"): the variable it reads, or -1. */
static int ref_at(sh_lex *l, const char *p)
{
    size_t n = 0;
    if (*p == '#' || *p == '!')
        p++; /* ${#x}, ${!x} (indirection: judged in param_close) */
    if ((*p >= '0' && *p <= '9') || *p == '@' || *p == '*')
        return flow_id(l, "@", 1);
    while (is_ident_char(p[n]))
        n++;
    return n && is_ident_start(*p) ? flow_id(l, p, n) : -1;
}

/* A reference to variable id: the current word of every enclosing command reads it (the word
 * holds it, or a substitution or quotes that are part of the word do); inside an arithmetic
 * context it is read as arithmetic. */
static void flow_ref(sh_lex *l, int id, size_t at)
{
    if (id < 0)
        return;
    for (int i = l->top; i >= 0; i--) {
        int s = i > 0 ? l->st[i - 1] : 0;
        if (s == SH_ARITH)
            flow_arith(l, id, at);
        if (i == 0 || is_code_frame(s))
            l->cmd[i]->word_refs |= (uint64_t)1 << id;
    }
}

/* Every identifier in text[0..n) is read as arithmetic (let's arguments, [[ -eq ]]'s words). */
static void flow_arith_text(sh_lex *l, const char *text, size_t n, size_t at)
{
    for (size_t i = 0; i < n;) {
        if (is_ident_start(text[i]) && (i == 0 || !is_ident_char(text[i - 1]))) {
            size_t k = i;
            while (k < n && is_ident_char(text[k]))
                k++;
            flow_arith(l, flow_id(l, text + i, k - i), at);
            i = k;
        } else {
            i++;
        }
    }
}

/* The end: which variables a data placeholder's value may reach (a fixpoint over the
 * assignments), and whether one of them is read as arithmetic or as a name. Returns the
 * earliest such read (+ 1), or 0. */
static size_t flow_judge(sh_lex *l)
{
    uint64_t tainted = 0, before;
    if (l->has_function) { /* a function's $1.. may be any argument of any call of it */
        int at = flow_id(l, "@", 1);
        if (at >= 0 && l->n_data > 0)
            tainted |= (uint64_t)1 << at;
    }
    do {
        before = tainted;
        for (int i = 0; i < l->n_edges; i++)
            if (l->edges[i].data || (l->edges[i].srcs & tainted))
                tainted |= (uint64_t)1 << l->edges[i].target;
    } while (tainted != before);
    size_t first = 0;
    for (int i = 0; i < l->n_names; i++)
        if ((tainted >> i & 1) && l->arith_at[i] && (first == 0 || l->arith_at[i] < first))
            first = l->arith_at[i];
    return first;
}

/* A ${...} closes at end: an offset or a subscript reads the variables in it as arithmetic;
 * ${!x} reads x as a name. */
static void param_close(sh_lex *l, size_t start, size_t end)
{
    const char *p = l->t + start + 2, *e = l->t + end;
    if (p < e && *p == '!') {
        size_t n = 0;
        while (p + 1 + n < e && is_ident_char(p[1 + n]))
            n++;
        flow_arith(l, flow_id(l, p + 1, n), start);
        return;
    }
    while (p < e && is_ident_char(*p))
        p++;
    if (p < e && (*p == '[' || (*p == ':' && p + 1 < e && !strchr("-+=?", p[1]))))
        flow_arith_text(l, p + 1, (size_t)(e - p - 1), start);
}

static void sh_code(sh_lex *l, const char *p, int s)
{
    char c = p[0], d = p[1];
    const char *prev = p > l->t ? p - 1 : NULL;
    size_t at = (size_t)(p - l->t);
    if (s == SH_ARITH && is_ident_start(c) && (prev == NULL || (!is_ident_char(*prev) && *prev != '$'))) {
        size_t k = 0; /* a bare name in arithmetic is a variable, evaluated */
        while (is_ident_char(p[k]))
            k++;
        flow_arith(l, flow_id(l, p, k), at);
    }
    sh_cmd *cmd = is_code_frame(s) ? sh_code_cmd(l) : NULL;
    if (c == '\\') {
        if (d == '\n')
            sh_unsure(l, at, "has a backslash-newline (a line continuation can join any token)");
        l->esc = 1;
        if (cmd)
            word_add(l, cmd, c, 0);
    } else if (c == '\'') {
        sh_push(l, SH_SQ, at);
        if (cmd)
            word_add(l, cmd, c, 0);
    } else if (c == '"') {
        sh_push(l, SH_DQ, at);
        if (cmd)
            word_add(l, cmd, c, 0);
    } else if ((c == '<' || c == '>') && d == '(' && cmd) {
        word_end(l, cmd);
        sh_push(l, SH_CMD, at), l->skip = 1; /* <(...) >(...): a command of its own */
        word_add(l, cmd, c, 0);
    } else if ((c == '$' || c == '`') && (cmd ? word_add(l, cmd, c, 0), 1 : 1) &&
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
        param_close(l, l->start[l->top - 1], at);
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
        if (cmd)
            cmd_end(l, cmd); /* while pending: its flags go to hd_flags */
        l->pending = 0;
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
    l->pos = (size_t)(p - l->t);
    if (l->skip) {
        l->skip--;
        return;
    }
    if (l->esc) { /* the escaped byte is literal */
        l->esc = 0;
        if (is_code_frame(s))
            word_add(l, sh_code_cmd(l), *p, 0);
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

/* Adds the placeholder to command c, whose current word holds it (directly, or inside quotes or
 * a substitution whose output becomes part of the word). */
static void ph_register(sh_lex *l, sh_cmd *c, size_t at, rx_tmpl_kind k)
{
    if (c->n_ph == SH_MAX_PH) {
        sh_bad(l, at, "is one placeholder too many in one simple command");
        return;
    }
    /* starts: nothing but quotes before it in its word ("{v}" stands where {v} does) */
    int starts = !c->in_word || !c->word_other, assign = c->in_word && word_is_assignment(c);
    int redir = c->redir_word || (starts && c->redir_next);
    c->ph[c->n_ph++] = (sh_ph){
        .at = at, .kind = k, .word = c->words,
        .cmd_pos = !c->cmd_seen && !redir && !assign && !c->in_array,
        .after_c = c->prev_c && starts, .after_e = c->prev_e && starts,
        .after_v = c->prev_v && starts,
        .subscript = c->in_word && (word_in_subscript(c) ||
                                    (c->in_array && c->word[0] == '[' && !memchr(c->word, ']', c->wlen))),
        .assign = assign || c->in_array,
        .redir_in = redir && c->redir_in,
        .first_arg = c->cmd_seen && !redir && c->args == 0 && !(c->plain && is_option(c) && c->in_word)};
    if (!c->in_word && c->redir_next) {
        c->redir_word = 1;
        c->redir_next = 0;
    }
    if (k == RX_TK_DATA)
        c->word_data = 1; /* the word's value may hold the placeholder's (flow) */
    word_add(l, c, '{', 0); /* the word holds an expansion: not a plain word any more */
}

/* A placeholder is judged at every level that holds it, innermost first: the quoting it stands
 * in (which also gives the form), each enclosing ${...} and arithmetic context, each enclosing
 * command (a substitution's output is part of the word around it: `eval "$(echo {v})"`), and a
 * heredoc body by the commands of its line. */
static void ph_judge(sh_lex *l, size_t at, rx_tmpl_kind k)
{
    int skip_code = 0; /* the code level right outside a heredoc: its command is over */
    for (int i = l->top; i >= 0; i--) {
        int s = i > 0 ? l->st[i - 1] : 0;
        if (s == SH_ARITH && k != RX_TK_INT)
            sh_bad(l, at, sh_names[SH_ARITH]);
        else if (s == SH_PARAM && k != RX_TK_INT && !param_word_ok(l, l->start[i - 1], at))
            sh_bad(l, at, "stands inside ${...} where it is not the word of a -, +, =, ?, # or "
                          "% operator (a substring offset, a subscript or an indirection is "
                          "evaluated as code)");
        else if (s == SH_HEREDOC) {
            if (k == RX_TK_DATA && (l->hd_flags & (D_SHELL | D_INTERP | D_EVAL | D_RUNS)))
                sh_bad(l, at, "stands in a heredoc read by a shell or an interpreter, which runs "
                              "what it reads");
            skip_code = 1;
        } else if (is_code_frame(s)) {
            if (!skip_code)
                ph_register(l, l->cmd[i], at, k);
            skip_code = 0;
        }
    }
}

static int sh_param(void *ctx, const char *name, size_t n)
{
    sh_lex *l = ctx;
    size_t at = (size_t)(name - 1 - l->t);
    rx_tmpl_kind k = l->kind_fn(l->ud, name, n);
    l->pos = at;
    int s = sh_cur(l);
    rx_tmpl_form form = RX_TF_QUOTED;
    if (l->skip)
        l->skip = 0; /* look-ahead never spans a placeholder */
    if (k == RX_TK_DATA && l->n_data++ == 0)
        l->first_data_at = at;
    if (l->esc) {
        sh_bad(l, at, "stands right after a backslash");
        l->esc = 0;
    } else if (s == SH_SQ || s == SH_ANSI || s == SH_COMMENT || s == SH_HEREDOC_Q) {
        sh_bad(l, at, sh_names[s]);
    } else {
        if (s == SH_ARITH || s == SH_DQ || s == SH_HEREDOC)
            form = RX_TF_BARE; /* already inside quotes (or arithmetic): no splitting */
        ph_judge(l, at, k);
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
    int flow = 0;
    size_t reached = l.n_data > 0 ? flow_judge(&l) : 0;
    if (l.why == NULL && l.unsure == NULL && reached > 0) {
        sh_bad(&l, l.first_data_at,
               "may reach, through a variable or a positional parameter, what reads that "
               "variable as arithmetic or as a name (an arithmetic context, [[ -eq ]], let, "
               "declare -i, a subscript, an offset or ${!x}), where bash would evaluate it; pass "
               "an int parameter there instead");
        flow = 1;
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
        d->flow = flow;
        if (flow)
            position(t, reached - 1, &d->ref_line, &d->ref_col);
        return 1;
    }
    *forms = l.forms;
    *n_forms = l.n_forms;
    return 0;
}
