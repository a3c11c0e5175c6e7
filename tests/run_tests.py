#!/usr/bin/env python3
"""heaptrail's test runner: unit test binaries, CLI error cases, and the
end-to-end suite that checks `heaptrail run` against valgrind memcheck.

    python3 tests/run_tests.py --build build [-k SUBSTR] [-v] [-j N] [--list]

The suite's code is in tests/runner/ by area: harness.py (results, Skip
and CI, running commands, fresh directories), annotations.py (the
language of the programs' @ comments, shared with tests/hostile),
specs.py (the keys below), valgrind.py (the oracle and its cache), e2e.py (vg:,
ht:, kinds:, delta:), cli.py (report:, cli:), prof.py (prof:), core.py
(the Suite); this file collects the tests and runs them.  The other
tests are laid out as the code is: tests/agent/ (the agent in a
process), tests/control/ (attach, the live endpoint, requests to a
running agent), tests/views/ (the analyzer's views and readers),
tests/runner/ (the runner's own tests, and the layer checks); their
programs are in tests/progs/, their shared fixtures in tests/common.py.
A new test goes in a module tests/AREA/test_NAME.py defining
collect(suite) -> [(name, thunk)] (see plugin_tests); it imports this
file as `run_tests`, where every name of tests/runner/ is found.

End-to-end programs live in tests/e2e/progs/.  Each describes itself in
its leading comment, so a program and what it must produce are read
together (a key not below is an error):

    @proc DEPTH exit=N in_use=BYTES/BLOCKS [args=A,B]
        a process that must exist (exit=-N: killed by signal N): DEPTH 0
        is the process the runner started (or what it exec'd into), 1 its
        forked child, ...
        in_use is what memcheck says is in use at exit.
    @kinds DEPTH KIND=BYTES/BLOCKS ...
        memcheck's LEAK SUMMARY for that process, KIND among
        definitely_lost, indirectly_lost, possibly_lost, still_reachable,
        suppressed; a kind not named is expected to be 0/0 ("@kinds 0"
        alone: nothing in use at all)
    @heuristic DEPTH NAME BYTES/BLOCKS
        of the still reachable bytes, what memcheck reached only through
        its heuristic NAME (newarray, length64, stdstring,
        multipleinheritance); checked against valgrind only
    @leak DEPTH FUNC BYTES/BLOCKS [KIND]
        the records whose stack contains FUNC add up to this; with KIND,
        only the records of that kind (checked by vg: and kinds:, not
        by ht:)
    @absent DEPTH FUNC
        no record of that process has FUNC on its stack
    @frames DEPTH FUNC N
        some record's stack holds FUNC at least N times (deep stacks)
    @check N KIND BYTES/BLOCKS [FUNC]
        the program's Nth leak check (heaptrail_leak_check with
        HEAPTRAIL_LEAKS_INCREASED; under valgrind, the program asks for
        VALGRIND_DO_ADDED_LEAK_CHECK instead) found KIND increased by
        BYTES/BLOCKS; with FUNC, every KIND record of that check names FUNC
    @args A B ...      arguments for the program
    @stdin TEXT        fed to the program's stdin (\\n escapes)
    @lib SRC NAME.so   a shared library built beside the program
    @src SRC           another source file linked into the program
    @link FLAGS        extra link flags
    @variants V ...    built only in these variants (default: all)
    @suppressions FILE heaptrail run --suppressions FILE (repeatable)
    @vg-suppressions FILE  valgrind --suppressions=FILE, the same
                       suppressions in valgrind's format, for the oracle
    @ht-stderr REGEX   some line of heaptrail's text report matches REGEX
                       (case-insensitive)
    @usage-varies WHY  its allocation and free counts are not compared with
                       valgrind's (libc does different work under
                       valgrind); bytes allocated never are (environment
                       strings and the DTV differ)
    @static            built with -static only, for the CLI's refusal test
    @cli-only          used by a cli: test only, not in the vg/ht matrix
    @prof              a heap-profiling program (prof_*.c), used by the
                       prof: tests only, not in the vg/ht matrix

and each allocation site that is checked carries "@site FUNC" on the line
of the allocator call: FUNC must be the first frame after the allocator,
at that line.

Every program is built twice (with and without frame pointers) and, per
binary:
  vg:PROG[VARIANT]  valgrind agrees with what the program says it leaks
                    (checks the programs and the oracle, no heaptrail)
  ht:PROG[VARIANT]  heaptrail run: same stdout and exit status as a bare
                    run; per process, in-use totals and the counts of
                    allocations and frees equal valgrind's;
                    the expected functions, counts and lines are found
  kinds:PROG[VARIANT]  the same heaptrail run: per process, each of the
                    four kinds (and suppressed) equals valgrind's LEAK
                    SUMMARY byte for byte, block for block; the records'
                    kinds add up to the summary; the @leak checks that
                    name a kind hold.  A process whose JSON summary
                    lacks the four kinds fails.
  delta:PROG[VARIANT]  for programs with @check: the check files
                    heaptrail.PID.check-N.leaks the program's leak checks
                    wrote, read back with `heaptrail report --json`: the
                    @check increases, and each check's summary equal to
                    valgrind's LEAK SUMMARY at the same check.
A program with @suppressions is run by heaptrail with them.

Heap profiling (sampling, heap dumps, timeline), with the @prof programs
built once with frame pointers, mostly under plain LD_PRELOAD with
HEAPTRAIL_OPTIONS; dumps are read three ways: by tests/tools/heapprof.py
(the runner's own reader: pprof's unbiasing, symbols from nm), by
`jeprof --text` (libjemalloc-dev) and by Google's pprof, built offline
from Debian's source by tests/tools/get-pprof into BUILD/tools.
  prof:readers       no heaptrail: jemalloc's own profiler on
                     prof_accuracy, its dump converted to the legacy
                     layout; the three readers agree with each other and
                     with the true shares (checks the oracle itself)
  prof:accuracy      prof_accuracy (4 GiB at 60/30/10 %, untouched) three
                     times at the default S: each site's estimated share
                     within 3 points and the total within 5 %, by all
                     three readers; the runs sample differently
  prof:accuracy-auto the same at sample=auto: S rises from 8 KiB to
                     512 KiB as the heap grows, the samples thinned at
                     each step; the dump states 512 KiB and is unbiased
  prof:exact         the same at sample=1: every number exact
  prof:cache         prof_cache with every trigger (interval, every, peak,
                     signal sent by the runner, API, final): each dump
                     whole, one peak file, and `jeprof --base` and
                     `pprof -base` from the first dump to the API dump
                     name cache_grow first (and load_config without base)
  prof:run-flags     the same triggers through `heaptrail run --sample
                     --interval --peak --every --signal --final`
  prof:timeline      prof_cache at sample=1: the timeline's time increases,
                     its live-bytes peak is the program's within 10 %, the
                     peak dump within peak_step of it
  prof:transparent   prof_cache under every=50ms,timeline=10: no sleep of
                     the program is cut short (EINTR) by the agent's timers
  prof:api, prof:mallctl  the API programs under the agent (sample=1);
                     [bare]: without it they run normally; prof:mallctl
                     [jemalloc]: the program works under jemalloc itself
  prof:aliases       jemalloc's option names (prof_prefix, lg_prof_sample,
                     lg_prof_interval, prof_gdump, prof_final, ...)
  prof:bad-options   malformed options: the program's output and status
                     unchanged, one stderr line per bad option naming it
jeprof or pprof missing is a failure (scripts/install-deps --test
installs them).

The hostile-host suite, hostile:PROG[CASE]:MODE and hostile:run:CASE, is
tests/hostile/run.py (collected here; its docstring lists the tests): the
programs of tests/hostile/progs/ run bare and under heaptrail in every
mode, with the same output, status and signal and the right leak figures.

glibc's dynamic thread vector (allocate_dtv, one block per thread that
is still alive at exit) is sized by how many loaded modules have TLS; the
agent and libunwind add two, so under heaptrail each is 32 bytes bigger.
Those blocks are compared by count and kind, not by size.

Valgrind results are cached by binary hash in BUILD/e2e/vgcache.

Output: one "PASS name", "FAIL name: reason" or "SKIP name: reason" per
test, then exactly one line "N passed, N failed, N skipped"; exit status
1 if anything failed.  A test is skipped only when a tool it needs is
missing on the machine (valgrind's rivals jemalloc/tcmalloc, a static
libc, clang's libFuzzer, chromium, jeprof, pprof, root, a tmpfs mount);
with CI=true each of those skips is a failure instead.  A heaptrail
feature that is missing or broken is always a failure.  Python standard
library only.
"""

import argparse
import concurrent.futures
import os
import sys
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Everything the suite's modules define is also run_tests.NAME: the
# plugins (tests/AREA/test_*.py, tests/hostile/run.py) use it so.
from runner.harness import *  # noqa: E402,F401,F403
from runner.specs import *  # noqa: E402,F401,F403
from runner.valgrind import *  # noqa: E402,F401,F403
from runner.e2e import *  # noqa: E402,F401,F403
from runner.cli import *  # noqa: E402,F401,F403
from runner.prof import *  # noqa: E402,F401,F403
from runner.core import *  # noqa: E402,F401,F403


# ---------------------------------------------------------------- main

def collect_tests(suite):
    """[(name, thunk)] in the order they are scheduled."""
    tests = []
    # one per source (a binary left by a deleted test is not run; one
    # that was not built fails)
    for src in sorted(glob.glob(os.path.join(ROOT, "tests", "unit",
                                             "test_*.c"))):
        f = os.path.basename(src)[:-2]
        p = os.path.join(suite.build, "tests", f)
        tests.append(("unit:" + f, lambda p=p: suite.test_unit(p)))
    specs = [s for s in suite.specs.values() if not s.cli_only]
    # valgrind first: the heaptrail tests reuse its results.
    for spec in specs:
        for v in spec.variants or VARIANTS:
            tests.append(("vg:%s[%s]" % (spec.name, v),
                          lambda s=spec, v=v: suite.test_vg(s, v)))
    for spec in specs:
        for v in spec.variants or VARIANTS:
            tests.append(("ht:%s[%s]" % (spec.name, v),
                          lambda s=spec, v=v: suite.test_ht(s, v)))
            tests.append(("kinds:%s[%s]" % (spec.name, v),
                          lambda s=spec, v=v: suite.test_kinds(s, v)))
            if spec.checks:
                tests.append(("delta:%s[%s]" % (spec.name, v),
                              lambda s=spec, v=v: suite.test_delta(s, v)))
    for prog, func in (("leak_one", "leak_one"),
                       ("fork_leak", "leak_in_child"),
                       ("cxx_leaks", "make_widget")):
        tests.append(("report:" + prog, lambda s=suite.specs[prog], f=func:
                      suite.test_report(s, f)))
    for name in ("nonexistent", "passthrough", "forbidden-outdir",
                 "error-exitcode", "static", "signal-status", "usage-errors",
                 "no-follow-children", "leaks-pid", "gen-suppressions",
                 "agent-files", "threads-seen", "timeline-step", "report-lost",
                 "same-as-bare", "fault-signal", "other-allocator",
                 "cancel-in-dump", "stop-transparent", "output-paths",
                 "output-modes") + HOST_TESTS:
        tests.append(("cli:" + name, lambda n=name: suite.test_cli(n)))
    # The long ones first, so the two workers end together.
    for name in ("accuracy", "accuracy-auto", "cache", "run-flags", "timeline", "transparent",
                 "readers", "exact", "aliases", "api", "api-bare", "mallctl",
                 "mallctl-bare", "mallctl-jemalloc", "bad-options"):
        label = name
        for kind in ("-bare", "-jemalloc"):
            if name.endswith(kind):
                label = "%s[%s]" % (name[:-len(kind)], kind[1:])
        tests.append(("prof:" + label, lambda n=name: suite.test_prof(n)))
    tests += plugin_tests(suite)
    return tests


def plugin_tests(suite):
    """Tests from tests/{agent,control,views,runner}/test_*.py (PLUGIN_DIRS:
    the agent, the control layer, the analyzer's views, the runner
    itself): each module defines collect(suite) -> [(name, thunk)], a
    thunk returning (problems, details) or raising Skip/Failure, as the
    tests above do. Modules import this file as `run_tests` for Failure,
    Skip, run() and the Suite, tests/common.py as `common`, and each
    other by name (every directory is on the path)."""
    import importlib.util
    tests = []
    here = os.path.dirname(os.path.abspath(__file__))
    sys.modules.setdefault("run_tests", sys.modules[__name__])
    # the hostile-host suite (tests/hostile/run.py, its docstring says what)
    hostile = os.path.join(here, "hostile", "run.py")
    if os.path.exists(hostile):
        spec = importlib.util.spec_from_file_location("hostile_run", hostile)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        tests += mod.collect(suite)
    dirs = [os.path.join(here, d) for d in PLUGIN_DIRS]
    for pdir in dirs:
        if pdir not in sys.path:
            sys.path.insert(0, pdir)
    for pdir in dirs:
        for f in sorted(os.listdir(pdir)):
            if not (f.startswith("test_") and f.endswith(".py")):
                continue
            spec = importlib.util.spec_from_file_location(f[:-3], os.path.join(pdir, f))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            tests += mod.collect(suite)
    return tests


PLUGIN_DIRS = ("agent", "control", "views", "runner")


def static_available(suite):
    """The reason a -static build cannot be made, or None."""
    try:
        suite.build_prog(suite.specs["static_leak"], "static")
    except Failure as e:
        lines = [l for l in str(e).split("\n") if l.strip()]
        return "cannot link -static, no static libc? (%s)" % lines[-1][:120]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build",
                    help="build directory holding heaptrail (default build)")
    ap.add_argument("-k", action="append", default=[], metavar="SUBSTR",
                    help="run only tests whose name contains SUBSTR "
                    "(repeatable: any of them)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print details of each test")
    ap.add_argument("-j", "--jobs", type=int, default=2,
                    help="parallel workers (at most 2; default 2)")
    ap.add_argument("--no-cache", action="store_true",
                    help="rerun valgrind even when a cached result exists")
    ap.add_argument("--list", action="store_true",
                    help="print the names of the tests (after -k) and "
                    "run none")
    args = ap.parse_args()

    started = time.time()
    if not args.list:
        lock = lock_build(os.path.abspath(args.build))  # noqa: F841 (held)
        start_fresh(os.path.abspath(args.build))
    suite = Suite(args)
    reporter = Reporter(args.verbose)
    tests = collect_tests(suite)
    if args.k:
        tests = [t for t in tests if any(k in t[0] for k in args.k)]
    if args.list:
        for name, _ in tests:
            print(name)
        return 0
    if any(name == "cli:static" for name, _ in tests):
        reason = static_available(suite)
        if reason:
            reporter.skip("cli:static", reason)
            tests = [t for t in tests if t[0] != "cli:static"]

    def one(name, thunk):
        try:
            problems, details = thunk()
        except Skip as e:
            reporter.skip(name, str(e))
            return
        except Failure as e:
            problems, details = [str(e).split("\n")[0]], [str(e)]
        except Exception as e:   # a bug in a test is a failure, not a crash
            problems, details = ["%s: %s" % (type(e).__name__, e)], []
        reporter.result(name, problems, details)

    jobs = max(1, min(2, args.jobs))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(one, n, t) for n, t in tests]:
            f.result()
    if args.verbose:
        print("(%.1fs)" % (time.time() - started), file=sys.stderr)
    print("%d passed, %d failed, %d skipped" % (
        reporter.passed, reporter.failed, reporter.skipped))
    return 1 if reporter.failed else 0


if __name__ == "__main__":
    sys.exit(main())

