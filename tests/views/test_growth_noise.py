"""`heaptrail growth`'s verdicts on sampled series written by hand (issue
17): the same shapes as sampled dumps (heap_v2/65536) and as exact ones
(heap_v2/1), so only the sampling noise tells them apart.

    growth:noise   eleven dumps, 100 ms apart, of three sites of 512-byte
                   blocks: a leak with many samples (20 more each dump,
                   200 at the end: about 13 MB estimated), a small rise
                   carried by a handful of samples (0 0 1 1 2 3 3 4 5 5 6)
                   a flat site of 100 samples, and a step: one sample
                   from the seventh dump on (a small leak seen once). Sampled: the leak is
                   growing, the small rise is "too few samples" (one sample
                   of 512 B stands for 64 KiB: sampling alone could make
                   it; its slope is 1.2 times its 90 % half-width, short
                   of the 99 % a verdict needs) with the advice line, the
                   flat site is not
                   growing, the step is "too few samples" too (its one
                   sample stands for 64 KiB, below growth's 1 % of the
                   heap, but it rose: it is not known to be flat), and
                   the leak's slope carries a ± column.
                   Exact (the same counts, every block recorded): the
                   small rise is a real, steady one, and growing too; the
                   step of 512 bytes is flat.
    growth:few-dumps  the first four of those sampled dumps: fewer than a
                   sampled verdict needs, so no site is growing, and the
                   one advice line asks for more dumps, not for more
                   samples (the leak's slope is sure enough already)
    growth:coarse  eleven dumps at heap_v2/524288 of a site of 20 samples
                   and one of a single sample, both there from the first
                   dump to the last: a rise of 1 % of the heap would
                   bring a new sample about one time in five, so the one
                   sample is "too few samples" with the advice line (it
                   was "flat": estimates:server's 24 KB/s leak at 512k
                   came out so one run in four), and nothing is growing;
                   exact (heap_v2/1), the same counts are flat. In
                   units, the 0 B/s slopes' intervals name theirs (they
                   read "±1.59", MiB unsaid).
"""
import os
import re

import run_tests as rt

import test_top

LEAK, SMALL, FLAT, STEP = 0x401000, 0x402000, 0x403000, 0x404000
SMALL_SERIES = (0, 0, 1, 1, 2, 3, 3, 4, 5, 5, 6)
STEP_SERIES = (0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1)
ROW = re.compile(r"^\s*(\d+|-|all)\s+(growing|grew, then flat|fluctuating|flat|shrinking|"
                 r"too few samples)\s+([+-]?\d+)/s(\s+(?:±\d+|\+\d+/-\d+))?\s+[+-]?\d+/s\s+.*\s"
                 r"(\S+)\s*$")


def write_dump(work, i, sample, rows):
    """Dump i (100 ms apart) of (count, address) rows of 512-byte blocks."""
    n = sum(v for v, _ in rows)
    with open(os.path.join(work, "heaptrail.7.%04d.every.heap" % i), "w") as f:
        f.write("heap profile: %d: %d [%d: %d] @ heap_v2/%d\n" % (n, n * 512, n, n * 512,
                                                                 sample))
        f.write("# heaptrail-dump ms=%d unix_ms=%d pid=7\n" % (i * 100,
                                                              1700000000000 + i * 100))
        for v, addr in rows:
            if v:
                f.write("%d: %d [%d: %d] @ 0x%x\n" % (v, v * 512, v, v * 512, addr))
        f.write("\nMAPPED_LIBRARIES:\n")


def write_dumps(work, sample, ndumps=len(SMALL_SERIES)):
    for i, small in enumerate(SMALL_SERIES[:ndumps]):
        write_dump(work, i, sample,
                   ((i * 20, LEAK), (small, SMALL), (100, FLAT), (STEP_SERIES[i], STEP)))


def write_steady(work, sample, rows, ndumps=11):
    """ndumps dumps with the same rows."""
    for i in range(ndumps):
        write_dump(work, i, sample, rows)


def verdicts(suite, work):
    _, text, _ = test_top.heaptrail(suite, ["growth", "--bytes", work])
    rows = {}
    for line in text.split("\n"):
        m = ROW.match(line)
        if m:
            rows[m.group(5)] = (m.group(2), m.group(4))
    return rows, text


def test_noise(suite):
    problems, details = [], []
    base = os.path.join(suite.build, "e2e", "analyze", "growth-noise")
    for sample in (65536, 1):
        work = rt.fresh_dir(os.path.join(base, "s%d" % sample))
        write_dumps(work, sample)
        rows, text = verdicts(suite, work)
        details.append("sample %d:\n%s" % (sample, text))
        leak, small, flat, step = ("0x%x" % a for a in (LEAK, SMALL, FLAT, STEP))
        want_small = "too few samples" if sample > 1 else "growing"
        want_step = "too few samples" if sample > 1 else "flat"
        for site, want in ((leak, ("growing",)), (small, (want_small,)),
                           (flat, ("flat", "fluctuating")), (step, (want_step,))):
            got = rows.get(site, (None,))[0]
            if got not in want:
                problems.append("sample %d: %s is %r, expected %s" % (
                    sample, site, got, " or ".join(want)))
        if sample > 1:
            m = re.search(r"not enough samples to tell whether 2 sites \((.*)\) grow .* to be "
                          r"sure, a run about \d+ times longer, or --sample \d+k? \(now 65536\)",
                          text)
            unsure = sorted(k for k, v in rows.items() if v[0] == "too few samples")
            if not m:
                problems.append("sample %d: no advice for the site it cannot tell" % sample)
            elif sorted(m.group(1).split(" and ")) != unsure:
                problems.append("sample %d: the advice names %s, the unsure sites are %s" % (
                    sample, m.group(1), unsure))
            if leak in rows and not rows[leak][1]:
                problems.append("sample %d: the leak's slope has no ± column" % sample)
        elif any(r[1] for r in rows.values()):
            problems.append("exact dumps show a ± column")
    return problems, details


def test_few_dumps(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "growth-few-dumps"))
    write_dumps(work, 65536, 4)
    rows, text = verdicts(suite, work)
    problems = []
    if any(v[0] == "growing" for v in rows.values()):
        problems.append("a site called growing from 4 sampled dumps")
    if not re.search(r"^4 dumps: a sampled run needs at least 5 to call a site growing "
                     r"\(a longer run, or dumps more often: --every\)$", text, re.M):
        problems.append("no line asking for more dumps")
    if "to be sure" in text:
        problems.append("advice about samples where dumps are missing")
    return problems, [text]


def test_coarse(suite):
    problems, details = [], []
    one, big = "0x%x" % SMALL, "0x%x" % FLAT
    for sample in (524288, 1):
        work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "growth-coarse",
                                         "s%d" % sample))
        write_steady(work, sample, ((20, FLAT), (1, SMALL)))
        rows, text = verdicts(suite, work)
        details.append("sample %d:\n%s" % (sample, text))
        want_one = ("too few samples",) if sample > 1 else ("flat",)
        if rows.get(one, (None,))[0] not in want_one:
            problems.append("sample %d: the one sample is %r, expected %s" % (
                sample, rows.get(one, (None,))[0], want_one[0]))
        if sample == 1 and rows.get(big, (None,))[0] != "flat":
            problems.append("exact: the 20 samples are %r, expected flat" % (rows.get(big),))
        if any(v[0] == "growing" for v in rows.values()):
            problems.append("sample %d: a site called growing" % sample)
        # eleven dumps over 1 s: no "run N times longer" that long, only a
        # smaller S (its arithmetic is the noise test's)
        if sample > 1 and not re.search(r"to be sure, --sample \d+k? \(now 524288\): a longer "
                                        r"run alone would have to be over 100 times this one",
                                        text):
            problems.append("sample %d: no advice for the site it cannot tell" % sample)
        if "times longer" in text:
            problems.append("sample %d: asks for a run over 100 times longer" % sample)
        if sample > 1:
            # in units: a slope of 0 B/s, its interval in a named bigger unit
            _, human, _ = test_top.heaptrail(suite, ["growth", work])
            if not re.search(r" 0 B/s\s+±[\d.]+ (KiB|MiB)\s", human):
                problems.append("sample %d: a 0 B/s slope's interval has no unit:\n%s" % (
                    sample, human))
    return problems, details


def collect(suite):
    return [("growth:noise", lambda: test_noise(suite)),
            ("growth:few-dumps", lambda: test_few_dumps(suite)),
            ("growth:coarse", lambda: test_coarse(suite))]
