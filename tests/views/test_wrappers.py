"""Allocation wrappers folded into their callers by `heaptrail growth`.

    growth:wrappers  tests/progs/wrapper_sites.c (xalloc, called by
                     four functions, calls only malloc; make_node, called
                     by two, too) run exact with dumps every 50 ms: growth
                     ranks leak_requests (16 KiB a step through xalloc)
                     and make_node (2 KiB a step) growing and nothing
                     else, names no xalloc row, calls cache_fill "grew,
                     then flat", and says under the table that it folded
                     xalloc (4 callers); with --keep-wrappers xalloc is the
                     growing site in leak_requests' place and nothing is
                     said folded
"""
import os

import run_tests as rt
from run_tests import Failure

import common
import test_top

FOLDED = ("folded 1 allocation wrapper into its callers (--keep-wrappers shows it as a "
          "site): xalloc (4 callers)")


def rows_of(text):
    rows, ranked = {}, []
    for line in text.split("\n"):
        m = test_top.GROWTH_ROW.match(line)
        if m:
            rows[m.group(8)] = m
            if m.group(1).isdigit():
                ranked.append(m.group(8))
    return rows, ranked


def test_wrappers(suite):
    work, binary = common.analyze_prog(suite, "wrapper_sites", "-fno-omit-frame-pointer")
    out = os.path.join(work, "out")
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--sample", "1",
                              "--every", "50ms", "--", binary, "30"], cwd=work)
    if rc != 0 or stdout != b"wrapper_sites: 30 steps\n":
        raise Failure("status %d, stdout %r: %s" % (rc, stdout, rt.short(err)))
    problems, details = [], []
    _, text, _ = test_top.heaptrail(suite, ["growth", "--bytes", out])
    details.append(text)
    rows, ranked = rows_of(text)
    if ranked != ["leak_requests", "make_node"]:
        problems.append("growing sites %s, expected leak_requests then make_node" % ranked)
    if "leak_requests" in rows:
        # 16 KiB every 20 ms of sleep (plus the loop's own time)
        slope = int(rows["leak_requests"].group(3))
        if not 0.5 * 819200 <= slope <= 1.1 * 819200:
            problems.append("leak_requests grows %d B/s, the program at most 819200" % slope)
    if "xalloc" in rows:
        problems.append("xalloc is a site of its own")
    got = rows["cache_fill"].group(2) if "cache_fill" in rows else None
    if got != "grew, then flat":
        problems.append("cache_fill is %r, expected 'grew, then flat'" % got)
    if FOLDED not in text.split("\n"):
        problems.append("no line '%s'" % FOLDED)
    _, text, _ = test_top.heaptrail(suite, ["growth", "--bytes", "--keep-wrappers", out])
    details.append(text)
    rows, ranked = rows_of(text)
    if ranked != ["xalloc", "make_node"]:
        problems.append("--keep-wrappers: growing sites %s, expected xalloc then make_node" %
                        ranked)
    if "folded" in text:
        problems.append("--keep-wrappers still says it folded something")
    return problems, details


def collect(suite):
    return [("growth:wrappers", lambda: test_wrappers(suite))]
