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
