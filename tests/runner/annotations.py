"""The test programs' annotation language, and its one parser, for both
suites whose programs describe themselves: tests/e2e/progs (read by
suite/specs.py) and tests/hostile/progs (tests/hostile/run.py).

A program says what it must do in its first comment, one fact a line:

    @KEY WORD...            (a leading " * " is allowed)

Each suite names the keys it knows; a key it does not know is an error,
not a line passed over (a mistyped @vg would quietly drop the valgrind
check). The forms the suites share:

    BYTES/BLOCKS            a size: "100/1"
    KIND=BYTES/BLOCKS       a leak kind's total; KIND one of the leak
                            summary's kinds (definitely_lost ... suppressed)
    @kinds DEPTH [case=CASE] KIND=BYTES/BLOCKS...
                            the leak summary of the process at DEPTH (0:
                            the one started, 1: its forked child...);
                            case=: for that @case of the program only
"""
import re

from .harness import SUMMARY_KINDS

LINE = re.compile(r"^\s*\*?\s*@([a-z][\w-]*)\s*(.*?)\s*$")


def read(path, known):
    """[(key, words, rest)] of the @ lines of path's first comment, in
    order (rest: the line after the key, as written). ValueError for a
    key not in known."""
    with open(path) as f:
        head = f.read().split("*/", 1)[0]
    out = []
    for line in head.split("\n"):
        m = LINE.match(line)
        if not m:
            continue
        key, rest = m.group(1), m.group(2)
        if key not in known:
            raise ValueError("%s: unknown directive @%s (known: %s)" % (
                path, key, " ".join(sorted(known))))
        out.append((key, rest.split(), rest))
    return out


def bytes_blocks(text, path):
    b, slash, n = text.partition("/")
    if not slash or not b.isdigit() or not n.isdigit():
        raise ValueError("%s: %r is not BYTES/BLOCKS" % (path, text))
    return int(b), int(n)


def kind_name(word, path, allowed=SUMMARY_KINDS):
    if word not in allowed:
        raise ValueError("%s: unknown kind %r (one of %s)" % (
            path, word, ", ".join(allowed)))
    return word


def kinds(words, path):
    """The words of a @kinds line: (depth, case or None, {kind: (bytes,
    blocks)}) with the kinds it names."""
    if not words or not words[0].isdigit():
        raise ValueError("%s: @kinds wants DEPTH first: %r" % (path, " ".join(words)))
    rest = words[1:]
    case = None
    if rest and rest[0].startswith("case="):
        case = rest.pop(0)[len("case="):]
    got = {}
    for w in rest:
        k, eq, v = w.partition("=")
        if not eq:
            raise ValueError("%s: @kinds wants KIND=BYTES/BLOCKS, not %r" % (path, w))
        got[kind_name(k, path)] = bytes_blocks(v, path)
    return int(words[0]), case, got
