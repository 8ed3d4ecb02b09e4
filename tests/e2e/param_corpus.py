"""The parameter corpus (issue 31, item 3), driven by tests/e2e/t_param_corpus.sh.

Generates action templates that put one placeholder {v} in every shell context we could think
of, declares each with a string, path, int and enum parameter, and for every (template, type):

  * loads a workspace holding that one action (`rexec actions`): either it loads (exit 0) or it
    is refused with exit 78 and a message naming the action and `line N, column M` (when the
    message says a {placeholder} is refused, that position is a `{v}` of the template);
  * every (template, type) that loads becomes an action of the lab's workspace, and one
    `rexec serve` runs it once per hostile value of the type, many calls in flight over one
    socket. Each hostile value tries to create a witness file of its own (unique per template,
    type and value); none may exist afterwards (the lab VM is this machine).

Templates whose result is exactly predictable (printf '%s' {v}, ...) also check that the
command received the value intact.

Usage: param_corpus.py REXEC_BIN WORKSPACE TMPDIR
Environment: REXEC_CORPUS_KNOWN_BUGS=1 makes the witnesses of the templates listed in KNOWN_BUGS
fatal too (they are reported either way); REXEC_CORPUS_ONLY=REGEX keeps the templates whose
text matches (debugging).
"""
import concurrent.futures
import json
import os
import re
import socket
import subprocess
import sys
import time

REXEC, WS, TMP = sys.argv[1], sys.argv[2], sys.argv[3]
WIT = os.path.join(TMP, "wit")          # witness files go here (and must not appear)
VMCWD = os.path.join(TMP, "vmcwd")      # every action runs here (redirections write here)
LOADWS = os.path.join(TMP, "loadws")    # scratch workspaces for the load checks
os.makedirs(WIT, mode=0o700)
os.makedirs(VMCWD, mode=0o700)
os.makedirs(LOADWS, mode=0o700)

# ---- templates -------------------------------------------------------------------------------
# (template, expectation for a string parameter): "ok" must load, "refuse" must be refused,
# None: either (the corpus only demands that no witness appears when it loads).
# "exact": a function value -> the stdout the command must print (string parameter only).
OK, REF = "ok", "refuse"


def ident(v):
    return v


def strip_nl(v):
    return v.rstrip("\n")


BASE = [
    # plain words and the exact cases
    ("printf '%s' {v}", OK, ident),
    ("printf '%s' x{v}y", OK, lambda v: "x" + v + "y"),
    ("printf '%s\\n' {v}", OK, lambda v: v + "\n"),
    ("printf '%s' {v} {v}", OK, lambda v: v + v),
    ("printf '%s' \"{v}\"", OK, ident),
    ("printf '%s' \"a{v}b\"", OK, lambda v: "a" + v + "b"),
    ("printf '%s' \"$(printf '%s' {v})\"", OK, strip_nl),
    ("printf '%s' \"`printf '%s' {v}`\"", OK, strip_nl),
    ("printf '%s' ${x:-{v}}", OK, ident),
    ("printf '%s' \"${x:-{v}}\"", OK, ident),
    ("printf '%s' ${x-{v}}", OK, ident),
    ("x=1; printf '%s' ${x:+{v}}", OK, ident),
    ("x={v}; printf '%s' \"$x\"", OK, ident),
    ("x=\"{v}\"; printf '%s' \"$x\"", OK, ident),
    ("cat <<< {v}", OK, lambda v: v + "\n"),
    ("cat <<< \"{v}\"", OK, lambda v: v + "\n"),
    ("cat <<EOF\n{v}\nEOF", OK, lambda v: v + "\n"),
    ("cat <<-EOF\n\t{v}\n\tEOF", OK, lambda v: v + "\n"),
    ("cat <<EOF\na $(printf '%s' {v}) b\nEOF", OK, lambda v: "a " + strip_nl(v) + " b\n"),
    ("printf '%s' {v} | cat", OK, ident),
    ("printf '%s' {v} && true", OK, ident),
    ("false || printf '%s' {v}", OK, ident),
    ("( printf '%s' {v} )", OK, ident),
    ("{{ printf '%s' {v}; }}", OK, ident),
    ("f() {{ printf '%s' \"$1\"; }}; f {v}", OK, ident),
    ("f() {{ printf '%s' {v}; }}; f", OK, ident),
    ("for i in {v}; do printf '%s' \"$i\"; done", OK, ident),
    ("case {v} in *) printf '%s' {v};; esac", OK, ident),
    ("bash -c 'printf %s \"$1\"' _ {v}", OK, ident),
    ("sh -c 'printf %s \"$1\"' _ {v}", OK, ident),
    ("f=$(mktemp ./o.XXXXXX) && printf '%s' {v} >\"$f\" && cat \"$f\"", OK, ident),
    ("cat <(printf '%s' {v})", OK, ident),
    ("printf '%s' {v} > >(cat)", None, None),
    ("echo $(echo {v})", OK, None),
    ("echo `echo {v}`", OK, None),
    ("echo \"$(echo \"$(echo {v})\")\"", OK, None),
    ("echo $(echo $(echo {v}))", OK, None),
    ("echo v={v}", OK, None),
    ("echo {v} | tr a b", OK, None),
    ("echo {v} >/dev/null", OK, None),
    ("echo x > {v}", OK, None),
    ("echo x >> out.{v}", OK, None),
    ("cat < {v}", OK, None),
    ("cat {v} 2>/dev/null", OK, None),
    ("cat -- {v}", OK, None),
    ("ls -d -- {v}", OK, None),
    ("test {v} = x", OK, None),
    ("[ {v} = x ]", OK, None),
    ("[ -n {v} ]", OK, None),
    ("test {v} -eq 1", None, None),
    ("[ {v} -eq 1 ]", None, None),
    ("[[ {v} == a* ]]", OK, None),
    ("[[ {v} =~ ^a ]]", OK, None),
    ("[[ -n {v} ]]", OK, None),
    ("[[ x == x ]] && echo {v}", OK, None),
    ("echo ${x:-{v}}", OK, None),
    ("echo ${x:={v}}", OK, None),
    ("echo ${x#{v}}", OK, None),
    ("echo ${x%%{v}}", OK, None),
    ("echo \"${x:-{v}}\"", OK, None),
    ("echo ${HOME} {v}", OK, None),
    ("echo $((1 + 2)) {v}", OK, None),
    ("echo 'x' {v} \"y\"", OK, None),
    ("echo {{v}} {v}", OK, None),
    ("local_x={v}; echo \"$local_x\"", OK, None),
    ("f() {{ local x={v}; printf '%s' \"$x\"; }}; f", OK, ident),
    ("declare x={v}; printf '%s' \"$x\"", OK, ident),
    ("readonly x={v}; printf '%s' \"$x\"", OK, ident),
    ("declare -i n=0; msg={v}; printf '%s' \"$msg\"", OK, ident),
    ("find . -maxdepth 0 -name {v}", OK, None),
    ("grep -r -e {v} . </dev/null", OK, None),
    ("echo let {v}", OK, None),
    ("ls . {v}", OK, None),
    ("export X={v}; printenv X", OK, None),
    ("X={v} printenv X", OK, None),
    ("a=(1 2); a[1]={v}; echo \"${a[1]}\"", OK, None),
    ("x=( {v} ); echo \"${x[0]}\"", OK, None),
    ("x=( 1 {v} ); echo \"${x[1]}\"", OK, None),
    ("mapfile -t a <<< {v}; echo \"${a[0]}\"", OK, None),
    ("read -r x <<< {v}; echo \"$x\"", OK, None),
    ("while read -r l; do echo \"$l\"; done <<< {v}", OK, None),
    ("echo {v} | while read -r l; do echo \"$l\"; done", OK, None),
    ("printf -v y '%s' {v}; echo \"$y\"", OK, None),
    ("if [ -n {v} ]; then echo y; fi", OK, None),
    ("while false; do echo {v}; done; echo {v}", OK, None),
    ("until true; do :; done; echo {v}", OK, None),
    ("select x in {v}; do break; done </dev/null", None, None),
    ("echo a; # {v}", REF, None),
    ("x # c\necho {v}", OK, None),
    ("echo \"$'\"'\"{v}'", REF, None),
    ("echo \"$'{v}'\"", OK, None),
    ("echo $\"{v}\"", None, None),
    ("cat <\\\n<EOF\n{v}\nEOF", REF, None),
    ("cat <<A <<B\n{v}\nA\nB", REF, None),
    ("cat <<" + "D" * 70 + "\n{v}\n" + "D" * 70, REF, None),
    ("cat <<" + "D" * 63 + "X\n" + "D" * 63 + "\n{v}\n" + "D" * 63 + "X", REF, None),
    ("cat <<EOF\nx\nEOF\necho {v}", OK, None),
    ("cat <<'EOF'\nv={v}\nEOF", REF, None),
    ("cat <<\"EOF\"\nv={v}\nEOF", REF, None),
    ("cat <<\\EOF\nv={v}\nEOF", REF, None),
    ("cat <<E$x\n{v}\nE$x", REF, None),
    ("echo 'v={v}'", REF, None),
    ("echo $'a{v}'", REF, None),
    ("echo \\{v}", REF, None),
    ("echo x \\\n{v}", REF, None),
    ("echo \"x\\\n{v}\"", REF, None),
    ("[[ {v} -eq 1 ]]", REF, None),
    ("[[ 1 -lt {v} ]]", REF, None),
    ("[[ -v {v} ]]", REF, None),
    ("test -v {v}", REF, None),
    ("[ -v {v} ]", REF, None),
    ("echo ${x:{v}}", REF, None),
    ("echo ${x:1:{v}}", REF, None),
    ("echo ${a[{v}]}", REF, None),
    ("echo ${!{v}}", REF, None),
    ("echo ${x/{v}/y}", REF, None),
    ("echo $(( {v} + 1 ))", REF, None),
    ("echo $[ {v} + 1 ]", REF, None),
    ("(( {v} > 2 ))", REF, None),
    ("(( x = {v} ))", REF, None),
    ("for (( i = 0; i < {v}; i++ )); do :; done", REF, None),
    ("let x={v}", REF, None),
    ("let {v}", REF, None),
    ("declare {v}", REF, None),
    ("declare -i x; x={v}", REF, None),
    ("declare -i x={v}", REF, None),
    ("local -i x; x={v}", REF, None),
    ("typeset {v}", REF, None),
    ("export {v}", REF, None),
    ("readonly {v}", REF, None),
    ("local {v}", REF, None),
    ("read {v} </dev/null", REF, None),
    ("read -a {v} </dev/null", REF, None),
    ("mapfile {v} </dev/null", REF, None),
    ("readarray -t {v} </dev/null", REF, None),
    ("unset {v}", REF, None),
    ("unset -v {v}", REF, None),
    ("printf -v {v} x", REF, None),
    ("printf -v x {v}", OK, None),  # the value is the format: data (no conversion evaluates)
    ("getopts ab {v}", REF, None),
    ("wait -p {v}", REF, None),
    ("eval {v}", REF, None),
    ("eval echo {v}", REF, None),
    ("source {v}", REF, None),
    (". {v}", REF, None),
    ("trap {v} EXIT", REF, None),
    ("trap 'echo x' {v}", REF, None),
    ("alias x={v}", REF, None),
    ("bash -c {v}", REF, None),
    ("bash -ec {v}", REF, None),
    ("sh -c {v}", REF, None),
    ("/bin/sh -c {v}", REF, None),
    ("su -c {v}", None, None),
    ("{v}", REF, None),
    ("{v} --version", REF, None),
    ("x=1 {v}", REF, None),
    ("echo a; {v}", REF, None),
    ("echo a && {v}", REF, None),
    ("true | {v}", REF, None),
    ("( {v} )", REF, None),
    ("$({v})", REF, None),
    ("echo `{v}`", REF, None),
    ("if {v}; then :; fi", REF, None),
    ("! {v}", REF, None),
    ("time {v}", REF, None),
    ("a[{v}]=1", REF, None),
    ("a[{v}]+=1", REF, None),
    ("declare -A m; m[{v}]=1", REF, None),
    # the value reaches arithmetic through a variable or a positional parameter
    ("x={v} y=$(( x ))", None, None),
    ("x={v}; echo $(( x + 1 ))", None, None),
    ("x={v}; [[ $x -eq 1 ]]", None, None),
    ("x={v}; (( x > 1 ))", None, None),
    ("set -- {v}; echo $(( $1 ))", None, None),
    ("f() {{ (( $1 > 0 )); }}; f {v}", None, None),
    ("x={v}; echo \"${!x}\"", None, None),
    ("printf '%d' {v}", None, None),
    ("x={v}; [ \"$x\" -eq 1 ]", None, None),
    # constructs where the value is handed to an interpreter by the template itself
    ("echo {v} | sh", None, None),
    ("bash <<< {v}", None, None),
    ("bash <<EOF\n{v}\nEOF", None, None),
    ("env {v}", None, None),
    ("command {v}", None, None),
    ("exec {v}", None, None),
    ("nice {v}", None, None),
    ("xargs {v} </dev/null", None, None),
    # placeholders inside "..." and ${...} where the simple command evaluates them
    ("eval \"{v}\"", REF, None),
    ("eval \"echo {v}\"", REF, None),
    ("eval ${x:-{v}}", REF, None),
    ("eval \"${x:-{v}}\"", REF, None),
    ("eval $(echo {v})", None, None),
    ("eval \"$(printf '%s' {v})\"", None, None),
    ("bash -c \"{v}\"", REF, None),
    ("sh -c \"echo {v}\"", REF, None),
    ("bash -c ${x:-{v}}", REF, None),
    ("\"{v}\" x", REF, None),
    ("${x:-{v}} x", REF, None),
    ("\"${x:-{v}}\"", REF, None),
    ("trap \"{v}\" EXIT", REF, None),
    ("let \"{v}\"", REF, None),
    ("let \"x={v}\"", REF, None),
    ("source \"{v}\"", REF, None),
    ("read \"{v}\" </dev/null", REF, None),
    ("declare \"{v}\"", REF, None),
    ("declare -i x; x=\"{v}\"", REF, None),
    ("printf -v \"{v}\" x", REF, None),
    ("test -v \"{v}\"", REF, None),
    ("[[ \"{v}\" -eq 1 ]]", REF, None),
    ("[[ ${x:-{v}} -eq 1 ]]", REF, None),
    ("[[ -v \"{v}\" ]]", REF, None),
    ("a[\"{v}\"]=1", REF, None),
    ("a[${x:-{v}}]=1", REF, None),
    ("echo $(( ${x:-{v}} ))", REF, None),
    ("echo $(( \"{v}\" ))", REF, None),
    ("(( ${x:-{v}} ))", REF, None),
    ("echo ${a[\"{v}\"]}", REF, None),
    ("echo ${x:\"{v}\"}", REF, None),
    ("echo ${x:${y:-{v}}}", REF, None),
    ("echo ${a[${y:-{v}}]}", REF, None),
    ("echo \"${x:{v}}\"", REF, None),
    ("echo \"$(( {v} ))\"", REF, None),
    ("x=\"$(( {v} ))\"", REF, None),
    ("echo $(eval {v})", REF, None),
    ("echo \"$(eval {v})\"", REF, None),
    ("echo `eval {v}`", REF, None),
    ("cat <<EOF\n$(eval {v})\nEOF", REF, None),
    ("cat <<EOF\n$(( {v} ))\nEOF", REF, None),
    ("cat <<EOF\n${x:{v}}\nEOF", REF, None),
    ("cat <<EOF\n$({v})\nEOF", REF, None),
    ("echo \"$({v})\"", REF, None),
    ("x=$(echo a; {v})", REF, None),
    ("echo <({v})", REF, None),
]

# Wrappers: the same contexts one level down (a function body, a subshell, a condition, a
# command substitution), for some one-line templates. A wrapped template gets the CORE values only.
WRAPS = ["f() {{\n%s\n}}; f", "( %s )", "y=$(%s); printf '%%s' \"$y\""]
WRAP_BASES = [
    "printf '%s' {v}", "x={v}; printf '%s' \"$x\"", "cat <<< {v}", "[[ {v} == a* ]]",
    "echo ${x:-{v}}", "bash -c 'printf %s \"$1\"' _ {v}", "eval {v}", "{v} --version",
    "[[ {v} -eq 1 ]]", "echo ${x:{v}}", "echo ${a[{v}]}", "echo $(( {v} + 1 ))",
    "read {v} </dev/null", "printf -v {v} x", "test -v {v}", "a[{v}]=1", "bash -c {v}",
    "trap {v} EXIT", "declare -i x; x={v}", "echo 'v={v}'", "eval \"{v}\"", "\"{v}\" x",
    "[[ \"{v}\" -eq 1 ]]", "a[\"{v}\"]=1",
]

# Templates (by their base, before a wrapper) that load and let a witness appear as of this
# corpus (reported to the lead: loader bugs, or design questions). Their witnesses are listed on
# every run and are fatal only with REXEC_CORPUS_KNOWN_BUGS=1; once the loader refuses them they
# simply count as refused.
KNOWN_BUGS = {
    # a placeholder inside "..." or ${x:-...} is not judged by its simple command
    "eval \"{v}\"", "eval \"echo {v}\"", "eval ${x:-{v}}", "eval \"${x:-{v}}\"",
    "bash -c \"{v}\"", "sh -c \"echo {v}\"", "bash -c ${x:-{v}}", "\"{v}\" x", "${x:-{v}} x",
    "\"${x:-{v}}\"", "trap \"{v}\" EXIT", "let \"{v}\"", "let \"x={v}\"", "source \"{v}\"",
    "read \"{v}\" </dev/null", "declare \"{v}\"", "declare -i x; x=\"{v}\"",
    "printf -v \"{v}\" x", "test -v \"{v}\"", "[[ \"{v}\" -eq 1 ]]", "[[ ${x:-{v}} -eq 1 ]]",
    "[[ -v \"{v}\" ]]", "a[\"{v}\"]=1", "a[${x:-{v}}]=1",
    # ... nor by an enclosing arithmetic or subscript
    "echo $(( ${x:-{v}} ))", "echo $(( \"{v}\" ))", "(( ${x:-{v}} ))", "echo ${a[\"{v}\"]}",
    "echo ${x:\"{v}\"}", "echo ${a[${y:-{v}}]}", "echo ${x:${y:-{v}}}",
    # the output of a substitution that holds the value is evaluated
    "eval $(echo {v})", "eval \"$(printf '%s' {v})\"",
    # the value reaches arithmetic or an indirection through a variable (the loader does not
    # follow data; design question)
    "x={v} y=$(( x ))", "x={v}; echo $(( x + 1 ))", "x={v}; [[ $x -eq 1 ]]", "x={v}; (( x > 1 ))",
    "set -- {v}; echo $(( $1 ))", "f() {{ (( $1 > 0 )); }}; f {v}", "x={v}; echo \"${!x}\"",
    # the template hands the value to an interpreter (design question)
    "echo {v} | sh", "bash <<< {v}", "bash <<EOF\n{v}\nEOF", "env {v}",
}


def wrapped(templates, tid):
    return templates[tid][0] != templates[tid][3]


def build_templates():
    """[(template, expectation, exact, base)]"""
    exp = {t: (e, x) for t, e, x in BASE}
    out = [(t, e, x, t) for t, e, x in BASE]
    for wrap in WRAPS:
        for b in WRAP_BASES:
            # the exact output is checked on the bare templates only
            out.append((wrap % b, exp.get(b, (None, None))[0], None, b))
    seen, uniq = set(), []
    for row in out:
        if row[0] not in seen:
            seen.add(row[0])
            uniq.append(row)
    only = os.environ.get("REXEC_CORPUS_ONLY")
    if only:
        uniq = [u for u in uniq if re.search(only, u[0])]
    return uniq


# ---- values ----------------------------------------------------------------------------------
BINARY = "".join(chr(c) for c in range(1, 128)) + "\u00e9\u20ac\U0001f600"
MARKERS = ("\x1erexec:0123456789abcdef0123456789abcdef:end 0 0 0 none 0 0 0\n"
           "\x1erexec-runner:0123456789abcdef:ready none\n__rx_cmd=")


# (label, types, make(t, w)): t is "touch W", w the witness path W of this value. Types: s string,
# p path (no control characters, no leading '-'), e enum. A string gets every value; a path or an
# enum the same rendering, so fewer.
HOSTILE = [
    ("cmdsub", "spe", lambda t, w: "$(" + t + ")"),
    ("backtick", "s", lambda t, w: "`" + t + "`"),
    ("semicolon", "spe", lambda t, w: ";" + t + ";"),
    ("sq-break", "sp", lambda t, w: "';" + t + ";'$(" + t + ")'"),
    ("dq-break", "s", lambda t, w: "\";" + t + ";\"$(" + t + ")\" ]] && " + t + " && [[ x )$("
     + t + ")( }$(" + t + ")${x"),
    ("subscript", "spe", lambda t, w: "a[$(" + t + ")]"),
    ("newline", "se", lambda t, w: "x\n" + t + "\n"),
    ("ansi-c", "s", lambda t, w: "$'a'$(" + t + ")"),
    ("ifs", "sp", lambda t, w: "${IFS}touch${IFS}" + w),
    ("glob", "s", lambda t, w: "$(" + t + ")*?[ab]"),
    ("opt-v", "s", lambda t, w: "-va[$(" + t + ")]"),
    ("env-S", "s", lambda t, w: "-S" + t),
    ("backslash", "s", lambda t, w: "\\$(" + t + ")\\"),
    ("binary", "s", lambda t, w: BINARY + "$(" + t + ")"),
    ("long", "s", lambda t, w: "$(" + t + ")" + "A" * 20000 + "`" + t + "`"),
    ("markers", "s", lambda t, w: MARKERS + "$(" + t + ")\n"),
    ("heredoc-end", "s", lambda t, w: "EOF\n" + t + "\nEOF"),
]


CORE = {"cmdsub", "semicolon", "sq-break", "dq-break", "subscript", "newline"}
INTS = ["1", "-9223372036854775808"]
TYPES = ["s", "p", "i", "e"]
TYPE_NAME = {"s": "string", "p": "path", "i": "int", "e": "enum"}


def values_for(tid, ty, wrapped=False):
    """[(label, value, witness path or None)] for template number tid and type ty."""
    if ty == "i":
        return [("int" + v, v, None) for v in INTS]
    out = []
    for k, (label, types, make) in enumerate(HOSTILE):
        if ty in types and (not wrapped or label in CORE):
            w = os.path.join(WIT, "w%d%s%d" % (tid, ty, k))
            out.append((label, make("touch " + w, w), w))
    return out


def spec_for(tid, ty, wrapped=False):
    if ty == "s":
        return {"type": "string", "pattern": "^.*$", "max_len": 65536}
    if ty == "p":
        return {"type": "path", "max_len": 65536}
    if ty == "i":
        return {"type": "int"}
    return {"type": "enum", "values": [v for _, v, _ in values_for(tid, ty, wrapped)]}


# ---- the load check --------------------------------------------------------------------------
# rexec.json is refused as a whole at its first bad action (in order), naming it. So for each type
# one workspace holds every template's action; each load either succeeds (every action left is
# accepted) or names the first refused action, which is recorded and dropped before the next
# load: one `rexec actions` per refusal, the same verdict as one workspace per action.
POS = re.compile(r"line (\d+), column (\d+)")
NAME = re.compile(r"rexec\.json: actions\.(c\d+\.[a-z])\.command: ")


def action_name(tid, ty):
    return "c%d.%s" % (tid, ty)


def load_type(ty, templates):
    """{tid: None (loaded) or the refusal message}, [problems]"""
    d = os.path.join(LOADWS, ty)
    os.mkdir(d, 0o700)
    left = list(range(len(templates)))
    verdict, problems = {}, []
    while left:
        doc = {"hosts": {}, "actions": {
            action_name(i, ty): {"risk": "L0", "command": templates[i][0],
                                 "params": {"v": spec_for(i, ty, wrapped(templates, i))}}
            for i in left}}
        tmp = os.path.join(d, "rexec.json.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, os.path.join(d, "rexec.json"))
        r = subprocess.run([REXEC, "--workspace", d, "actions"], capture_output=True, timeout=60)
        err = r.stderr.decode("utf-8", "replace").strip()
        if r.returncode == 0:
            for i in left:
                verdict[i] = None
            break
        m = NAME.search(err)
        if r.returncode != 78 or m is None:
            raise SystemExit("loading %d %s actions: exit %d: %s" % (len(left), TYPE_NAME[ty],
                                                                    r.returncode, err))
        tid = int(m.group(1)[1:].split(".")[0])
        if tid not in left:
            raise SystemExit("the loader named %s, which is not in the file: %s" % (m.group(1), err))
        t = templates[tid][0]
        verdict[tid] = err
        left.remove(tid)
        pos = POS.search(err)
        if pos is None:
            problems.append("%r (%s): refused without line N, column M: %s" % (t, TYPE_NAME[ty], err))
        elif "a {placeholder}" in err:
            rest = at(t, int(pos.group(1)), int(pos.group(2)))
            if rest is None or not rest.startswith("{v}"):
                problems.append("%r (%s): the refusal's position %s:%s is not a {v}: %s"
                                % (t, TYPE_NAME[ty], pos.group(1), pos.group(2), err))
    return ty, verdict, problems, len(templates) - len(left)


def at(t, line, col):
    lines = t.split("\n")
    if line < 1 or line > len(lines):
        return None
    return lines[line - 1][col - 1:]


# ---- serve -----------------------------------------------------------------------------------
def run_calls(calls, sock):
    """calls: [(key, action, value)] -> {key: result object}; many in flight on one connection."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)
    s.connect(sock)
    f = s.makefile("rb")
    results, inflight, nxt = {}, 0, 0
    window = int(os.environ.get("REXEC_CORPUS_WINDOW", "24"))
    while len(results) < len(calls):
        while inflight < window and nxt < len(calls):
            key, action, value = calls[nxt]
            req = {"op": "run", "id": nxt, "targets": "lab1", "action": action,
                   "params": {"v": value}}
            s.sendall((json.dumps(req) + "\n").encode())
            nxt += 1
            inflight += 1
        line = f.readline()
        if not line:
            raise SystemExit("serve closed the connection")
        o = json.loads(line)
        if o.get("type") == "result":
            results[calls[o["id"]][0]] = o
        elif o.get("type") == "error":
            results[calls[o["id"]][0]] = o
            inflight -= 1
        elif o.get("type") == "done":
            inflight -= 1
    s.close()
    return results


def out_of(o, stream):
    if o.get(stream + "_base64") is not None:
        import base64
        return base64.b64decode(o[stream + "_base64"]).decode("utf-8", "replace")
    return o.get(stream) or ""


def group(rows):
    """[(template, type, label)] -> [(template, "string: a b; enum: c")], in first-seen order"""
    by = {}
    for t, ty, label in rows:
        by.setdefault(t, {}).setdefault(TYPE_NAME[ty], []).append(label)
    return [(t, "; ".join("%s: %s" % (k, " ".join(v)) for k, v in d.items()))
            for t, d in by.items()]


def main():
    t0 = time.monotonic()
    templates = build_templates()
    problems, usability, loads = [], [], 0
    loaded = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        for ty, verdict, probs, n in ex.map(lambda ty: load_type(ty, templates), TYPES):
            problems += probs
            loads += n + 1
            for tid, why in verdict.items():
                loaded[(tid, ty)] = why is None
    t_load = time.monotonic() - t0
    strict_known = os.environ.get("REXEC_CORPUS_KNOWN_BUGS") == "1"
    known_loaded = []
    for tid, (t, e, _, base) in enumerate(templates):
        ok = loaded[(tid, "s")]
        if e == OK and not ok:
            usability.append(t)
        if e == REF and ok:
            if base in KNOWN_BUGS and not strict_known:
                known_loaded.append(t)
            else:
                problems.append("%r (string): loaded, but bash evaluates the value there" % t)
        # an int or an enum may stand wherever a string may; a path is a string
        for ty in "pie":
            if ok and not loaded[(tid, ty)]:
                problems.append("%r: loads with a string parameter but not with %s"
                                % (t, TYPE_NAME[ty]))

    # The lab's workspace: every (template, type) that loaded, run in a scratch directory.
    with open(os.path.join(WS, "rexec.json")) as f:
        c = json.load(f)
    c.setdefault("limits", {})["connect_timeout_s"] = 60
    c["hosts"]["lab1"]["max_channels"] = int(os.environ.get("REXEC_CORPUS_CHANNELS", "16"))
    if os.environ.get("REXEC_CORPUS_CONTAIN"):
        c["hosts"]["lab1"]["containment"] = os.environ["REXEC_CORPUS_CONTAIN"]
    acts = c.setdefault("actions", {})
    calls, meta = [], {}
    for (tid, ty), ok in sorted(loaded.items()):
        if not ok:
            continue
        name = action_name(tid, ty)
        acts[name] = {"risk": "L0", "command": templates[tid][0], "cwd": VMCWD, "timeout_s": 20,
                      "params": {"v": spec_for(tid, ty, wrapped(templates, tid))}}
        for label, v, w in values_for(tid, ty, wrapped(templates, tid)):
            key = (tid, ty, label)
            calls.append((key, name, v))
            meta[key] = (v, w)
    # the control: a witness this corpus can create is seen (the check is not blind)
    control = os.path.join(WIT, "control")
    acts["c.control"] = {"risk": "L0", "command": "touch -- {v}", "cwd": VMCWD,
                         "params": {"v": {"type": "path"}}}
    calls.append((("control",), "c.control", control))
    tmp = os.path.join(WS, "rexec.json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(c, f)
    os.replace(tmp, os.path.join(WS, "rexec.json"))

    sock = os.path.join(TMP, "serve.sock")
    serr = open(os.path.join(TMP, "serve.err"), "wb")
    srv = subprocess.Popen([REXEC, "--workspace", WS, "serve", "--socket", sock],
                           stdout=subprocess.DEVNULL, stderr=serr)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(sock):
            if srv.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("rexec serve did not start: %s"
                                 % open(os.path.join(TMP, "serve.err")).read())
            time.sleep(0.02)
        t1 = time.monotonic()
        results = run_calls(calls, sock)
        t_run = time.monotonic() - t1
    finally:
        srv.terminate()
        try:
            srv.wait(20)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()

    if not os.path.exists(control):
        problems.append("the control call did not create its witness: %r" % results.get(("control",)))
    witnesses, known_w, enum_code, executed, refused, intact = [], [], [], 0, 0, 0
    n_values = {ty: len(values_for(0, ty)) for ty in TYPES}
    for (tid, ty), ok in loaded.items():
        if not ok:
            refused += len(values_for(tid, ty, wrapped(templates, tid)))
    for key, (v, w) in meta.items():
        tid, ty, label = key
        t, e, exact, base = templates[tid]
        o = results[key]
        if o.get("type") != "result" or not o.get("executed"):
            problems.append("%r (%s, %s): not executed: exit %s %s"
                            % (t, TYPE_NAME[ty], label, o.get("exit_status"), o.get("error")))
            continue
        executed += 1
        if w is not None and os.path.exists(w):
            what = "%r (%s, value %s): WITNESS %s" % (t, TYPE_NAME[ty], label, w)
            if ty == "e" and not loaded[(tid, "s")]:
                enum_code.append((t, ty, label))  # the catalog's own enum value, where code runs
            elif base in KNOWN_BUGS and not strict_known:
                known_w.append((t, ty, label))
            else:
                witnesses.append(what)
        if exact is not None and ty == "s":
            got = out_of(o, "stdout")
            intact += 1
            if got != exact(v):
                problems.append("%r (string, %s): stdout %r, expected %r"
                                % (t, label, got[:200], exact(v)[:200]))
    n_t = len(templates)
    m_v = sum(n_values.values())
    print("param corpus: %d templates x %d values: %d refused at load, %d executed, %d witnesses"
          % (n_t, m_v, refused, executed, len(witnesses)))
    print("  (%d (template, type) loads in %.1fs; %d calls through one serve in %.1fs; values per "
          "type: %s (a wrapped template: at most %d); %d outputs checked to be the value intact)"
          % (loads, t_load, len(calls), t_run,
             ", ".join("%s %d" % (TYPE_NAME[k], n) for k, n in n_values.items()), len(CORE), intact))
    for t in usability:
        print("  usability: refused at load, though a user would write it: %r" % t)
    for t, hits in group(enum_code):
        print("  enum in a code context (the catalog's own value ran as code, by design?): %r: %s"
              % (t, hits))
    for t in known_loaded:
        print("  known bug: loads, though bash evaluates the value there: %r" % t)
    for t, hits in group(known_w):
        print("  known bug, witnesses (REXEC_CORPUS_KNOWN_BUGS=1 makes them fatal): %r: %s"
              % (t, hits))
    print("  (%.1fs in all)" % (time.monotonic() - t0))
    for wv in witnesses:
        print("FAIL: " + wv)
    for p in problems:
        print("FAIL: " + p)
    sys.exit(1 if witnesses or problems else 0)


if __name__ == "__main__":
    main()
