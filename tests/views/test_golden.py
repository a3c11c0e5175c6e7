"""Golden tests of `heaptrail top` on checked-in foreign dumps
(tests/golden: one program, its dump from jemalloc's profiler, from
gperftools' heap profiler and from heaptrail; see its README).

    golden:LAYOUT        top's output (in-use space, allocated objects,
                         by line) against tests/golden/expected, compared
                         on the header and the rows of the program's own
                         functions (libc's names depend on the machine's
                         libc and its debug info), and the program's
                         sites against what it allocates by construction
    golden:jeprof[LAYOUT]  flat and cum of every row against jeprof --text
                         (skipped without jeprof)
"""
import difflib
import os
import re
import shutil

import run_tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join("tests", "golden")
LAYOUTS = ("jemalloc", "gperftools", "heaptrail")
VIEWS = {"inuse-space": ["--inuse-space"], "alloc-objects": ["--alloc-objects"],
         "lines": ["--lines"]}
PROG_FUNCS = {"main", "small_site", "big_site", "node_site", "build_list",
              "deep_site", "recurse", "churn_site"}
ROW = re.compile(r"^\s*(-?\d+)\s+\S+%\s+\S+%\s+(-?\d+)\s+\S+%\s+(\S.*)$")

# By construction (tests/golden/src/golden_prog.c): function -> (flat, cum)
# for in-use space and allocated space.
CONSTRUCTION = {
    "inuse-space": {"small_site": (6400, 6400), "big_site": (393216, 393216),
                    "node_site": (51200, 51200), "build_list": (0, 51200),
                    "deep_site": (2560, 2560), "recurse": (0, 2560),
                    "main": (0, 453376)},
    "alloc-space": {"small_site": (6400, 6400), "big_site": (393216, 393216),
                    "node_site": (51200, 51200), "build_list": (0, 51200),
                    "deep_site": (2560, 2560), "recurse": (0, 2560),
                    "churn_site": (819200, 819200), "main": (0, 1272576)},
}


def top(suite, layout, args):
    cmd = [suite.heaptrail, "top", "--bytes", "-n", "1000", "--binary-path",
           os.path.join(GOLDEN, "bin")] + args + [
           os.path.join(GOLDEN, "inputs", layout + ".heap")]
    rc, out, err = run_tests.run(cmd, cwd=ROOT)
    if rc != 0:
        raise run_tests.Failure("%s: exit %d: %s" % (" ".join(cmd), rc,
                                                     run_tests.short(err)))
    return out.decode()


def function_of(name):
    return name.split(" ")[0]


def comparable(text):
    """The header lines and the rows of the program's own functions."""
    lines = text.splitlines()
    keep = lines[:2]
    for line in lines[2:]:
        m = ROW.match(line)
        if m and function_of(m.group(3)) in PROG_FUNCS:
            keep.append(line)
    return keep


def rows(text):
    """{name: (flat, cum)} of a top or jeprof --text table."""
    out = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            out[m.group(3).strip()] = (int(m.group(1)), int(m.group(2)))
    return out


def test_layout(suite, layout):
    problems, details = [], []
    for view, args in VIEWS.items():
        got = top(suite, layout, args)
        with open(os.path.join(ROOT, GOLDEN, "expected",
                               "%s.%s.txt" % (layout, view))) as f:
            want = f.read()
        g, w = comparable(got), comparable(want)
        if g != w:
            problems.append("%s: differs from expected/%s.%s.txt" % (view, layout, view))
            details.append("\n".join(difflib.unified_diff(w, g, "expected", "got",
                                                          lineterm="")))
    for view, sites in CONSTRUCTION.items():
        got = rows(top(suite, layout, ["--" + view]))
        for fn, want in sorted(sites.items()):
            if got.get(fn) != want:
                problems.append("%s %s: (flat, cum) %s, by construction %s" % (
                    view, fn, got.get(fn), want))
    return problems, details


def test_jeprof(suite, layout):
    jeprof = shutil.which("jeprof")
    if not jeprof:
        raise run_tests.Skip("jeprof not installed (libjemalloc-dev)")
    problems = []
    # jeprof finds the program's maps lines only under the path it is
    # given: a copy of the dump names the binary where this checkout has it
    # (the checked-in dumps name /opt/golden/bin/golden_prog, a path that
    # does not exist, so heaptrail's tests go through --binary-path)
    prog = os.path.join(ROOT, GOLDEN, "bin", "golden_prog")
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "golden", layout))
    dump = os.path.join(work, layout + ".heap")
    with open(os.path.join(ROOT, GOLDEN, "inputs", layout + ".heap")) as f:
        text = f.read()
    with open(dump, "w") as f:
        f.write(text.replace("/opt/golden/bin/golden_prog", prog))
    for value in ("inuse_space", "alloc_space", "inuse_objects", "alloc_objects"):
        rc, out, err = run_tests.run([jeprof, "--text", "--show_bytes", "--" + value,
                                      prog, dump], cwd=ROOT, timeout=120)
        if rc != 0:
            raise run_tests.Failure("jeprof: exit %d: %s" % (rc, run_tests.short(err)))
        want = rows(out.decode())
        got = rows(top(suite, layout, ["--" + value.replace("_", "-")]))
        # the program's own rows by name; every other row by its numbers
        # (jeprof names a pc in a stripped library after the nearest
        # exported symbol, heaptrail as module+offset)
        for fn in sorted(PROG_FUNCS):
            if want.get(fn) != got.get(fn):
                problems.append("%s %s: heaptrail %s, jeprof %s" % (
                    value, fn, got.get(fn), want.get(fn)))
        if sorted(want.values()) != sorted(got.values()):
            problems.append("%s: the (flat, cum) pairs differ: heaptrail %s, jeprof %s" % (
                value, sorted(got.values()), sorted(want.values())))
    return problems, []


def collect(suite):
    tests = []
    for layout in LAYOUTS:
        tests.append(("golden:" + layout, lambda l=layout: test_layout(suite, l)))
    for layout in LAYOUTS:
        tests.append(("golden:jeprof[%s]" % layout, lambda l=layout: test_jeprof(suite, l)))
    return tests
