"""Opt-in tracking of the program's anonymous mappings (issue 15):
tests/progs/mmap_sites.c maps 1 GiB in 256 KiB pieces from two
functions, unmaps some, cuts one in half, grows others with mremap.

    mmap:sites   `heaptrail run --mmap --final --sample 1`: in the final dump,
                 `top --pool [mmap]` totals what the program says it still
                 has mapped, and each function's cumulative bytes are what
                 it mapped (map_cache through its helper map, map_buffer by
                 mremap); the leak report leaves the mappings out
    mmap:off     the same run without --mmap: the program prints the same,
                 and the dump holds no mapping at all
"""
import os
import re

import run_tests as rt
from run_tests import Failure

HERE = os.path.dirname(os.path.abspath(__file__))
ROW = re.compile(r"^\s*(-?\d+)\s+\S+%\s+\S+%\s+(-?\d+)\s+\S+%\s+(\S+)")


def build(suite, work):
    prog = os.path.join(work, "mmap_sites")
    rc, _, err = rt.run([suite.cc, "-g", "-O1", "-o", prog,
                         os.path.join(os.path.dirname(HERE), "progs", "mmap_sites.c")])
    if rc != 0:
        raise Failure("cc mmap_sites.c: %s" % rt.short(err, 600))
    return prog


def run(suite, work, prog, extra):
    out = rt.fresh_dir(os.path.join(work, "out"))
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "--final", "--sample", "1"] +
                             extra + ["-o", out, "--", prog], cwd=work)
    if rc != 0:
        raise Failure("heaptrail run: status %d: %s" % (rc, rt.short(err)))
    finals = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".final.heap")]
    if len(finals) != 1:
        raise Failure("%d final dumps" % len(finals))
    return stdout.decode(), finals[0], out


def top(suite, dump, pool):
    rc, text, err = rt.run([suite.heaptrail, "top", "--bytes", "-n", "100", "--pool", pool,
                            dump])
    if rc != 0:
        raise Failure("top --pool %s: status %d: %s" % (pool, rc, rt.short(err)))
    text = text.decode()
    m = re.search(r"in-use space (-?\d+)", text)
    rows = {}
    for line in text.split("\n")[1:]:
        r = ROW.match(line)
        if r:
            rows[r.group(3)] = (int(r.group(1)), int(r.group(2)))
    return (int(m.group(1)) if m else None), rows, text


def program_sites(stdout):
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^site (\S+) (\d+)$", stdout, re.M)}


def test_sites(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "mmap-sites"))
    prog = build(suite, work)
    stdout, dump, out = run(suite, work, prog, ["--mmap"])
    sites = program_sites(stdout)
    total, rows, text = top(suite, dump, "[mmap]")
    problems = []
    if total != sum(sites.values()):
        problems.append("[mmap] holds %s bytes, the program has %d mapped" %
                        (total, sum(sites.values())))
    for fn, want in sorted(sites.items()):
        got = rows.get(fn, (None, None))[1]
        if got != want:
            problems.append("%s: %s bytes (cumulative), the program has %d mapped" %
                            (fn, got, want))
    rc, rep, err = rt.run([suite.heaptrail, "report", "--json", out])
    if rc != 0 or b"[mmap]" in rep or b'"mmap"' in rep:
        problems.append("the leak report names the mappings (status %d)" % rc)
    return problems, [text]


def test_off(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "mmap-off"))
    prog = build(suite, work)
    rc, bare, _ = rt.run([prog], cwd=work)
    stdout, dump, _ = run(suite, work, prog, [])
    problems = []
    if stdout != bare.decode() or rc != 0:
        problems.append("the program prints %r under heaptrail, %r bare" % (stdout, bare))
    total, rows, text = top(suite, dump, "[mmap]")
    if total != 0:
        problems.append("without --mmap the dump holds %s bytes of mappings" % total)
    return problems, [text]


def collect(suite):
    return [("mmap:sites", lambda: test_sites(suite)),
            ("mmap:off", lambda: test_off(suite))]
