"""The size triggers on a program that allocates little.

    triggers:small-interval  tests/progs/small_interval.c keeps 64
                     blocks of 1 KiB, then frees them; `heaptrail run
                     --sample 1 --interval 8k` writes 8 interval dumps,
                     the k-th (from 1) holding 8k blocks, 8 KiB each k
                     (an interval under a MiB used to be looked at only
                     after each MiB allocated: no dump at all)
"""
import os
import re

import run_tests as rt
from run_tests import Failure

import common

HEADER = re.compile(r"^heap profile:\s*(\d+):\s*(\d+)\s*\[")


def test_small_interval(suite):
    work, binary = common.analyze_prog(suite, "small_interval")
    out = os.path.join(work, "out")
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--sample", "1",
                              "--interval", "8k", "--", binary], cwd=work)
    if rc != 0 or stdout != b"small_interval: done\n":
        raise Failure("status %d, stdout %r: %s" % (rc, stdout, rt.short(err)))
    dumps = sorted(f for f in os.listdir(out) if f.endswith(".interval.heap"))
    problems, seen = [], []
    for k, name in enumerate(dumps, 1):
        with open(os.path.join(out, name)) as f:
            m = HEADER.match(f.readline())
        got = (int(m.group(1)), int(m.group(2))) if m else None
        seen.append("%s: %s" % (name, got))
        if got != (8 * k, 8192 * k):
            problems.append("%s holds %s blocks/bytes in use, expected %s" %
                            (name, got, (8 * k, 8192 * k)))
    if len(dumps) != 8:
        problems.append("%d interval dumps, expected 8" % len(dumps))
    return problems, seen


def collect(suite):
    return [("triggers:small-interval", lambda: test_small_interval(suite))]
