#!/usr/bin/python3
"""The approvers' console and web page (python/rexec_client/approver.py, visible()) show text
exactly as the terminal's approval prompt does (rx_approval_clean, through tests/tools/clean_text):
every code point but the newline, NUL and surrogates, after a letter, alone and after a space,
and a few strings made to mislead (an escape sequence, a right-to-left override, a mark after an
escape). Prints the count; exit 1 on any difference.
Usage: t_visible_py.py CLEAN_TEXT SRC_DIR"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(sys.argv[2], "python"))
from rexec_client.approver import visible  # noqa: E402

EXTRA = ["\x1b[2Jrm -rf /", "ok\u202eevil", "a\u0301\u0301", "\x07\u0301", " \u0301",
         "tab\there\rcr", "\u200b\u2066x\u2069", "e\U000e0041", "\u00ad\u3000\u2800"]


def main():
    cps = [cp for cp in range(1, 0x110000) if cp != 0x0A and not 0xD800 <= cp <= 0xDFFF]
    lines = EXTRA[:]
    for cp in cps:
        ch = chr(cp)
        lines += ["a" + ch + "z", ch + "z", " " + ch + "z"]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    out = subprocess.run([sys.argv[1]], input=data, capture_output=True, check=True).stdout
    want = out.decode("utf-8").split("\n")
    bad = [(s, want[i], visible(s)) for i, s in enumerate(lines) if visible(s) != want[i]]
    print("visible: %d strings: the Python escaping differs from the prompt's in %d"
          % (len(lines), len(bad)))
    for s, w, g in bad[:20]:
        print("  %r: prompt %r, python %r" % (s, w, g))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
