"""Tests of the runner itself: a broken heaptrail fails, it does not skip;
CI=true fails skips; every run starts from fresh directories.  Each runs
tests/run_tests.py in a subprocess on a build directory of its own
(BUILD/e2e/meta/NAME, holding links to this build's heaptrail and agent),
so the outer run's directories are left alone.

    meta:kinds-unclassified  RUN_TESTS_FAKE=unclassified (the runner reads
                    heaptrail's JSON as if it had no leak kinds: summary
                    "in_use" only, records without a kind): kinds:leak_one
                    and kinds:fork_leak FAIL ("not classified"), none is
                    skipped, status 1; the same run without the fake
                    passes both (so the failure is the missing kinds)
    meta:ci-skip    a Skip is "SKIP" and counted skipped; under CI=true
                    the same Skip is a "FAIL" counted failed
    meta:fresh      files an earlier run left (a stale fixture, a stray
                    file beside the built programs, a pid-named
                    directory) are gone when a run starts; the valgrind
                    cache and the stamped programs stay
    meta:annotations  the programs' @ language (runner/annotations.py):
                    a key the suite does not know ("@vgg"), a size that
                    is not BYTES/BLOCKS, a kind not a leak kind, each
                    raise naming the problem; a well-formed header reads
                    back as written
"""
import os
import re
import subprocess
import sys

import run_tests

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(os.path.dirname(HERE), "run_tests.py")
SUMMARY = re.compile(rb"^(\d+) passed, (\d+) failed, (\d+) skipped$", re.M)


def inner_build(suite, name):
    d = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "meta", name))
    for f in ("heaptrail", "libheaptrail.so"):
        os.symlink(os.path.join(suite.build, f), os.path.join(d, f))
    return d


def runner(build, ks, env, timeout=900):
    cmd = [sys.executable, RUNNER, "--build", build]
    for k in ks:
        cmd += ["-k", k]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=timeout)
    m = SUMMARY.search(p.stdout)
    counts = tuple(int(x) for x in m.groups()) if m else None
    return p.returncode, p.stdout.decode("utf-8", "replace"), counts


def kinds_unclassified(suite):
    build = inner_build(suite, "unclassified")
    names = ("kinds:leak_one[fp]", "kinds:fork_leak[fp]")
    problems, details = [], []
    base = {k: v for k, v in os.environ.items() if k != "RUN_TESTS_FAKE"}
    rc, out, counts = runner(build, names, dict(base,
                                                RUN_TESTS_FAKE="unclassified"))
    details.append("faked:\n" + out)
    if counts != (0, len(names), 0) or rc != 1:
        problems.append("without kinds: status %d, %s, expected status 1 "
                        "and 0 passed, %d failed, 0 skipped" % (
                            rc, counts, len(names)))
    for n in names:
        line = [l for l in out.split("\n") if l.startswith("FAIL %s:" % n)]
        if not line or "not classified" not in line[0]:
            problems.append("without kinds: no \"FAIL %s: ... not "
                            "classified\" line" % n)
    rc, out, counts = runner(build, names, base)
    details.append("real:\n" + out)
    if counts != (len(names), 0, 0) or rc != 0:
        problems.append("with kinds: status %d, %s, expected %d passed" % (
            rc, counts, len(names)))
    return problems, details


CI_PROBE = """
import sys
sys.path.insert(0, %r)
import run_tests
r = run_tests.Reporter(False)
r.skip("meta:probe", "a tool is missing")
print("counts", r.passed, r.failed, r.skipped)
""" % os.path.dirname(RUNNER)


def ci_skip(suite):
    problems, details = [], []
    for ci, want_line, want in (("", "SKIP meta:probe: a tool is missing",
                                 "counts 0 0 1"),
                                ("true", "FAIL meta:probe: skipped, and "
                                 "CI=true: a tool is missing",
                                 "counts 0 1 0")):
        env = {k: v for k, v in os.environ.items() if k != "CI"}
        if ci:
            env["CI"] = ci
        p = subprocess.run([sys.executable, "-c", CI_PROBE],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, timeout=60)
        out = p.stdout.decode("utf-8", "replace")
        details.append("CI=%s: %s%s" % (ci, out, p.stderr.decode(
            "utf-8", "replace")))
        lines = out.split("\n")
        if want_line not in lines or want not in lines:
            problems.append("CI=%s: expected %r and %r, got %r" % (
                ci, want_line, want, run_tests.short(out)))
    return problems, details


def fresh(suite):
    build = inner_build(suite, "fresh")
    problems = []
    e2e = os.path.join(build, "e2e")
    planted = {
        "e2e/analyze/run/heaptrail.1.0001.every.heap": True,
        "e2e/analyze/run/sub/stale": True,
        "e2e/prof/prof_cache.cli/out/heaptrail.1.final.heap": True,
        "e2e/fp/heaptrail-leak_one-4242/heaptrail.4242.leaks": True,
        "e2e/fp/core": True,
        "hostile/work/x/stale": True,
        "e2e/vgcache/0123.json": False,
        "hostile/vgcache/0123.json": False,
        "e2e/fp/leak_one": False,
        "e2e/fp/leak_one.stamp": False,
    }
    for rel in planted:
        path = os.path.join(build, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("left by an earlier run\n")
    # a directory a test left without permissions
    locked = os.path.join(e2e, "ht", "locked")
    os.makedirs(os.path.join(locked, "d"))
    os.chmod(locked, 0)
    planted["e2e/ht/locked"] = True
    rc, out, counts = runner(build, ["no test has this name"],
                             {k: v for k, v in os.environ.items()})
    if counts != (0, 0, 0):
        problems.append("the run printed %s, expected 0 passed, 0 failed, "
                        "0 skipped" % (counts,))
    for rel, gone in sorted(planted.items()):
        there = os.path.lexists(os.path.join(build, rel))
        if gone and there:
            problems.append("%s left by an earlier run is still there" % rel)
        if not gone and not there:
            problems.append("%s (a cache) was removed" % rel)
    return problems, [out]


def annotations(suite):
    from runner import annotations as an
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "meta", "annotations"))
    path = os.path.join(work, "prog.c")
    problems = []

    def header(lines):
        with open(path, "w") as f:
            f.write("/*\n * a test program\n *\n" +
                    "".join(" * %s\n" % l for l in lines) + " */\nint main(void) { }\n")
    header(["@kinds 0 case=two definitely_lost=100/1 suppressed=8/2", "@vg"])
    got = an.read(path, ("kinds", "vg"))
    if got != [("kinds", ["0", "case=two", "definitely_lost=100/1", "suppressed=8/2"],
                "0 case=two definitely_lost=100/1 suppressed=8/2"), ("vg", [], "")]:
        problems.append("read back %r" % got)
    elif an.kinds(got[0][1], path) != (0, "two", {"definitely_lost": (100, 1),
                                                  "suppressed": (8, 2)}):
        problems.append("@kinds parsed as %r" % (an.kinds(got[0][1], path),))
    for lines, want in ((["@vgg"], "unknown directive @vgg"),
                        (["@kinds 0 definitely_lost=100"], "is not BYTES/BLOCKS"),
                        (["@kinds 0 lost=100/1"], "unknown kind 'lost'")):
        header(lines)
        try:
            r = [an.kinds(w, path) if k == "kinds" else None
                 for k, w, _ in an.read(path, ("kinds", "vg"))]
            problems.append("%s: read as %r, want an error" % (lines, r))
        except ValueError as e:
            if want not in str(e):
                problems.append("%s: %s, want %r in it" % (lines, e, want))
    return problems, []


def collect(suite):
    return [("meta:annotations", lambda: annotations(suite)),
            ("meta:kinds-unclassified", lambda: kinds_unclassified(suite)),
            ("meta:ci-skip", lambda: ci_skip(suite)),
            ("meta:fresh", lambda: fresh(suite))]
