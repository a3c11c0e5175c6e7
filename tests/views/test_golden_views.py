"""Golden tests of every analyzer view on the checked-in dumps of
tests/golden (one program, profiled by jemalloc, gperftools and
heaptrail; see its README), beyond `top` (test_golden.py):

    golden-view:LAYOUT.collapsed   folded stacks
    golden-view:LAYOUT.callgraph   the dot call graph's boxes and arrows
    golden-view:LAYOUT.flame       the flame graph's frames and tooltips
    golden-view:LAYOUT.pprof       the .pb.gz, decoded and folded
    golden-view:diff.OLD-NEW       `heaptrail diff` between two layouts
                                   of the same run (the same program:
                                   nothing may change in its sites)

Each view is reduced to the program's own functions (libc's frames and
names depend on the machine's libc and its debug info) and compared with
tests/golden/expected/views/NAME.txt. The expected files are our output,
reviewed when written; what makes the tests more than a snapshot is the
second check in each: the bytes each view gives the program's allocation
sites are the ones the program allocates by construction (the table in
test_golden.py), through each view's own code path.

`HEAPTRAIL_GOLDEN_UPDATE=1` rewrites the expected files (review the diff).
"""
import difflib
import os
import re
import xml.etree.ElementTree as ET

import run_tests
from run_tests import Failure
from test_golden import CONSTRUCTION, GOLDEN, LAYOUTS, PROG_FUNCS, ROOT
import test_pprof as pprof_decoder

EXPECTED = os.path.join(ROOT, GOLDEN, "expected", "views")
SVG = "{http://www.w3.org/2000/svg}"
# what the program holds at the end, by allocating function
LIVE = {f: flat for f, (flat, _) in CONSTRUCTION["inuse-space"].items() if flat}


def heaptrail(suite, *args):
    cmd = [suite.heaptrail, args[0], "--binary-path", os.path.join(GOLDEN, "bin")] + \
        list(args[1:])
    rc, out, err = run_tests.run(cmd, cwd=ROOT)
    if rc != 0:
        raise Failure("%s: exit %d: %s" % (" ".join(cmd), rc, run_tests.short(err)))
    return out.decode()


def dump(layout):
    return os.path.join(GOLDEN, "inputs", layout + ".heap")


def work(suite, name):
    d = os.path.join(suite.build, "e2e", "golden-views")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, name)


def fold(stacks):
    """[(frames root first, value)] -> {"main;f;g": value} over the
    program's frames only, summed; zero values dropped."""
    out = {}
    for frames, v in stacks:
        key = ";".join(f for f in frames if f in PROG_FUNCS)
        out[key] = out.get(key, 0) + v
    return {k: v for k, v in out.items() if v}


def by_leaf(folded):
    """Bytes by allocating function; stacks with none of the program's
    frames (libstdc++'s start-up pool in the jemalloc run) are left out."""
    out = {}
    for k, v in folded.items():
        if not k:
            continue
        leaf = k.split(";")[-1]
        out[leaf] = out.get(leaf, 0) + v
    return out


def check_construction(label, leaves, problems):
    if leaves != LIVE:
        problems.append("%s: bytes by allocating function %s, by construction %s" % (
            label, leaves, LIVE))


def compare(suite, name, text, problems):
    path = os.path.join(EXPECTED, name + ".txt")
    if os.environ.get("HEAPTRAIL_GOLDEN_UPDATE"):
        os.makedirs(EXPECTED, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return
    try:
        with open(path) as f:
            want = f.read()
    except OSError as e:
        problems.append("%s: %s (HEAPTRAIL_GOLDEN_UPDATE=1 writes it)" % (path, e.strerror))
        return
    if want != text:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                            "expected", "got"))
        problems.append("%s differs from %s:\n%s" % (name, os.path.relpath(path, ROOT),
                                                    diff[:1500]))


def lines_of(folded):
    return "".join("%s %d\n" % kv for kv in sorted(folded.items()))


def test_collapsed(suite, layout):
    problems = []
    out = heaptrail(suite, "collapsed", dump(layout))
    stacks = []
    for line in out.strip().split("\n"):
        stack, v = line.rsplit(" ", 1)
        stacks.append((stack.split(";"), int(v)))
    folded = fold(stacks)
    check_construction("collapsed", by_leaf(folded), problems)
    compare(suite, layout + ".collapsed", lines_of(folded), problems)
    return problems, [out]


def test_pprof(suite, layout):
    problems = []
    pb = work(suite, layout + ".pb.gz")
    heaptrail(suite, "pprof", dump(layout), "-o", pb)
    prof = pprof_decoder.decode(pb)
    strs = prof["strings"]
    types = [strs[t["type"]] for t in prof["sample_type"]]
    index = types.index("inuse_space")
    funcs = {f["id"]: strs[f["name"]] for f in prof["function"]}
    locs = {l["id"]: l for l in prof["location"]}
    stacks = []
    for s in prof["sample"]:
        names = []
        for lid in s["location_id"]:     # leaf first; each location's lines innermost first
            for ln in locs[lid]["line"]:
                names.append(funcs.get(ln["function_id"], "?"))
        stacks.append((list(reversed(names)), s["value"][index]))
    folded = fold(stacks)
    check_construction("pprof", by_leaf(folded), problems)
    compare(suite, layout + ".pprof", lines_of(folded), problems)
    return problems, []


def test_callgraph(suite, layout):
    problems = []
    out = heaptrail(suite, "callgraph", "--dot", "--bytes", "--node-fraction", "0",
                    "--edge-fraction", "0", dump(layout))
    nodes, edges = {}, []
    for m in re.finditer(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)"', out, re.M):
        label = m.group(2).split("\\n")
        nodes[m.group(1)] = label
    for m in re.finditer(r'^\s*(n\d+) -> (n\d+) \[label=" ([^"]+)"', out, re.M):
        edges.append((m.group(1), m.group(2), m.group(3)))
    text = ""
    for n, label in sorted(nodes.items(), key=lambda kv: kv[1][0]):
        if label[0] in PROG_FUNCS:
            text += "box %s\n" % " | ".join(label)
    for a, b, w in sorted(edges, key=lambda e: (nodes[e[0]][0], nodes[e[1]][0])):
        if nodes[a][0] in PROG_FUNCS and nodes[b][0] in PROG_FUNCS:
            text += "call %s -> %s %s\n" % (nodes[a][0], nodes[b][0], w)
    # the boxes' flat numbers against the construction (dot labels keep
    # two decimals of KiB: exact for these sizes)
    flat = {}
    for label in nodes.values():
        if label[0] in PROG_FUNCS and len(label) >= 3:
            m = re.match(r"([\d.]+) (B|KiB|MiB)", label[1])
            if m:
                flat[label[0]] = round(float(m.group(1)) *
                                       {"B": 1, "KiB": 1024, "MiB": 1 << 20}[m.group(2)])
    check_construction("callgraph", flat, problems)
    compare(suite, layout + ".callgraph", text, problems)
    return problems, [out]


def test_flame(suite, layout):
    problems = []
    svg = work(suite, layout + ".svg")
    heaptrail(suite, "flame", dump(layout), "-o", svg)
    root = ET.parse(svg).getroot()
    tips = []
    for g in root.iter(SVG + "g"):
        if g.get("class") != "htf-f":
            continue
        tip = (g.find(SVG + "title").text or "").split("\n")
        if tip[0] in PROG_FUNCS:
            tips.append(" | ".join(tip[:2]))
    text = "".join(t + "\n" for t in sorted(tips))
    # the allocating functions' own frames (each of them allocates from
    # one call path) against the construction
    leaves = {}
    for t in tips:
        name, value = t.split(" | ")
        m = re.match(r"([\d.]+) (B|KiB|MiB) in use", value)
        if name in LIVE and m:
            leaves[name] = round(float(m.group(1)) *
                                 {"B": 1, "KiB": 1024, "MiB": 1 << 20}[m.group(2)])
    for name, want in LIVE.items():
        if abs(leaves.get(name, -1) - want) > 0.006 * 1024:
            problems.append("flame: %s holds %s bytes, by construction %d" % (
                name, leaves.get(name), want))
    compare(suite, layout + ".flame", text, problems)
    return problems, []


def test_diff(suite, old, new):
    problems = []
    out = heaptrail(suite, "diff", "--bytes", dump(old), dump(new))
    rows = []
    for line in out.split("\n"):
        m = re.match(r"^\s+([+-]?\d+)\s+(-?\d+)\s+(-?\d+)\s+(\S+)\s*$", line)
        if m and m.group(4) in PROG_FUNCS:
            rows.append(line.strip())
            problems.append("diff %s -> %s: %s changed (%s), the program is the same" % (
                old, new, m.group(4), m.group(1)))
    compare(suite, "diff.%s-%s" % (old, new), "".join(r + "\n" for r in rows), problems)
    return problems, [out]


def collect(suite):
    tests = []
    for layout in LAYOUTS:
        for view, fn in (("collapsed", test_collapsed), ("pprof", test_pprof),
                         ("callgraph", test_callgraph), ("flame", test_flame)):
            tests.append(("golden-view:%s.%s" % (layout, view),
                          lambda l=layout, f=fn: f(suite, l)))
    for old, new in (("jemalloc", "heaptrail"), ("gperftools", "heaptrail")):
        tests.append(("golden-view:diff.%s-%s" % (old, new),
                      lambda o=old, n=new: test_diff(suite, o, n)))
    return tests
