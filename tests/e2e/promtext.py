"""A strict reader of the Prometheus text exposition format 0.0.4, standard library only
(tests/e2e/t_serve_metrics.sh). parse(text) -> {"families": {name: type}, "samples": {(name,
frozenset(labels.items())): value}}; raises ValueError naming the line that breaks the format:
every sample belongs to a family declared by a HELP and a TYPE line before it, names and label
names are valid, label values are quoted with only \\\\, \\" and \\n escapes, values are floats,
the text ends in a newline, and each histogram has cumulative buckets ending in +Inf equal to
its _count, and a _sum."""
import math
import re

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*$")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def _labels(s, lineno):
    labels, i = {}, 0
    while i < len(s):
        eq = s.index("=", i)
        name = s[i:eq]
        if not LABEL.match(name) or s[eq + 1] != '"':
            raise ValueError("line %d: bad label %r" % (lineno, s[i:]))
        j, val = eq + 2, []
        while s[j] != '"':
            if s[j] == "\\":
                esc = {"\\": "\\", '"': '"', "n": "\n"}.get(s[j + 1])
                if esc is None:
                    raise ValueError("line %d: bad escape in a label value" % lineno)
                val.append(esc)
                j += 2
            else:
                val.append(s[j])
                j += 1
        labels[name] = "".join(val)
        i = j + 1
        if i < len(s):
            if s[i] != ",":
                raise ValueError("line %d: expected , between labels" % lineno)
            i += 1
    return labels


def _family(name, types):
    if name in types:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) == "histogram":
            return name[: -len(suffix)]
    return None


def parse(text):
    if not text.endswith("\n"):
        raise ValueError("the text does not end in a newline")
    types, helps, samples = {}, set(), {}
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not NAME.match(parts[2]):
                raise ValueError("line %d: bad %s line" % (n, parts[1]))
            if parts[1] == "HELP":
                helps.add(parts[2])
            elif parts[3] not in TYPES or parts[2] in types:
                raise ValueError("line %d: bad or repeated TYPE" % n)
            else:
                types[parts[2]] = parts[3]
            continue
        if line.startswith("#") or not line:
            raise ValueError("line %d: a comment or empty line" % n)
        m = re.match(r"([^{ ]+)(?:\{(.*)\})? (\S+)$", line)
        if not m or not NAME.match(m.group(1)):
            raise ValueError("line %d: not a sample: %r" % (n, line))
        fam = _family(m.group(1), types)
        if fam is None or fam not in helps:
            raise ValueError("line %d: %s has no HELP and TYPE before it" % (n, m.group(1)))
        key = (m.group(1), frozenset(_labels(m.group(2) or "", n).items()))
        if key in samples:
            raise ValueError("line %d: a repeated sample" % n)
        samples[key] = float(m.group(3))
    for fam, t in types.items():
        if t == "histogram":
            _check_histogram(fam, samples)
    return {"families": types, "samples": samples}


def _check_histogram(fam, samples):
    buckets = sorted(((float(dict(k[1])["le"]), v) for k, v in samples.items()
                      if k[0] == fam + "_bucket"))
    if not buckets or buckets[-1][0] != math.inf:
        raise ValueError("%s: no +Inf bucket" % fam)
    if any(b[1] > c[1] for b, c in zip(buckets, buckets[1:])):
        raise ValueError("%s: buckets are not cumulative" % fam)
    count = samples.get((fam + "_count", frozenset()))
    if count != buckets[-1][1] or (fam + "_sum", frozenset()) not in samples:
        raise ValueError("%s: _count differs from the +Inf bucket, or no _sum" % fam)


def value(parsed, name, **labels):
    return parsed["samples"][(name, frozenset(labels.items()))]
