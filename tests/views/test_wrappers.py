"""Allocation wrappers folded into their callers by `heaptrail growth`.

    growth:wrappers  tests/progs/wrapper_sites.c (xalloc, called by
                     four functions, calls only malloc; make_node, called
                     by two, too; the chain outer_alloc and outer_zalloc,
                     each called by three functions, over inner_alloc,
                     which only they call and which calls only malloc)
                     run exact with dumps every 50 ms: growth ranks
                     leak_requests (16 KiB a step through xalloc),
                     leak_chain (12 KiB a step through the chain) and
                     make_node (2 KiB a step) growing and nothing else,
                     names no row of a wrapper, calls cache_fill "grew,
                     then flat", and says under the table that it folded
                     the four wrappers, each with its callers in the
                     program; with --keep-wrappers xalloc and inner_alloc
                     are the growing sites in their callers' place and
                     nothing is said folded
"""
import os

import run_tests as rt
from run_tests import Failure

import common
import test_top

# from the program: xalloc's callers are leak_requests, cache_fill,
# scratch and parse_config; outer_alloc's and outer_zalloc's are
# leak_chain, chain_scratch and chain_config, and so are inner_alloc's
# once the two wrappers that call it are folded
FOLDED = ("folded 4 allocation wrappers into their callers (--keep-wrappers shows them as "
          "sites): inner_alloc (3 callers), outer_alloc (3 callers), outer_zalloc (3 callers), "
          "xalloc (4 callers)")
WRAPPERS = ("xalloc", "inner_alloc", "outer_alloc", "outer_zalloc")


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
    # the leaks, fastest first, as the program makes them: 16, 12 and 2 KiB a step
    if ranked != ["leak_requests", "leak_chain", "make_node"]:
        problems.append("growing sites %s, expected leak_requests, leak_chain, make_node" %
                        ranked)
    if "leak_requests" in rows:
        # 16 KiB every 20 ms of sleep (plus the loop's own time)
        slope = int(rows["leak_requests"].group(3))
        if not 0.5 * 819200 <= slope <= 1.1 * 819200:
            problems.append("leak_requests grows %d B/s, the program at most 819200" % slope)
    for w in WRAPPERS:
        if w in rows:
            problems.append("%s is a site of its own" % w)
    if "leak_chain" in rows and "leak_requests" in rows:
        # 12 KiB a step against 16 KiB a step, over the same steps
        ratio = int(rows["leak_chain"].group(3)) / max(1, int(rows["leak_requests"].group(3)))
        if not 0.7 <= ratio <= 0.8:
            problems.append("leak_chain grows %.2f times as fast as leak_requests, the "
                            "program 0.75" % ratio)
    got = rows["cache_fill"].group(2) if "cache_fill" in rows else None
    if got != "grew, then flat":
        problems.append("cache_fill is %r, expected 'grew, then flat'" % got)
    if FOLDED not in text.split("\n"):
        problems.append("no line '%s'" % FOLDED)
    _, text, _ = test_top.heaptrail(suite, ["growth", "--bytes", "--keep-wrappers", out])
    details.append(text)
    rows, ranked = rows_of(text)
    if ranked != ["xalloc", "inner_alloc", "make_node"]:
        problems.append("--keep-wrappers: growing sites %s, expected xalloc, inner_alloc, "
                        "make_node" % ranked)
    if "folded" in text:
        problems.append("--keep-wrappers still says it folded something")
    return problems, details


def collect(suite):
    return [("growth:wrappers", lambda: test_wrappers(suite))]
