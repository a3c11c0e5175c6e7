"""`heaptrail growth`'s verdicts on series written by hand (no program run,
so no timing or sampling noise decides them).

    growth:rules     eleven dumps, 100 ms apart, of three sites whose
                     in-use blocks (64 KiB each) are chosen here: a leak
                     (+8 blocks a dump: growing), a cache (+40 a dump for
                     five dumps, then flat: "grew, then flat") and a
                     churning site whose later half jumps between 0 and
                     45 blocks along a level line (20 45 0 0 45 20): it
                     grew from its first value and its later fit is flat,
                     but it does not stay put, so it is "fluctuating";
                     the growing site's slope is 8 * 64 KiB per 0.1 s
    growth:onset     sixteen dumps, 100 ms apart: a site at 0 for eleven
                     dumps that then gains 8 blocks a dump (a leak started
                     mid-run) is growing from 1.0 s (dump 11) at 8 * 64 KiB
                     per 0.1 s, its rate since then, and ranks above a leak
                     of 2 blocks a dump from the start; a site at 0 that
                     rises for two dumps and stays (a cache filled late) is
                     not growing
    growth:plateau   seven dumps, 1 s apart, exact and sampled (heap_v2
                     at 8 KiB: every value as sure as exact): a site that
                     gains 64 blocks a dump for four dumps and then stays
                     for three (a burst of pushes that ended) "grew,
                     then flat" (before: exact "fluctuating", sampled
                     "growing", on real dumps "too few samples"), beside
                     a leak of 16 blocks a dump, growing; sampled at 4 MiB
                     (a sample stands for 64 blocks), the same shape
                     whose pace would bring about 2 samples over the
                     plateau is no "grew, then flat": so sparse a leak
                     could have brought none there
"""
import os
import re

import run_tests as rt
from run_tests import Failure

import test_top

LEAK, CACHE, CHURN = 0x401000, 0x402000, 0x403000
CHURN_SERIES = (10, 40, 5, 30, 45, 20, 45, 0, 0, 45, 20)


def write_series(work, series, step_ms=100, rate=1):
    """One dump step_ms apart per item of series: ((blocks, pc), ...),
    blocks of 64 KiB at the site pc; exact, or sampled every rate bytes
    (heap_v2/rate: the counts are then the samples, here one a block)."""
    for i, rows in enumerate(series):
        n = sum(v for v, _ in rows)
        with open(os.path.join(work, "heaptrail.7.%04d.every.heap" % i), "w") as f:
            f.write("heap profile: %d: %d [%d: %d] @ heap_v2/%d\n" % (n, n << 16, n, n << 16,
                                                                     rate))
            f.write("# heaptrail-dump ms=%d unix_ms=%d pid=7\n" % (i * step_ms,
                                                                  1700000000000 + i * step_ms))
            for v, addr in rows:
                f.write("%d: %d [%d: %d] @ 0x%x\n" % (v, v << 16, v, v << 16, addr))
            f.write("\nMAPPED_LIBRARIES:\n")


def growth_rows(suite, work):
    """(heaptrail growth --bytes's text, {site: its GROWTH_ROW match})."""
    _, text, _ = test_top.heaptrail(suite, ["growth", "--bytes", work])
    rows = {}
    for line in text.split("\n"):
        m = test_top.GROWTH_ROW.match(line)
        if m:
            rows[m.group(8)] = m
    return text, rows


def write_dumps(work):
    write_series(work, [((i * 8, LEAK), (min(i, 5) * 40, CACHE), (churn, CHURN))
                        for i, churn in enumerate(CHURN_SERIES)])


def test_rules(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "growth-rules"))
    write_dumps(work)
    text, rows = growth_rows(suite, work)
    problems = []
    want = {"0x%x" % LEAK: "growing", "0x%x" % CACHE: "grew, then flat",
            "0x%x" % CHURN: "fluctuating"}
    for site, trend in sorted(want.items()):
        got = rows[site].group(2) if site in rows else None
        if got != trend:
            problems.append("%s is %r, expected %r" % (site, got, trend))
    leak = rows.get("0x%x" % LEAK)
    if leak and int(leak.group(3)) != 8 * 65536 * 10:
        problems.append("the leak's slope is %s B/s, expected %d" % (leak.group(3), 8 * 65536 * 10))
    return problems, [text]


LATE, SLOW, LATE_CACHE = 0x404000, 0x405000, 0x406000
LATE_SERIES = [0] * 11 + [8, 16, 24, 32, 40]
LATE_CACHE_SERIES = [0] * 11 + [20, 40, 40, 40, 40]


def test_onset(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "growth-onset"))
    write_series(work, [((LATE_SERIES[i], LATE), (10 + 2 * i, SLOW),
                         (LATE_CACHE_SERIES[i], LATE_CACHE)) for i in range(16)])
    text, rows = growth_rows(suite, work)
    problems = []
    late, slow = rows.get("0x%x" % LATE), rows.get("0x%x" % SLOW)
    if not late or late.group(1) != "1" or late.group(2) != "growing":
        problems.append("the late leak is %s, expected growing, ranked 1" %
                        (late and (late.group(1), late.group(2)),))
    elif int(late.group(3)) != 8 * 65536 * 10:
        problems.append("the late leak's slope is %s B/s, expected %d (since it started)" %
                        (late.group(3), 8 * 65536 * 10))
    if not slow or slow.group(1) != "2" or slow.group(2) != "growing":
        problems.append("the slow leak is %s, expected growing, ranked 2" %
                        (slow and (slow.group(1), slow.group(2)),))
    cache = rows.get("0x%x" % LATE_CACHE)
    if not cache or cache.group(2) == "growing":
        problems.append("the cache filled late is %s" % (cache and cache.group(2),))
    if not re.search(r"^started later \(slope, later half and r2 from then on\):\n"
                     r"\s+1  from 1\.0 s \(dump 11 of 16\)  0x%x$" % LATE, text, re.M):
        problems.append("no line saying the late leak started at 1.0 s (dump 11)")
    return problems, [text]


BURST, STEADY = 0x407000, 0x408000
BURST_SERIES = (0, 64, 128, 192, 256, 256, 256)


def test_plateau(suite):
    problems, texts = [], []
    for name, rate, burst_want in (("exact", 1, "grew, then flat"),
                                   ("sampled", 8192, "grew, then flat"),
                                   ("sparse", 4 << 20, None)):
        work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "growth-plateau-" + name))
        if name == "sparse":   # one sample a dump for four dumps, then none
            series = [((v // 64, BURST), (100, STEADY)) for v in BURST_SERIES]
        else:
            series = [((v, BURST), (16 * i, STEADY)) for i, v in enumerate(BURST_SERIES)]
        write_series(work, series, step_ms=1000, rate=rate)
        text, rows = growth_rows(suite, work)
        texts.append(text)
        burst = rows.get("0x%x" % BURST)
        got = burst and burst.group(2)
        if burst_want and got != burst_want:
            problems.append("%s: the burst is %r, expected %r" % (name, got, burst_want))
        if not burst_want and (not burst or got == "grew, then flat"):
            problems.append("%s: the sparse burst is %r, expected any verdict but "
                            "'grew, then flat'" % (name, got))
        steady = rows.get("0x%x" % STEADY)
        if name != "sparse" and (not steady or steady.group(2) != "growing"):
            problems.append("%s: the steady leak is %r" % (name, steady and steady.group(2)))
    return problems, texts


def collect(suite):
    return [("growth:rules", lambda: test_rules(suite)),
            ("growth:onset", lambda: test_onset(suite)),
            ("growth:plateau", lambda: test_plateau(suite))]
