/* The one table of the command line (interface.c): every command, subcommand and option with
 * its help line. `rexec __interface` prints it as JSON; the bash completion reads its names
 * through `rexec __complete`; main.c takes from it which options take a value; and
 * tests/install/t_interface.sh holds `rexec help`, rexec(1), completions/rexec and docs/cli.md
 * against it, so an option added in one place only fails the suite. */
#ifndef RX_CLI_INTERFACE_H
#define RX_CLI_INTERFACE_H

typedef struct cli_opt {
    const char *name;  /* "--param" */
    const char *alias; /* "-p", or NULL */
    const char *value; /* the metavariable ("NAME=VALUE"), NULL for a flag */
    const char *help;  /* one line */
} cli_opt;

typedef struct cli_entry {
    const char *command; /* "audit" */
    const char *sub;     /* "verify", or NULL for the command itself */
    const char *args;    /* positional arguments as help writes them, or "" */
    const char *summary; /* one line */
    const cli_opt *opts; /* ends with {NULL} */
} cli_entry;

/* The global options (end with {NULL}) and the entries (n_entries of them). */
extern const cli_opt cli_global_opts[];
extern const cli_entry cli_entries[];
extern const unsigned cli_n_entries;

/* 1 when opt ("--key", or "--key=v" up to its '=') takes a value in any entry or globally. */
int cli_takes_value(const char *opt);
/* The whole table as one JSON object (malloc'd; NULL when memory runs out). */
char *cli_interface_json(void);

#endif
