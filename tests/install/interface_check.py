#!/usr/bin/env python3
"""Holds the four faces of the command line against its one table (`rexec __interface`,
src/cli/interface.c): `rexec help`, rexec(1), completions/rexec and docs/cli.md, and the option
literals of the parsers in src/cli/cmd_*.c. Prints one line per difference and exits 1 if any.

usage: interface_check.py REXEC_BIN SRC_DIR MAN_TEXT_FILE

A synopsis line is any line of a face that starts with "rexec " (help's "usage:" lines and their
"[...]" continuations, the man page's SYNOPSIS, the `rexec ...` lines of docs/cli.md's code
blocks). Each must name a command of the table, and the options it shows must be the entry's;
over all its lines, an entry must show every option of the table."""
import json
import os
import re
import subprocess
import sys

BIN, SRC, MAN_TEXT = sys.argv[1:4]
TABLE = json.loads(subprocess.run([BIN, "__interface"], capture_output=True, text=True,
                                  check=True).stdout)
ENTRIES = TABLE["commands"]
SUBS = {}
for e in ENTRIES:
    SUBS.setdefault(e["command"], set())
    if e["sub"]:
        SUBS[e["command"]].add(e["sub"])
problems = []
OPT = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def bad(msg):
    problems.append(msg)


def names(opts):
    return {o["name"] for o in opts}


def key(e):
    return "rexec " + e["command"] + (" " + e["sub"] if e["sub"] else "")


def entry_of(line):
    """The table entry a synopsis line ("rexec audit show [--run ID]") is about, or None."""
    words = line.split()
    if len(words) < 2 or words[1] not in SUBS:
        return None
    cmd = words[1]
    sub = words[2] if len(words) > 2 and words[2] in SUBS[cmd] else None
    for e in ENTRIES:
        if e["command"] == cmd and e["sub"] == sub:
            return e
    return None


def check_face(face, lines):
    """lines: the synopsis lines of one face (each starting with "rexec ")."""
    shown = {}
    lines = [("rexec " if i else "") + seg for l in lines for i, seg in enumerate(l.split(" | rexec "))]
    for line in lines:
        words = line.split()
        if len(words) < 2 or words[1].startswith(("-", "[")) or words[1].isupper():
            continue  # the global synopsis (rexec [--workspace DIR] ... COMMAND), checked apart
        e = entry_of(line)
        if e is None:
            bad(f"{face}: '{line.strip()}' names a command that is not in the table")
            continue
        got = set(OPT.findall(line)) - {"--help"}
        extra = got - names(e["options"])
        if extra:
            bad(f"{face}: '{key(e)}' shows {sorted(extra)}, which the table does not list")
        shown.setdefault(key(e), set()).update(got)
    for e in ENTRIES:
        if key(e) not in shown:
            bad(f"{face}: no synopsis line for '{key(e)}'")
            continue
        missing = names(e["options"]) - shown[key(e)]
        if missing:
            bad(f"{face}: '{key(e)}' lacks {sorted(missing)}")


def check_set(face, what, got, want):
    if got - want:
        bad(f"{face}: {what} shows {sorted(got - want)}, which the table does not list")
    if want - got:
        bad(f"{face}: {what} lacks {sorted(want - got)}")


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True).stdout


# ---- rexec help / --help --------------------------------------------------------------------
def usage_lines(text):
    out, cur = [], None
    for raw in text.splitlines():
        m = re.match(r"^(?:usage: |       )(rexec .*)$", raw)
        if m:
            cur = m.group(1)
            out.append(cur)
        elif cur is not None and re.match(r"^ +\[", raw):
            out[-1] += " " + raw.strip()
        else:
            cur = None
    return out


lines = []
for cmd in SUBS:
    text = run("help", cmd)
    if not text:
        bad(f"help: `rexec help {cmd}` prints nothing")
    lines += usage_lines(text)
    prose = "\n".join(l for l in text.splitlines() if not re.match(r"^(usage: |       )rexec |^ +\[", l))
    for e in ENTRIES:
        if e["command"] == cmd:
            for o in e["options"]:
                if o["name"] not in prose:
                    bad(f"help: `rexec help {cmd}` shows {o['name']} of '{key(e)}' in no line "
                        "but the usage (say what it does)")
check_face("help", lines)
overview = run("--help")
cmds = re.search(r"^commands:\n((?:  .*\n)+)", overview, re.M)
listed = set()
for l in (cmds.group(1) if cmds else "").splitlines():
    for part in re.split(r" [|] ", re.split(r"\s{2,}", l.strip())[0]):
        listed.add(part.split()[0])
check_set("help", "`rexec --help`'s commands", listed, set(SUBS))
glob = re.search(r"^global options:\n((?:  .*\n)+)", overview, re.M)
check_set("help", "`rexec --help`'s global options",
          set(OPT.findall(glob.group(1) if glob else "")), names(TABLE["global"]))

# ---- rexec(1) -------------------------------------------------------------------------------
man = open(MAN_TEXT, encoding="utf-8").read()
sections = dict(re.findall(r"^([A-Z][A-Z ]+)\n((?:(?:[ \t].*)?\n)*)", man, re.M))
syn = [l.strip() for l in sections.get("SYNOPSIS", "").splitlines() if l.strip().startswith("rexec ")]
check_face("rexec(1) SYNOPSIS", syn)
opts_sec = sections.get("OPTIONS", "")
glob_part, _, run_part = opts_sec.partition("Options of run")
check_set("rexec(1) OPTIONS", "the global options", set(OPT.findall(glob_part)),
          names(TABLE["global"]))
run_entry = next(e for e in ENTRIES if e["command"] == "run")
check_set("rexec(1) OPTIONS", "the options of run", set(OPT.findall(run_part)),
          names(run_entry["options"]))

# ---- docs/cli.md ------------------------------------------------------------------------------
md = open(os.path.join(SRC, "docs/cli.md"), encoding="utf-8").read()
blocks = re.findall(r"^```[a-z]*\n(.*?)^```", md, re.M | re.S)
top = [seg for l in blocks[0].splitlines() if l.startswith("rexec ")
       for seg in [re.split(r"\s{3,}", l)[0]]]
check_face("docs/cli.md (the synopsis at the top)", top)
for b in blocks[1:]:
    for l in b.splitlines():
        if l.startswith("rexec ") and entry_of(l):
            e = entry_of(l)
            extra = set(OPT.findall(re.split(r"\s{3,}", l)[0])) - names(e["options"]) - {"--help"}
            if extra:
                bad(f"docs/cli.md: '{l.strip()}' shows {sorted(extra)}, which the table does not list")


def md_table(heading):
    """The options of the first Markdown table after heading (rows whose first cell has one)."""
    part = md.split(heading, 1)[1] if heading in md else ""
    rows = re.search(r"((?:^\|.*\n)+)", part, re.M)
    got = set()
    for r in (rows.group(1) if rows else "").splitlines()[2:]:
        cell = r.split("|")[1]
        got |= {o for o in OPT.findall(cell)}
    return got


check_set("docs/cli.md", "the table of global options", md_table("## Global options"),
          names(TABLE["global"]))
check_set("docs/cli.md", "the table of `rexec run`", md_table("## `rexec run`"),
          names(run_entry["options"]))

# ---- completions/rexec -------------------------------------------------------------------------
def complete(line):
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(BIN)) + ":" + os.environ["PATH"])
    script = ('. "$1"; COMP_LINE=$2; COMP_POINT=${#2}; COMP_WORDS=(); COMP_CWORD=0; _rexec; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "-c", script, "_", os.path.join(SRC, "completions/rexec"), line],
                         capture_output=True, text=True, env=env).stdout
    return {w for w in out.split("\n") if w}


check_set("completions/rexec", "'rexec <TAB>'", complete("rexec "), set(SUBS))
check_set("completions/rexec", "'rexec --<TAB>'", complete("rexec --"), names(TABLE["global"]))
for e in ENTRIES:
    check_set("completions/rexec", f"'{key(e)} --<TAB>'", complete(key(e) + " --"),
              names(e["options"]) | {"--help"})
for cmd, subs in SUBS.items():
    if subs:
        check_set("completions/rexec", f"'rexec {cmd} <TAB>'", complete(f"rexec {cmd} "), subs)

# ---- the parsers: every option literal of src/cli/cmd_*.c is in the table, and back -----------
# the files that parse each command's options (several commands may share files)
FILES = {"run": ("cmd_run.c",), "eval": ("cmd_run.c",),
         # put and get (cmd_put.c) hand their options to run's parser
         "put": ("cmd_run.c",), "get": ("cmd_run.c",),
         "check": ("cmd_info.c", "cmd_import_ansible.c"), "hosts": ("cmd_info.c", "cmd_import_ansible.c"),
         "actions": ("cmd_info.c", "cmd_import_ansible.c"), "groups": ("cmd_info.c", "cmd_import_ansible.c"),
         "approve": ("cmd_approve.c", "cmd_approvals_ui.c"),
         "approvals": ("cmd_approve.c", "cmd_approvals_ui.c"),
         "deny": ("cmd_approve.c", "cmd_approvals_ui.c"), "audit": ("cmd_audit.c",),
         "evidence": ("cmd_evidence.c",), "serve": ("cmd_serve.c",), "help": ()}
PARSED = re.compile(r'(?:strcmp\([^,]+,|cli_opt_value\([^"]*)\s*"(--[a-z][a-z-]*)"')
for files in sorted({f for f in FILES.values() if f}):
    parsed = set()
    for f in files:
        parsed |= set(PARSED.findall(open(os.path.join(SRC, "src/cli", f), encoding="utf-8").read()))
    parsed -= {"--help"}
    want = set().union(*(names(e["options"]) for e in ENTRIES if FILES[e["command"]] == files))
    check_set("src/cli/" + " + ".join(files), "the options its parser takes", parsed, want)
text = open(os.path.join(SRC, "src/cli/main.c"), encoding="utf-8").read()
# main.c looks for --json only to print its own usage errors as JSON: not an option of its own
check_set("src/cli/main.c", "the global options it parses", set(PARSED.findall(text)) - {"--json"},
          names(TABLE["global"]))

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
