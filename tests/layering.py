#!/usr/bin/env python3
"""Keeps the layering of src/ true (docs/architecture.md, "The tree").

src/ holds one folder per layer, lowest first. A file may include headers of its own folder and of
the folders below it, never above. Between modules (a .c/.h pair, or a lone .c or .h) no include
cycle is allowed, inside a folder or across folders. A header named *_int.h is private to its
folder (src/ssh/ssh_int.h is the only includer of libssh2.h). The front end (src/cli/) reaches the library
only through include/rexec.h and its own headers.

Usage: tests/layering.py [SRC_ROOT]   (default: the repository this file is in)
Exits 0 when the tree keeps the rules, 1 with one line per violation otherwise.
"""
import os
import re
import sys

LAYERS = ["base", "redact", "config", "policy", "shell", "record", "ssh", "api", "cli"]
FRONT_ENDS = {"cli"}
# Front-end files that still reach below the public API, each with the header it uses. The list
# only shrinks: a new entry is a violation. (Empty since the approval commands use the public
# rexec_approvals_* calls.)
FRONT_END_EXCEPTIONS = set()
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(src):
    """{module name: (layer, [paths])}; a module is a file name without .c/.h."""
    mods = {}
    for layer in os.listdir(src):
        d = os.path.join(src, layer)
        if not os.path.isdir(d):
            continue
        for f in os.listdir(d):
            if f.endswith((".c", ".h")):
                name = f[:-2]
                if name in mods and mods[name][0] != layer:
                    raise SystemExit(f"layering: module {name} exists in two folders")
                mods.setdefault(name, (layer, []))[1].append(os.path.join(d, f))
    return mods


def includes(path):
    with open(path, encoding="utf-8") as fh:
        return INCLUDE.findall(fh.read())


def find_cycle(graph):
    """One cycle of the directed graph {node: set(nodes)} as a list, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def check(root):
    src = os.path.join(root, "src")
    mods = modules(src)
    problems = []
    for layer in sorted({l for l, _ in mods.values()}):
        if layer not in LAYERS:
            problems.append(f"src/{layer}/: not a known layer (tests/layering.py LAYERS)")
    graph = {}
    for name, (layer, paths) in sorted(mods.items()):
        for path in sorted(paths):
            rel = os.path.relpath(path, root)
            for inc in includes(path):
                target = os.path.basename(inc)
                if target == "rexec.h" or target.endswith("_embed.h"):
                    continue
                tname = target[:-2]
                if tname not in mods:
                    continue  # a generated or system-like header
                tlayer = mods[tname][0]
                if tname.endswith("_int") and tlayer != layer:
                    problems.append(f"{rel}: includes {inc}, which is private to {tlayer}/")
                elif layer in FRONT_ENDS and tlayer != layer and (rel, inc) in FRONT_END_EXCEPTIONS:
                    pass
                elif layer in FRONT_ENDS and tlayer != layer:
                    problems.append(f"{rel}: includes {inc} ({tlayer}/); a front end reaches "
                                    "the library only through include/rexec.h")
                elif LAYERS.index(tlayer) > LAYERS.index(layer):
                    problems.append(f"{rel}: includes {inc}, which is in {tlayer}/, "
                                    f"above {layer}/")
                # A private *_int.h declares what its folder's modules implement: it belongs to
                # them, so its own includes do not form cycles with them.
                if tname != name and not name.endswith("_int"):
                    graph.setdefault(name, set()).add(tname)
    for name, (layer, paths) in sorted(mods.items()):
        for path in paths:
            if name != "ssh_int" and "#include <libssh2.h>" in open(path, encoding="utf-8").read():
                problems.append(f"{os.path.relpath(path, root)}: includes libssh2.h; only "
                                "src/ssh/ssh_int.h may")
    cycle = find_cycle(graph)
    if cycle:
        problems.append("include cycle between modules: " + " -> ".join(cycle))
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print("layering: " + p)
    if problems:
        return 1
    print("layering: ok (%s)" % " < ".join(LAYERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
