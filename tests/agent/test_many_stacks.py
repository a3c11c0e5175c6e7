"""The agent keeps every distinct stack: a program with 5000 distinct
allocation stacks (bench/analyze/gen.py's workload, small) gives a final
dump with all of them and drops nothing.

    stacks:5000    (the stack index once stopped growing at 2048)
"""
import os
import subprocess

import run_tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test(suite, n=5000):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "many_stacks"))
    src = os.path.join(work, "src")
    subprocess.run(["python3", os.path.join(ROOT, "bench", "analyze", "gen.py"), src,
                    str(n), "1", "100"], check=True)
    cflags = ["-g", "-O1", "-fno-omit-frame-pointer"]
    lib = os.path.join(work, "libbench0.so")
    prog = os.path.join(work, "prog")
    for cmd in ([suite.cc] + cflags + ["-fPIC", "-shared", "-o", lib,
                                       os.path.join(src, "libbench0.c")],
                [suite.cc] + cflags + ["-rdynamic", "-o", prog, os.path.join(src, "prog.c"),
                                       lib, "-Wl,-rpath," + work]):
        rc, _, err = run_tests.run(cmd, env=os.environ)
        if rc:
            raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    out = os.path.join(work, "run")
    rc, _, err = run_tests.run([suite.heaptrail, "run", "-q", "--sample", "1", "--final",
                                "-o", out, "--", prog])
    if rc:
        raise run_tests.Failure("heaptrail run: exit %d: %s" % (rc, run_tests.short(err)))
    problems = []
    if b"could not be tracked" in err:
        problems.append("the agent dropped allocations: %s" % run_tests.short(err, 300))
    dumps = [f for f in os.listdir(out) if f.endswith(".final.heap")]
    if len(dumps) != 1:
        raise run_tests.Failure("want one final dump, got %s" % dumps)
    with open(os.path.join(out, dumps[0])) as f:
        stacks = sum(1 for line in f if " @ 0x" in line)
    if stacks != n + 1:  # and main's array of kept blocks
        problems.append("%d stacks in the dump, want %d" % (stacks, n + 1))
    return problems, []


def collect(suite):
    return [("stacks:5000", lambda: test(suite))]
