"""A checked-in leak file read by `heaptrail report`
(tests/golden/leaks/golden.leaks, written by hand: see its README).

    golden-leaks:text   report (the default kinds: definite, possible)
                        against tests/golden/expected/leaks/default.txt
    golden-leaks:all    --show-leak-kinds=all against .../all.txt
    golden-leaks:json   --json: pid, exit, totals, the summary and each
                        record's kind, bytes, blocks, allocator and frames
                        against what the file says (parsed here, with the
                        functions its pcs fall in, read from the binary's
                        symbol table by offset)

The expected texts were written by hand from the file's content: records
sorted by bytes, largest first, numbered among those shown; byte counts
with thousands separators; each frame as FUNCTION (FILE:LINE), the lines
those of the call instructions the return addresses follow, in
tests/golden/src/golden_prog.c. The symbols come from the checked-in
tests/golden/bin/golden_prog (--binary-path; the file names the module
/opt/golden/bin/golden_prog with that binary's build id).
"""
import json
import os

import run_tests

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(os.path.dirname(HERE), "golden")
LEAKS = os.path.join(GOLDEN, "leaks", "golden.leaks")
BIN = os.path.join(GOLDEN, "bin")
EXPECTED = os.path.join(GOLDEN, "expected", "leaks")
BASE = 0x555555554000   # the module's load address in the file
# golden_prog's functions by offset (nm -n): which one each pc falls in
FUNCS = ((0x1176, "small_site"), (0x11a1, "big_site"), (0x11cc, "node_site"),
         (0x11e1, "build_list"), (0x1207, "deep_site"), (0x121f, "recurse"),
         (0x1248, "churn_site"), (0x1273, "main"), (0x12bc, None))


def function_at(pc):
    off = pc - BASE
    for (start, name), (end, _) in zip(FUNCS, FUNCS[1:]):
        if start <= off < end:
            return name
    return None


def parse_leaks(path):
    """The file's own figures: {"pid", "exit", "totals", "summary",
    "records": [(kind, bytes, blocks, allocator, [functions])]}."""
    stacks, records, summary = {}, [], {}
    out = {}
    with open(path) as f:
        for line in f:
            t = line.split()
            if not t:
                continue
            if t[0] == "pid":
                out["pid"] = int(t[1])
            elif t[0] == "exit":
                out["exit"] = {t[1]: int(t[2])}
            elif t[0] == "totals":
                out["totals"] = [int(x) for x in t[1:6]]
            elif t[0] == "summary":
                summary[t[1]] = {"bytes": int(t[2]), "blocks": int(t[3])}
            elif t[0] == "stack":
                stacks[t[1]] = (t[2], [function_at(int(x, 16)) for x in t[3:]])
            elif t[0] == "record":
                alloc, funcs = stacks[t[4]]
                records.append((t[1], int(t[2]), int(t[3]), alloc, funcs))
    summary.setdefault("suppressed", {"bytes": 0, "blocks": 0})
    out["summary"], out["records"] = summary, records
    return out


def text(suite, extra, expected):
    rc, out, err = run_tests.run([suite.heaptrail, "report"] + extra +
                                 ["--binary-path", BIN, LEAKS])
    problems = []
    if rc != 0:
        problems.append("status %d" % rc)
    if err:
        problems.append("stderr: %s" % run_tests.short(err))
    with open(os.path.join(EXPECTED, expected), "rb") as f:
        want = f.read()
    if out != want:
        problems.append("differs from %s: %s" % (
            expected, run_tests.first_difference(out, want)))
    return problems, [out.decode("utf-8", "replace")]


def test_json(suite):
    rc, out, err = run_tests.run([suite.heaptrail, "report", "--json",
                                  "--binary-path", BIN, LEAKS])
    if rc != 0:
        raise run_tests.Failure("status %d: %s" % (rc, run_tests.short(err)))
    data = json.loads(out)
    objs = data if isinstance(data, list) else [data]
    want = parse_leaks(LEAKS)
    problems = []
    if len(objs) != 1:
        raise run_tests.Failure("%d processes, expected 1" % len(objs))
    o = objs[0]
    if o.get("pid") != want["pid"]:
        problems.append("pid %r, the file says %d" % (o.get("pid"),
                                                      want["pid"]))
    if o.get("exit") != want["exit"]:
        problems.append("exit %r, the file says %r" % (o.get("exit"),
                                                       want["exit"]))
    t = o.get("totals") or {}
    got_totals = [t.get(k) for k in ("allocs", "frees", "bytes_allocated",
                                     "in_use_bytes", "in_use_blocks")]
    if got_totals != want["totals"]:
        problems.append("totals %r, the file says %r" % (got_totals,
                                                         want["totals"]))
    if o.get("summary") != want["summary"]:
        problems.append("summary %r, the file says %r" % (o.get("summary"),
                                                          want["summary"]))
    # the file's own consistency, which the expected texts rely on: the
    # records add up to the summary, and the summary to the in-use totals
    sums = {}
    for kind, b, n, _, _ in want["records"]:
        sb, sn = sums.get(kind, (0, 0))
        sums[kind] = (sb + b, sn + n)
    for kind, v in want["summary"].items():
        if sums.get(kind, (0, 0)) != (v["bytes"], v["blocks"]):
            problems.append("golden.leaks: %s records %r, summary %r" % (
                kind, sums.get(kind), v))
    if (sum(v["bytes"] for v in want["summary"].values()),
            sum(v["blocks"] for v in want["summary"].values())) != \
            tuple(want["totals"][3:5]):
        problems.append("golden.leaks: the summary does not add up to the "
                        "in-use totals")
    got = sorted((r.get("kind"), r.get("bytes"), r.get("blocks"),
                  r.get("allocator"), [f.get("function") for f in
                                       r.get("stack") or []])
                 for r in o.get("records") or [])
    if got != sorted(want["records"]):
        problems.append("records %r, the file says %r" % (
            got, sorted(want["records"])))
    return problems, [out.decode("utf-8", "replace")]


def collect(suite):
    return [("golden-leaks:text", lambda: text(suite, [], "default.txt")),
            ("golden-leaks:all", lambda: text(
                suite, ["--show-leak-kinds=all"], "all.txt")),
            ("golden-leaks:json", lambda: test_json(suite))]
