#!/usr/bin/python3
"""The approval prompt shows every character a person can see as it is and escapes every other
one (issue #31 item 5), checked over the whole Unicode range against Python's unicodedata, not
against rexec's own table: each code point (but the newline and surrogates) goes through
rx_approval_clean (tests/tools/clean_text; NUL, which no value holds, aside) three times, after a letter (a base), alone, and after
a space. Must be escaped everywhere: Cc, Cf, Zl, Zp, every Zs but U+0020, Co, Cn, variation
selectors, tag characters, the combining grapheme joiner, Hangul fillers, the Khmer inherent
vowels, the braille blank; a combining mark (Mn, Me) is escaped without a base and shown on one;
every other code point is shown as it is. Prints the counts; exit 1 on any difference."""
import subprocess
import sys
import unicodedata

HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Co", "Cn"}
NAMED = set(range(0xFE00, 0xFE10)) | set(range(0xE0100, 0xE01F0)) | set(range(0x180B, 0x1810)) \
    | set(range(0xE0000, 0xE0080)) | {0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x17B4, 0x17B5,
                                      0x2800, 0x061C, 0x00AD, 0x1D173, 0x1D17A}


def escape(cp):
    if cp < 0x80:
        return {9: "\\t", 13: "\\r"}.get(cp, "\\x%02x" % cp)
    return "\\u%04x" % cp if cp <= 0xFFFF else "\\U%08x" % cp


def must_hide(cp):
    cat = unicodedata.category(chr(cp))
    return cat in HIDDEN or (cat == "Zs" and cp != 0x20) or cp in NAMED


def main():
    # NUL cannot be in a C string (and no value holds one: the loader refuses it)
    cps = [cp for cp in range(1, 0x110000) if cp != 0x0A and not 0xD800 <= cp <= 0xDFFF]
    lines = []
    for cp in cps:
        ch = chr(cp)
        lines += ["a" + ch + "z", ch + "z", " " + ch + "z"]
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    out = subprocess.run([sys.argv[1]], input=data, capture_output=True, check=True).stdout
    got = out.decode("utf-8").split("\n")
    bad, hidden, shown, marks = [], 0, 0, 0
    for i, cp in enumerate(cps):
        ch, e = chr(cp), escape(cp)
        based, alone, spaced = got[3 * i], got[3 * i + 1], got[3 * i + 2]
        cat = unicodedata.category(ch)
        if must_hide(cp):
            want = ("a" + e + "z", e + "z", " " + e + "z")
            hidden += 1
        elif cat in ("Mn", "Me"):
            want = ("a" + ch + "z", e + "z", " " + e + "z")
            marks += 1
        else:
            want = ("a" + ch + "z", ch + "z", " " + ch + "z")
            shown += 1
        if (based, alone, spaced) != want:
            bad.append("U+%04X (%s): got %r, want %r" % (cp, cat, (based, alone, spaced), want))
    print("invisible: %d code points (Unicode %s): %d escaped, %d combining marks escaped without "
          "a base, %d shown; %d wrong" % (len(cps), unicodedata.unidata_version, hidden, marks,
                                          shown, len(bad)))
    for b in bad[:20]:
        print("  " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
