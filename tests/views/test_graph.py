"""heaptrail collapsed and callgraph, checked against pprof.

    collapsed:pprof   the folded stacks of a prof_cache dump: root first
                      (main before the allocating function), the sums by
                      leaf equal pprof -top's flat bytes, the whole equals
                      pprof's total
    collapsed:base    --base OLD: "STACK OLD NEW" lines whose columns add
                      up to pprof's totals of OLD and of NEW
    callgraph:dot     --dot output that Graphviz renders; each function's
                      flat bytes in its box equal pprof's; the edge from
                      main to each allocating function carries that
                      function's cum bytes
"""
import os
import re
import shutil

import run_tests as rt
from run_tests import Failure
import common
from test_top import heaptrail, ALIASES


def folded(text, columns):
    rows = []
    for line in text.strip().split("\n"):
        parts = line.rsplit(" ", columns)
        if len(parts) != columns + 1:
            raise Failure("collapsed: malformed line %r" % line)
        rows.append((parts[0].split(";"), [int(x) for x in parts[1:]]))
    return rows


def test_collapsed(suite):
    _, heaps, prog = common.dumps(suite)
    dump = heaps[-1]
    problems = []
    for index, flag in (("inuse_space", "--inuse-space"), ("alloc_space", "--alloc-space")):
        ref = suite.pprof_top(prog, dump, index=index)
        _, out, _ = heaptrail(suite, ["collapsed", flag, dump])
        rows = folded(out, 1)
        total = sum(v[0] for _, v in rows)
        if total != ref["total"]:
            problems.append("%s: lines add up to %d, pprof's total is %d" % (index, total, ref["total"]))
        by_leaf = {}
        for stack, v in rows:
            leaf = ALIASES.get(stack[-1], stack[-1])
            by_leaf[leaf] = by_leaf.get(leaf, 0) + v[0]
            if "main" not in stack or stack.index("main") > len(stack) - 2:
                problems.append("%s: main is not a caller in %s" % (index, ";".join(stack)))
        want = {f: flat for flat, _, f in ref["rows"] if flat}
        if by_leaf != want:
            problems.append("%s: by leaf %s, pprof's flat %s" % (index, by_leaf, want))
    return problems, []


def test_collapsed_base(suite):
    _, heaps, prog = common.dumps(suite)
    old, new = heaps[0], heaps[-1]
    _, out, _ = heaptrail(suite, ["collapsed", "--base", old, new])
    rows = folded(out, 2)
    problems = []
    for col, dump in ((0, old), (1, new)):
        ref = suite.pprof_top(prog, dump)
        total = sum(v[col] for _, v in rows)
        if total != ref["total"]:
            problems.append("column %d adds up to %d, pprof's total of %s is %d" % (
                col + 1, total, os.path.basename(dump), ref["total"]))
    return problems, []


def test_dot(suite):
    _, heaps, prog = common.dumps(suite)
    dump = heaps[-1]
    ref = suite.pprof_top(prog, dump, index="alloc_space")
    out_path = os.path.join(suite.build, "e2e", "analyze", "callgraph.dot")
    heaptrail(suite, ["callgraph", "--dot", "--alloc-space", "-o", out_path, dump])
    text = open(out_path).read()
    problems = []
    nodes = {}
    for m in re.finditer(r'^\s*(n\d+) \[label="([^"\\]*(?:\\.[^"\\]*)*)"', text, re.M):
        label = m.group(2).split("\\n")
        nodes[m.group(1)] = label
    byname = {l[0]: (n, l) for n, l in nodes.items()}
    edges = {}
    for m in re.finditer(r"^\s*(n\d+) -> (n\d+) \[label=\" ([^\"]+)\"", text, re.M):
        edges[(m.group(1), m.group(2))] = m.group(3)

    def mib(s):
        v, unit = s.split()[:2]
        return float(v) * {"B": 1, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}[unit]

    for flat, cum, f in ref["rows"]:
        if not flat:
            continue
        if f not in byname:
            problems.append("%s (flat %d in pprof) has no box" % (f, flat))
            continue
        n, label = byname[f]
        got = mib(label[1].split(" (")[0])
        if abs(got - flat) > 0.006 * (1 << 20):
            problems.append("%s: box says %s, pprof's flat is %d" % (f, label[1], flat))
        if "main" in byname:
            e = edges.get((byname["main"][0], n))
            if not e or abs(mib(e) - cum) > 0.006 * (1 << 20):
                problems.append("main -> %s: edge %s, pprof's cum is %d" % (f, e, cum))
    if shutil.which("dot"):
        rc, _, err = rt.run(["dot", "-Tsvg", "-o", out_path + ".svg", out_path])
        if rc != 0:
            problems.append("dot cannot render it: %s" % rt.short(err))
    return problems, [text]


def collect(suite):
    return [("collapsed:pprof", lambda: test_collapsed(suite)),
            ("collapsed:base", lambda: test_collapsed_base(suite)),
            ("callgraph:dot", lambda: test_dot(suite))]
