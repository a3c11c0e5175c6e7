#!/usr/bin/env python3
"""heapprof — reads heap dumps in the legacy gperftools heap-profile text
format, as heaptrail writes them, the way jeprof and Google's pprof read
them; the tests' own reader, independent of both.

    heapprof.py check DUMP                  is the file whole and readable
                                            by both jeprof and pprof?
    heapprof.py top [--base BASE] PROG DUMP estimated in-use bytes per
                                            function (first frame after
                                            the allocator), unbiased as
                                            pprof does it
    heapprof.py from-jemalloc JEDUMP OUT    converts a dump of jemalloc's
                                            own profiler (its threaded
                                            heap_v2 layout, which pprof
                                            cannot read) to the legacy
                                            format, as a reference input

The format:

    heap profile: N: B [ N2: B2] @ heap_v2/S
     n: b [ n2: b2] @ 0xPC 0xPC ...
    ...
    <blank line>
    MAPPED_LIBRARIES:
    <the process's /proc/self/maps>

n/b are the sampled in-use objects and bytes of one stack, n2/b2 those
allocated so far, raw.  A reader unbiases each line on its own: with the
line's mean block size a = b/n, a block of that size was sampled with
probability 1 - exp(-a/S), so n and b are multiplied by
1/(1 - exp(-a/S)) (pprof truncates each product to an integer, jeprof
keeps floats); S <= 1 means every allocation was recorded.

What the two readers accept differs, and what one of them does not match
it drops without a word or misreads, so `check` holds a dump to what both
accept (each point below was tried on jeprof 5.3.0 and pprof from
bookworm's golang-github-google-pprof-dev):
  - header: at least one space after each colon (jeprof's ":\s+"; without
    it jeprof does not see the header and silently does not unbias),
    no space before "]" (jeprof), "@ heap_v2/S" with S given (without S
    jeprof assumes 128 KiB and pprof does not unbias at all);
  - pprof gives a dump allocated-so-far columns (inuse_space, alloc_space,
    ...) only when the header's bracketed pair differs from its in-use
    pair *as text* and is not "0"; otherwise it reads one "space" column,
    so -sample_index=inuse_space is an error, and -base between such a
    dump and an ordinary one fails ("inconsistent samples type count: 4
    != 2"); heaptrail writes "[012: 3400]" when nothing was freed yet
    (jeprof reads 012 as 12);
  - sample lines: a space after each colon (jeprof silently drops a line
    without), none before "]" (same), exactly one space between "]" and
    "@" (pprof's "] @": two spaces fail the whole file), lower-case hex
    (pprof reads "0x7F.." as 0x7 and silently attributes the line to
    nothing); leading spaces or tabs are fine for both;
  - "MAPPED_LIBRARIES:" at the start of its line (indented, jeprof
    silently symbolizes nothing), maps lines as in /proc/self/maps; without
    the section pprof fails; jeprof finds the main program's lines only
    when their path equals the real path of the PROG it was given;
  - lines starting with '#' are skipped by both, among the samples and
    among the maps (heaptrail writes "# heaptrail-dump ms=..." after the
    header and "# build-id HEX PATH" lines after the maps);
  - pprof subtracts 1 from every PC before symbolizing, jeprof from all
    but the first; both drop allocator frames by name (malloc, calloc,
    operator new, ...), so a stack should start at the allocator or at
    its caller: a frame of the agent's own would become the "flat" owner
    of every line in `-top`.

Python standard library only; binutils' nm and readelf for `top`.
"""

import math
import os
import re
import subprocess
import sys

# What both jeprof and pprof accept (see above).
HEADER_RE = re.compile(r"^heap profile: *(\d+): +(\d+) +\[ *(\d+): +(\d+)\]"
                       r" *@ *heap_v2/(\d+) *$")
SAMPLE_RE = re.compile(r"^\s*(\d+): +(\d+) +\[ *(\d+): +(\d+)\] @"
                       r"((?: 0x[0-9a-f]+)+)\s*$")
# Looser: what the file roughly looks like, to say what is wrong with it.
LOOSE_HEADER_RE = re.compile(r"^heap profile:\s*(\d+):\s*(\d+)\s*\[\s*(\d+):"
                             r"\s*(\d+)\s*\]\s*@\s*(\S+?)(?:/(\d+))?\s*$")
LOOSE_SAMPLE_RE = re.compile(r"^\s*(-?\d+):\s*(-?\d+)\s*\[\s*(\d+):\s*(\d+)"
                             r"\s*\]\s*@\s*((?:\s*0x[0-9a-fA-F]+)+)\s*$")
MAPS_RE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) ([-r][-w][-x][sp]) "
                     r"([0-9a-f]+) [0-9a-f]+:[0-9a-f]+ \d+\s*(.*)$")


class FormatError(Exception):
    pass


class Profile:
    """A parsed dump.  samples: [(n, b, n2, b2, (pc, ...))], raw;
    maps: [(start, end, perms, offset, path)]; problems: what jeprof or
    pprof would not read as meant (empty for a good file)."""

    def __init__(self):
        self.header = None          # (N, B, N2, B2)
        self.header_text = None     # the same four as written
        self.period = None          # S
        self.samples = []
        self.maps = []
        self.maps_text = ""
        self.problems = []

    @property
    def has_alloc(self):
        """Whether pprof reads allocated-so-far columns (inuse_space and
        friends) from this file: its header's two pairs differ as text
        (pprof's parseHeapHeader compares the strings)."""
        n, b, n2, b2 = self.header_text
        return (n2 != n and n2 != "0") or (b2 != b and b2 != "0")

    def scale(self, n, b):
        """pprof's scaleHeapSample: (count, bytes) unbiased, truncated."""
        return scale(n, b, self.period)

    def total_inuse(self):
        """Estimated bytes in use: the lines unbiased one by one."""
        return sum(self.scale(n, b)[1] for n, b, _, _, _ in self.samples)

    def total_alloc(self):
        """Estimated bytes allocated so far."""
        return sum(self.scale(n2, b2)[1] for _, _, n2, b2, _ in self.samples)


def scale(n, b, period):
    """pprof's scaleHeapSample (profile/legacy_profile.go): each line
    divided by the probability that a block of its mean size is sampled,
    1 - exp(-(b/n)/S), each product truncated to an integer."""
    if n == 0 or b == 0:
        return 0, 0
    if period <= 1:
        return n, b
    avg = float(b) / float(n)
    k = 1 / (1 - math.exp(-avg / float(period)))
    return int(float(n) * k), int(float(b) * k)


def jeprof_scale(n, b, period):
    """jeprof's AdjustSamples for heap_v2: the same, in floats."""
    if n == 0:
        return 0.0, 0.0
    k = 1 / (1 - math.exp(-((b * 1.0) / n) / period))
    return n * k, b * k


def parse(path):
    """Reads a dump; raises FormatError when it is not one at all (no
    header, truncated before MAPPED_LIBRARIES), records smaller
    deviations in .problems."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        problems = ["not ASCII"]
    else:
        problems = []
    lines = text.split("\n")
    p = Profile()
    p.problems = problems
    if not lines or not lines[0]:
        raise FormatError("%s: empty" % path)
    m = HEADER_RE.match(lines[0])
    if m:
        p.header_text = m.groups()[:4]
        p.header = tuple(int(x) for x in p.header_text)
        p.period = int(m.group(5))
    else:
        lm = LOOSE_HEADER_RE.match(lines[0])
        if not lm:
            raise FormatError("%s: first line is not a heap profile header: "
                              "%r" % (path, lines[0][:120]))
        p.problems.append("header %r is not in the spelling both jeprof "
                          "and pprof read (\"heap profile: N: B [ N2: B2] @ "
                          "heap_v2/S\")" % lines[0][:120])
        p.header_text = lm.groups()[:4]
        p.header = tuple(int(x) for x in p.header_text)
        p.period = int(lm.group(6)) if lm.group(6) else None
        if lm.group(5) != "heap_v2" or p.period is None:
            p.problems.append("header type %r, expected heap_v2/S" %
                              lm.group(5))
            p.period = p.period or 1
    i = 1
    blank_before_maps = False
    while i < len(lines):
        line = lines[i]
        if line.startswith("MAPPED_LIBRARIES:"):
            break
        if "MAPPED_LIBRARIES:" in line:
            p.problems.append("line %d: MAPPED_LIBRARIES: not at the start "
                              "of the line (jeprof does not see it)" % (i + 1))
            break
        if not line.strip():
            blank_before_maps = True
            i += 1
            continue
        blank_before_maps = False
        if line.startswith("#"):
            i += 1
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            lm = LOOSE_SAMPLE_RE.match(line)
            if not lm:
                p.problems.append("line %d is not a sample: %r" % (
                    i + 1, line[:120]))
                i += 1
                continue
            p.problems.append("line %d %r: not in the spelling both "
                              "readers take (\"n: b [n2: b2] @ 0x..\")" % (
                                  i + 1, line[:80]))
            m = lm
        n, b, n2, b2 = (int(x) for x in m.groups()[:4])
        stack = tuple(int(x, 16) for x in m.group(5).split())
        if n < 0 or b < 0:
            p.problems.append("line %d: negative count" % (i + 1))
        if (n == 0) != (b == 0) or (n2 == 0) != (b2 == 0):
            p.problems.append("line %d: a zero count with non-zero bytes "
                              "or the reverse (pprof rejects the file)" %
                              (i + 1))
        if not stack:
            p.problems.append("line %d: empty stack" % (i + 1))
        p.samples.append((n, b, n2, b2, stack))
        i += 1
    if i >= len(lines):
        raise FormatError("%s: no MAPPED_LIBRARIES: section (truncated?)" %
                          path)
    if not blank_before_maps:
        p.problems.append("no blank line before MAPPED_LIBRARIES:")
    p.maps_text = "\n".join(lines[i + 1:])
    for j, line in enumerate(lines[i + 1:], i + 2):
        if not line.strip() or line.startswith("#"):
            continue
        mm = MAPS_RE.match(line)
        if not mm:
            p.problems.append("line %d is not a /proc/self/maps line: %r" %
                              (j, line[:120]))
            continue
        p.maps.append((int(mm.group(1), 16), int(mm.group(2), 16),
                       mm.group(3), int(mm.group(4), 16),
                       mm.group(5).strip()))
    if not any("x" in perms for _, _, perms, _, _ in p.maps):
        p.problems.append("MAPPED_LIBRARIES: has no executable mapping")
    if not text.endswith("\n"):
        p.problems.append("no newline at the end of the file")
    # The header is the sum of the lines.
    sums = tuple(sum(s[k] for s in p.samples) for k in range(4))
    if sums != p.header:
        p.problems.append("header says %d: %d [%d: %d], the lines add up to "
                          "%d: %d [%d: %d]" % (p.header + sums))
    return p


# ---------------------------------------------------------------- symbols

class Symbols:
    """Function names of PCs in one ELF file (the program), through the
    dump's maps: runtime pc -> file offset -> virtual address -> symbol."""

    def __init__(self, binary):
        self.binary = os.path.realpath(binary)
        out = subprocess.run(["nm", "--defined-only", "-S", self.binary],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             check=True).stdout.decode()
        self.funcs = []
        for line in out.split("\n"):
            w = line.split()
            if len(w) == 4 and w[2] in "tTwW":
                self.funcs.append((int(w[0], 16), int(w[1], 16), w[3]))
        self.funcs.sort()
        out = subprocess.run(["readelf", "-lW", self.binary],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             check=True).stdout.decode()
        self.loads = []     # (file offset, vaddr, file size)
        for line in out.split("\n"):
            w = line.split()
            if w and w[0] == "LOAD":
                self.loads.append((int(w[1], 16), int(w[2], 16),
                                   int(w[4], 16)))

    def name(self, pc, maps):
        """The function of the program holding pc, or None."""
        for start, end, perms, offset, path in maps:
            if not (start <= pc < end) or \
                    os.path.realpath(path) != self.binary:
                continue
            foff = pc - start + offset
            for off, vaddr, size in self.loads:
                if off <= foff < off + size:
                    va = foff - off + vaddr
                    for lo, sz, fn in self.funcs:
                        if lo <= va < lo + max(sz, 1):
                            return fn
        return None


def by_function(profile, symbols, funcs=None, raw=False):
    """{function: [objects, bytes, objects, bytes]} in use then allocated
    so far, unbiased per line as pprof does (raw: as written).  Each line
    goes to its first frame that is in the program (and among funcs,
    when given); lines with none to None.  Return addresses are looked
    up at pc - 1, as the readers do for callers."""
    out = {}
    for n, b, n2, b2, stack in profile.samples:
        owner = None
        for pc in stack:
            fn = symbols.name(pc - 1, profile.maps)
            if fn is not None and (funcs is None or fn in funcs):
                owner = fn
                break
        vals = (n, b, n2, b2) if raw else \
            profile.scale(n, b) + profile.scale(n2, b2)
        acc = out.setdefault(owner, [0, 0, 0, 0])
        for i, v in enumerate(vals):
            acc[i] += v
    return out


# ---------------------------------------------------------------- jemalloc

def from_jemalloc(src, dst):
    """jemalloc's own dump (heap_v2/S, then per stack "@ pcs" and
    "  t*: n: b [n2: b2]" with per-thread lines) -> the legacy layout."""
    with open(src) as f:
        lines = f.read().split("\n")
    m = re.match(r"^heap_v2/(\d+)$", lines[0])
    if not m:
        raise FormatError("%s: not a jemalloc heap_v2 dump" % src)
    period = int(m.group(1))
    samples, stack, maps = [], None, []
    for i, line in enumerate(lines[1:], 1):
        if line.startswith("MAPPED_LIBRARIES:"):
            maps = lines[i + 1:]
            break
        if line.startswith("@"):
            stack = line[1:].split()
            continue
        tm = re.match(r"^\s*t\*: (\d+): (\d+) \[(\d+): (\d+)\]$", line)
        if tm and stack is not None:
            n, b, n2, b2 = (int(x) for x in tm.groups())
            # jemalloc keeps allocated-so-far only with prof_accum; the
            # legacy format wants it at least as large as what is in use.
            samples.append((n, b, max(n, n2), max(b, b2), stack))
            stack = None
    tot = [sum(s[k] for s in samples) for k in range(4)]
    with open(dst, "w") as f:
        f.write("heap profile: %d: %d [ %d: %d] @ heap_v2/%d\n" % (
            tot[0], tot[1], tot[2], tot[3], period))
        for n, b, n2, b2, st in samples:
            f.write("%6d: %8d [%6d: %8d] @ %s\n" % (n, b, n2, b2,
                                                     " ".join(st)))
        f.write("\nMAPPED_LIBRARIES:\n")
        f.write("\n".join(maps).rstrip("\n") + "\n")


# ---------------------------------------------------------------- main

def main(argv):
    if len(argv) >= 2 and argv[0] == "check":
        status = 0
        for path in argv[1:]:
            try:
                p = parse(path)
            except (OSError, FormatError) as e:
                print("%s: %s" % (path, e))
                status = 1
                continue
            for problem in p.problems:
                print("%s: %s" % (path, problem))
            status |= bool(p.problems)
            if not p.problems:
                print("%s: ok: %d stacks, S=%d, %d bytes in use (estimated)"
                      % (path, len(p.samples), p.period, p.total_inuse()))
        return status
    if len(argv) >= 3 and argv[0] == "top":
        base = None
        args = argv[1:]
        if args[0] == "--base":
            base, args = args[1], args[2:]
        prog, dump = args
        sym = Symbols(prog)
        p = parse(dump)
        got = {fn: v[1] for fn, v in by_function(p, sym).items()}
        if base:
            for fn, v in by_function(parse(base), sym).items():
                got[fn] = got.get(fn, 0) - v[1]
        for fn, b in sorted(got.items(), key=lambda kv: -abs(kv[1])):
            print("%14d  %s" % (b, fn or "(outside the program)"))
        return 0
    if len(argv) == 3 and argv[0] == "from-jemalloc":
        from_jemalloc(argv[1], argv[2])
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
