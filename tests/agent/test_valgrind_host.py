"""The agent inside a program that valgrind runs (how bench/ counts the
agent's instructions with callgrind).

    host:valgrind    leak_one (tests/e2e/progs) preloaded with the agent in
                     exact mode under callgrind: valgrind gives up on a
                     whole program that clones a task with CLONE_VM and not
                     CLONE_THREAD (the agent's ptrace tracer), so the
                     agent must stop threads another way there; the
                     program ends with its own status and the agent's
                     .leaks file names the 1,000 bytes leak_one leaks
"""
import os

import run_tests as rt
from run_tests import Failure
import common


def test_valgrind(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "host-valgrind"))
    prog = os.path.join(work, "leak_one")
    rc, _, err = rt.run([suite.cc, "-g", "-O1", "-I", common.PROGS, "-o", prog,
                         os.path.join(common.PROGS, "leak_one.c")])
    if rc != 0:
        raise Failure("cc leak_one.c: %s" % rt.short(err))
    env = dict(rt.RUN_ENV, LD_PRELOAD=os.path.join(suite.build, "libheaptrail.so"),
               HEAPTRAIL_OPTIONS="sample=1,output=" + work)
    rc, out, err = rt.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           prog], env=env, timeout=rt.VG_TIMEOUT)
    problems = []
    if rc != 0 or b"Unsupported clone" in err:
        problems.append("status %d under callgrind: %s" % (rc, rt.short(err, 400)))
    leaks = [f for f in os.listdir(work) if f.endswith(".leaks")]
    if len(leaks) != 1:
        problems.append("%d .leaks files, expected 1" % len(leaks))
    else:
        rc, text, err = rt.run([suite.heaptrail, "report", os.path.join(work, leaks[0])])
        if b"definitely lost: 1,000 bytes in 1 block" not in text + err:
            problems.append("the report does not say 1,000 bytes definitely lost: %s" %
                            rt.short(text + err, 400))
    return problems, [err.decode(errors="replace")]


def collect(suite):
    return [("host:valgrind", lambda: test_valgrind(suite))]
