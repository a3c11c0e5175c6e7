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
"""
import os
import re

import run_tests as rt
from run_tests import Failure

import test_top

LEAK, CACHE, CHURN = 0x401000, 0x402000, 0x403000
CHURN_SERIES = (10, 40, 5, 30, 45, 20, 45, 0, 0, 45, 20)


def write_series(work, series):
    """One exact dump 100 ms apart per item of series: ((blocks, pc), ...),
    blocks of 64 KiB at the site pc."""
    for i, rows in enumerate(series):
        n = sum(v for v, _ in rows)
        with open(os.path.join(work, "heaptrail.7.%04d.every.heap" % i), "w") as f:
            f.write("heap profile: %d: %d [%d: %d] @ heap_v2/1\n" % (n, n << 16, n, n << 16))
            f.write("# heaptrail-dump ms=%d unix_ms=%d pid=7\n" % (i * 100, 1700000000000 + i * 100))
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


def collect(suite):
    return [("growth:rules", lambda: test_rules(suite)),
            ("growth:onset", lambda: test_onset(suite))]
