/* One-shot commands (oneshot.h): a conservative reader of one simple command. It only has to
 * know where each word ends; whatever it does not know for sure makes the answer false. */
#include <stddef.h>
#include <string.h>

#include "oneshot.h"

/* bash 5.2's builtins (`compgen -b`) and reserved words (`compgen -k`): `exec echo` would run
 * /bin/echo, not the builtin, and `exec if` is no command at all. */
static const char *const not_external[] = {
    ".", ":", "[", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "command",
    "compgen", "complete", "compopt", "continue", "declare", "dirs", "disown", "echo", "enable",
    "eval", "exec", "exit", "export", "false", "fc", "fg", "getopts", "hash", "help", "history",
    "jobs", "kill", "let", "local", "logout", "mapfile", "popd", "printf", "pushd", "pwd", "read",
    "readarray", "readonly", "return", "set", "shift", "shopt", "source", "suspend", "test",
    "times", "trap", "true", "type", "typeset", "ulimit", "umask", "unalias", "unset", "wait",
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "coproc",
};

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_plain(char c) /* never special to bash outside quotes, in any position */
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("_./:=@%+,-", c) != NULL);
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The first word: a plain name, not an option, an assignment, a keyword or a builtin. */
static const char *first_word(const char *p)
{
    const char *w = p;
    while (*p && !is_blank(*p)) {
        if (!is_plain(*p) || *p == '=' || *p == ':' || *p == '%' || *p == '@' || *p == ',')
            return NULL;
        p++;
    }
    if (p == w || *w == '-')
        return NULL;
    for (size_t i = 0; i < sizeof(not_external) / sizeof(not_external[0]); i++)
        if (strlen(not_external[i]) == (size_t)(p - w) && memcmp(not_external[i], w, p - w) == 0)
            return NULL;
    return p;
}

/* After a '$': $NAME or ${NAME} (or ${#NAME}). Returns the end, or NULL for anything else
 * (command substitution, arithmetic, special parameters, operators inside braces). */
static const char *dollar(const char *p)
{
    const char *s;
    if (*p == '{') {
        s = ++p;
        if (*p == '#')
            p++;
        while (is_name_char(*p))
            p++;
        return *p == '}' && p > s ? p + 1 : NULL;
    }
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
        return NULL;
    while (is_name_char(*p))
        p++;
    return p;
}

static const char *double_quoted(const char *p) /* p is past the opening '"' */
{
    while (*p && *p != '"') {
        if (*p == '`' || *p == '\\')
            return NULL;
        if (*p == '$') {
            if ((p = dollar(p + 1)) == NULL)
                return NULL;
            continue;
        }
        p++;
    }
    return *p == '"' ? p + 1 : NULL;
}

/* One word after the first: plain characters, globs, quoted strings and simple expansions. */
static const char *word(const char *p)
{
    while (*p && !is_blank(*p)) {
        if (is_plain(*p) || *p == '*' || *p == '?' || *p == '[' || *p == ']')
            p++;
        else if (*p == '\'') {
            const char *q = strchr(p + 1, '\'');
            if (q == NULL)
                return NULL;
            p = q + 1;
        } else if (*p == '"')
            p = double_quoted(p + 1);
        else if (*p == '$')
            p = dollar(p + 1);
        else
            return NULL;
        if (p == NULL)
            return NULL;
    }
    return p;
}

bool rx_shell_oneshot(const char *cmd)
{
    const char *p = cmd;
    if (cmd == NULL || strchr(cmd, '\n') != NULL)
        return false;
    while (is_blank(*p))
        p++;
    if ((p = first_word(p)) == NULL)
        return false;
    for (;;) {
        while (is_blank(*p))
            p++;
        if (*p == '\0')
            return true;
        if ((p = word(p)) == NULL)
            return false;
    }
}

/* Names whose value a fork of the runner's slot and a fresh bash both take unchanged from the
 * environment (bash neither sets nor changes them at its start, the slot never assigns them). */
static const char *const plain_env[] = {"HOME", "USER", "LOGNAME", "PATH", "LANG", "TMPDIR"};

static bool name_ok(const char *name, size_t n, rx_shell_bound_fn bound, void *ud)
{
    static const char param[] = "__rx_p_"; /* a parameter's binding, in the call's code */
    if (n > sizeof(param) - 1 && memcmp(name, param, sizeof(param) - 1) == 0)
        return true;
    for (size_t i = 0; i < sizeof(plain_env) / sizeof(plain_env[0]); i++)
        if (strlen(plain_env[i]) == n && memcmp(plain_env[i], name, n) == 0)
            return true;
    return bound != NULL && bound(ud, name, n);
}

/* Every $NAME, ${NAME} and ${#NAME} of a command rx_shell_oneshot accepted (so: no backslash,
 * no other expansion) outside single quotes names a variable name_ok accepts. */
static bool names_ok(const char *p, rx_shell_bound_fn bound, void *ud)
{
    bool dq = false;
    for (; *p; p++) {
        if (*p == '"')
            dq = !dq;
        else if (*p == '\'' && !dq)
            p = strchr(p + 1, '\''); /* oneshot: it is closed */
        else if (*p == '$') {
            const char *s = p + 1, *e;
            if (*s == '{')
                s += s[1] == '#' ? 2 : 1;
            for (e = s; is_name_char(*e); e++)
                ;
            if (!name_ok(s, (size_t)(e - s), bound, ud))
                return false;
            p = e - 1;
        }
    }
    return true;
}

bool rx_shell_slot_forkable(const char *cmd, rx_shell_bound_fn bound, void *ud)
{
    return rx_shell_oneshot(cmd) && names_ok(cmd, bound, ud);
}
