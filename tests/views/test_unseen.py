"""Memory the agent does not see, said by `heaptrail growth`.

    growth:unseen    tests/progs/unseen_growth.c maps and touches
                     4 MiB a step itself (mmap: not counted by default) and
                     leaks 64 KiB a step through malloc, 20 steps; run exact
                     with dumps every 50 ms, growth says the resident memory
                     grew by tens of MiB while the heap it sees grew by
                     about 1 MiB (figures within the program's: the RSS
                     rise at least 32 MiB, at most 80; the heap's at most
                     1.25 MiB); with "malloc" (the 4 MiB through malloc,
                     seen) it says nothing of the kind; each dump's header
                     line carries rss_anon=
"""
import os
import re

import run_tests as rt
from run_tests import Failure

import common
import test_top

LINE = re.compile(r"^the process's private resident memory grew by (\d+) over these dumps, the heap "
                  r"heaptrail sees by (-?\d+): memory it does not see is growing", re.M)


def test_unseen(suite):
    work, binary = common.analyze_prog(suite, "unseen_growth")
    problems, details = [], []
    for mode in ("mmap", "malloc"):
        out = os.path.join(work, mode)
        rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--sample", "1",
                                  "--every", "50ms", "--", binary, mode], cwd=work)
        if rc != 0 or stdout != b"unseen_growth: 20 steps\n":
            raise Failure("%s: status %d, stdout %r: %s" % (mode, rc, stdout, rt.short(err)))
        heaps = sorted(f for f in os.listdir(out) if f.endswith(".heap"))
        for h in heaps:
            with open(os.path.join(out, h)) as f:
                f.readline()
                if not re.search(r" rss_anon=\d+ ", f.readline()):
                    problems.append("%s: %s has no rss_anon= on its dump line" % (mode, h))
        _, text, _ = test_top.heaptrail(suite, ["growth", "--bytes", out])
        details.append("%s:\n%s" % (mode, text))
        m = LINE.search(text)
        if mode == "malloc":
            if m:
                problems.append("malloc: says memory it does not see grew")
            continue
        if not m:
            problems.append("mmap: no line about memory it does not see")
        elif not (32 << 20) <= int(m.group(1)) <= (80 << 20) or int(m.group(2)) > 1280 * 1024:
            problems.append("mmap: resident memory +%s, heap +%s; the program maps at most "
                            "80 MiB and leaks 1.25 MiB" % (m.group(1), m.group(2)))
    return problems, details


def collect(suite):
    return [("growth:unseen", lambda: test_unseen(suite))]
