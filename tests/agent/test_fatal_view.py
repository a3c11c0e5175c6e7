"""The fatal signals' dispositions as the program sees them (issue 11).

    host:fatal-view   fatal_view (tests/progs) reads the
                      dispositions of SIGSEGV, SIGBUS, SIGFPE, SIGILL,
                      SIGABRT and SIGTERM, sets some of them (SIG_DFL with
                      signal(), a handler then SIG_DFL with SA_RESTART,
                      SIG_IGN) and reads them again, then dies by SIGSEGV:
                      the same stdout and death under heaptrail run as
                      bare (the agent's report handler reads as SIG_DFL),
                      and the report still says "killed by signal 11" and
                      counts the 100 bytes leak_fatal_view left
"""
import os
import signal

import run_tests as rt
from run_tests import Failure
import common

HERE = os.path.dirname(os.path.abspath(__file__))


def test_fatal_view(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "fatal-view"))
    prog = os.path.join(work, "fatal_view")
    rc, _, err = rt.run([suite.cc, "-g", "-O1", "-I", common.PROGS, "-o", prog,
                         os.path.join(os.path.dirname(HERE), "progs", "fatal_view.c")])
    if rc != 0:
        raise Failure("cc fatal_view.c: %s" % rt.short(err))
    rc0, out0, _ = rt.run([prog, "crash"])
    if rc0 != -signal.SIGSEGV or b"start: 11:dfl/0 " not in out0:
        raise Failure("bare run: status %d, stdout %r" % (rc0, out0))
    out = os.path.join(work, "run")
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-o", out, "--", prog, "crash"])
    problems = []
    if not hout.startswith(out0):
        problems.append("stdout under heaptrail:\n%s\nbare:\n%s" % (
            hout[:len(out0) + 100].decode(errors="replace"), out0.decode()))
    if rc != rc0:
        problems.append("heaptrail run: status %d, bare %d (killed by SIGSEGV)" % (rc, rc0))
    text = (hout + herr).decode(errors="replace")
    if "killed by signal 11" not in text:
        problems.append("the report does not say killed by signal 11")
    if "in use at exit: 100 bytes in 1 block" not in text:
        problems.append("the report does not count leak_fatal_view's 100 bytes")
    return problems, [text[-1200:]]


def collect(suite):
    return [("host:fatal-view", lambda: test_fatal_view(suite))]
