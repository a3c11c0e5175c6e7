"""`heaptrail growth` after an attach on a program whose cache replaces
blocks allocated before the attach (issue 28;
tests/progs/attach_refresh.c, started bare): the heap stays
flat, the dumps see only the successors, rising. Dumps taken on the
program's allocation path say what the allocator counts in use
(heap_in_use=), and growth calls such a site "replacing", not growing.

    (each attach says when growth can first answer: 3 dumps exact, 5
    sampled, at its --every)
    attach-refresh:cache      the cache alone, --sample 1: most timed
                    dumps say heap_in_use, within the seen heap and its
                    chunk overhead plus the 4 MiB cache; cache_refresh
                    is "replacing", no site grows, and the note names
                    it. The same dumps without their heap_in_use (the
                    dumps of before) call cache_refresh growing: the
                    test of the test
    attach-refresh:leak       the cache and a 256 B/ms leak beside it,
                    default sampling: leak_more growing at the rate the
                    program counted (within 30 %), cache_refresh
                    replacing
    attach-refresh:jemalloc, attach-refresh:tcmalloc   the same, exact,
                    with the program linked with jemalloc or tcmalloc as
                    its malloc (their own counts: stats.allocated,
                    generic.current_allocated_bytes)
    attach-refresh:run        under `heaptrail run` nothing is from
                    before: no site is replacing (cache_refresh takes
                    over from cache_fill, which shrinks, both seen),
                    leak_more grows
    attach-refresh:handler    tests/progs/handler_alloc_only.c
                    under `heaptrail run --every 5ms`: for 600 ms only a
                    SIGALRM handler allocates, then only the main thread.
                    The dumps written from the handler (where asking the
                    allocator could deadlock on a lock the interrupted
                    code holds), at least 20, have no heap_in_use; at
                    least 10 of the main thread's have it (the agent asks
                    at most 1 % of the time). (With the handler check
                    taken out, all 240 had it.)
"""
import os
import re
import time

import run_tests
import test_attach as ta
import test_attach_ptrs as tp

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "progs", "attach_refresh.c")
HEAP_RE = re.compile(r"^# heaptrail-dump .* heap_in_use=(\d+) ", re.M)


def build(suite, alloc=None):
    work = os.path.join(suite.build, "e2e", "attach_refresh")
    prog = os.path.join(work, "attach_refresh" + ("-" + alloc if alloc else ""))
    lib = [tp.ALLOCATORS[alloc]] if alloc else []
    if lib and not os.path.exists(lib[0]):
        raise run_tests.Skip("%s is not installed (%s)" % (alloc, lib[0]))
    with tp._lock:
        if prog not in tp._built:
            os.makedirs(work, exist_ok=True)
            rc, _, err = run_tests.run([suite.cc, "-g", "-O1", "-pthread", "-o", prog + ".tmp",
                                        SRC] + lib, env=os.environ)
            if rc:
                raise run_tests.Failure("build failed: %s" % run_tests.short(err))
            os.rename(prog + ".tmp", prog)
            tp._built[prog] = True
    return work, prog


def counts(t):
    return [int(x) for x in t.ask("count").split()[1:]]


def verdicts(problems, suite, dumps, what):
    """{site: (trend, slope)} of `heaptrail growth` on dumps, and its text."""
    rc, out, err = ta.heaptrail(suite, "growth", "--bytes", "-n", "50", *dumps)
    if not ta.expect_ok(problems, "growth (%s)" % what, rc, err):
        return {}, ""
    return {r[3]: (r[1], r[2]) for r in ta.growth_rows(out.decode())}, out.decode()


def timed_dumps(out):
    return sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".every.heap"))


def check_heap_lines(problems, dumps, cache=4096 * 1024):
    """Most timed dumps say heap_in_use (the agent asks at most 1 % of the
    time: a slow count skips the next dumps), each at least the heap the
    dump holds and at most that, its chunks' overhead and the cache from
    before."""
    counted = 0
    for d in dumps:
        with open(d) as f:
            text = f.read()
        m = HEAP_RE.search(text)
        if not m:
            continue
        counted += 1
        seen = int(re.match(r"heap profile:\s*\d+:\s*(\d+)", text).group(1))
        heap = int(m.group(1))
        if not seen <= heap <= seen * 1.5 + cache + (1 << 20):
            problems.append("%s: heap_in_use=%d, the dump holds %d"
                            % (os.path.basename(d), heap, seen))
    if counted < len(dumps) * 3 // 4:
        problems.append("%d of %d dumps say heap_in_use" % (counted, len(dumps)))


def test_attach(suite, leak, exact, alloc=None):
    work, prog = build(suite, alloc)
    name = ("leak" if leak else "cache") + ("-exact" if exact else "") + (alloc or "")
    out = ta.new_dir(os.path.join(work, name))
    problems, info = [], []
    t = ta.Target(None, work, argv=[prog] + (["leak"] if leak else []))
    try:
        time.sleep(0.3)
        args = ["attach", "--every", "200ms", "-o", out] + (["--sample", "1"] if exact else [])
        rc, _, err = ta.heaptrail(suite, *(args + [str(t.p.pid)]))
        if not ta.expect_ok(problems, "attach", rc, err):
            return problems, info
        # when growth can first answer: 3 exact dumps, 5 sampled
        want = ("from 3 dumps on (--every 0.2s: about 0.6 s from now)" if exact else
                "from 5 dumps on (--every 0.2s: about 1 s from now)")
        if want.encode() not in err:
            problems.append("the attach does not say %r: %s" % (want, err.decode()[-300:]))
        c0, t0 = counts(t), time.monotonic()
        time.sleep(4)
        c1, t1 = counts(t), time.monotonic()
        rc, _, err = ta.heaptrail(suite, "detach", str(t.p.pid))
        ta.expect_ok(problems, "detach", rc, err)
        dumps = timed_dumps(out)
        check_heap_lines(problems, dumps)
        got, text = verdicts(problems, suite, dumps, "attach")
        if got.get("cache_refresh", ("",))[0] != "replacing":
            problems.append("cache_refresh: %s, want replacing:\n%s"
                            % (got.get("cache_refresh"), text))
        elif not re.search(r"\(cache_refresh\) rose while the allocator's own count", text):
            problems.append("no note names cache_refresh:\n%s" % text)
        growing = sorted(k for k, v in got.items() if v[0] == "growing" and k != "(all)")
        if growing != (["leak_more"] if leak else []):
            problems.append("growing %s:\n%s" % (growing, text))
        if leak and "leak_more" in got:
            rate = (c1[1] - c0[1]) / (t1 - t0)
            info.append("leak_more %d B/s, the program %.0f B/s" % (got["leak_more"][1], rate))
            if not 0.7 * rate <= got["leak_more"][1] <= 1.3 * rate:
                problems.append("leak_more at %d B/s, the program leaked %.0f B/s"
                                % (got["leak_more"][1], rate))
        if not leak and not problems:
            # the same dumps as heaptrail wrote them before heap_in_use
            old = run_tests.fresh_dir(out + "-old")
            for d in dumps:
                with open(d) as f, open(os.path.join(old, os.path.basename(d)), "w") as g:
                    g.write(re.sub(r" heap_in_use=\d+", "", f.read()))
            got, text = verdicts(problems, suite, timed_dumps(old), "without heap_in_use")
            if got.get("cache_refresh", ("",))[0] != "growing":
                problems.append("without heap_in_use, cache_refresh is %s: the test cannot "
                                "fail:\n%s" % (got.get("cache_refresh"), text))
        rc, err = t.finish()
        if rc != 0 or err or t.out[-1] != "done":
            problems.append("target: exit %d, output %s, stderr %r" % (rc, t.out[-2:], err[:200]))
    finally:
        t.kill()
    return problems, info


def test_run(suite):
    work, prog = build(suite)
    out = run_tests.fresh_dir(os.path.join(work, "run"))
    problems = []
    rc, _, err = run_tests.run(["sh", "-c", "sleep 4 | exec \"$0\" \"$@\"", suite.heaptrail,
                                "run", "--every", "200ms", "--sample", "1", "-o", out, "--",
                                prog, "leak"], timeout=60)
    if rc != 0:
        problems.append("run: exit %d: %s" % (rc, run_tests.short(err)))
        return problems, []
    dumps = timed_dumps(out)
    check_heap_lines(problems, dumps)
    got, text = verdicts(problems, suite, dumps, "run")
    if any(v[0] == "replacing" for v in got.values()) or "cache_refresh" not in got:
        problems.append("under run, a site is replacing (or cache_refresh missing):\n%s" % text)
    if got.get("cache_fill", ("",))[0] != "shrinking":
        problems.append("under run, cache_fill is %s:\n%s" % (got.get("cache_fill"), text))
    if got.get("leak_more", ("",))[0] != "growing":
        problems.append("under run, leak_more is %s:\n%s" % (got.get("leak_more"), text))
    return problems, []


def test_handler(suite):
    work = os.path.join(suite.build, "e2e", "attach_refresh")
    os.makedirs(work, exist_ok=True)
    prog = os.path.join(work, "handler_alloc_only")
    rc, _, err = run_tests.run([suite.cc, "-g", "-O1", "-o", prog,
                                os.path.join(os.path.dirname(HERE), "progs", "handler_alloc_only.c")])
    if rc:
        raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    out = run_tests.fresh_dir(os.path.join(work, "handler"))
    problems = []
    rc, sout, err = run_tests.run([suite.heaptrail, "run", "--every", "5ms", "--sample", "1",
                                   "-o", out, "--", prog], timeout=60)
    if rc != 0 or not sout.decode().endswith("done\n"):
        return ["run: exit %d, output %r: %s" % (rc, sout[-80:], run_tests.short(err))], []
    phase2 = int(re.search(rb"^phase2 (\d+)$", sout, re.M).group(1))
    handler, main = "", ""
    for d in timed_dumps(out):
        with open(d) as f:
            line = next(l for l in f if l.startswith("# heaptrail-dump"))
        ms = int(re.search(r" unix_ms=(\d+)", line).group(1))
        mark = "H" if " heap_in_use=" in line else "-"
        if ms < phase2 - 5:
            handler += mark
        elif ms > phase2 + 5:
            main += mark
    if len(handler) < 20 or "H" in handler or main.count("H") < 10:
        problems.append("H: a dump with heap_in_use, -: without; from the handler: %s; "
                        "from the main thread: %s" % (handler, main))
    return problems, ["%d dumps from the handler, %d of %d from the main thread counted"
                      % (len(handler), main.count("H"), len(main))]


def collect(suite):
    return [("attach-refresh:cache", lambda: test_attach(suite, False, True)),
            ("attach-refresh:leak", lambda: test_attach(suite, True, False)),
            ("attach-refresh:jemalloc", lambda: test_attach(suite, True, True, "jemalloc")),
            ("attach-refresh:tcmalloc", lambda: test_attach(suite, True, True, "tcmalloc")),
            ("attach-refresh:run", lambda: test_run(suite)),
            ("attach-refresh:handler", lambda: test_handler(suite))]
