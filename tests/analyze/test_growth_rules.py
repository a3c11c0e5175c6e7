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
"""
import os

import run_tests as rt
from run_tests import Failure

import test_top

LEAK, CACHE, CHURN = 0x401000, 0x402000, 0x403000
CHURN_SERIES = (10, 40, 5, 30, 45, 20, 45, 0, 0, 45, 20)


def write_dumps(work):
    for i, churn in enumerate(CHURN_SERIES):
        rows = ((i * 8, LEAK), (min(i, 5) * 40, CACHE), (churn, CHURN))
        n = sum(v for v, _ in rows)
        with open(os.path.join(work, "heaptrail.7.%04d.every.heap" % i), "w") as f:
            f.write("heap profile: %d: %d [%d: %d] @ heap_v2/1\n" % (n, n << 16, n, n << 16))
            f.write("# heaptrail-dump ms=%d unix_ms=%d pid=7\n" % (i * 100, 1700000000000 + i * 100))
            for v, addr in rows:
                f.write("%d: %d [%d: %d] @ 0x%x\n" % (v, v << 16, v, v << 16, addr))
            f.write("\nMAPPED_LIBRARIES:\n")


def test_rules(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "growth-rules"))
    write_dumps(work)
    _, text, _ = test_top.heaptrail(suite, ["growth", "--bytes", work])
    rows = {}
    for line in text.split("\n"):
        m = test_top.GROWTH_ROW.match(line)
        if m:
            rows[m.group(8)] = m
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


def collect(suite):
    return [("growth:rules", lambda: test_rules(suite))]
