#!/usr/bin/env python3
"""heaptrail's test runner: unit test binaries, CLI error cases, and the
end-to-end suite that checks `heaptrail run` against valgrind memcheck.

    python3 tests/run_tests.py --build build [-k SUBSTR] [-v] [-j N]

End-to-end programs live in tests/e2e/progs/.  Each describes itself in
its leading comment, so a program and what it must produce are read
together:

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
                    name a kind hold.  SKIP while heaptrail does not
                    classify (its JSON summary has only "in_use").
  delta:PROG[VARIANT]  for programs with @check: the check files
                    heaptrail.PID.check-N.leaks the program's leak checks
                    wrote, read back with `heaptrail report --json`: the
                    @check increases, and each check's summary equal to
                    valgrind's LEAK SUMMARY at the same check.  SKIP while
                    libheaptrail.so does not export heaptrail_leak_check.
A program with @suppressions is run by heaptrail with them (ht:, kinds:
SKIP while `heaptrail run --help` does not mention --suppressions).

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
The prof: tests that need the agent SKIP while it writes no heap dump
(final=1 on /bin/true leaves no heaptrail.*.heap); jeprof or pprof
missing is a failure (scripts/install-deps --test installs them).

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
1 if anything failed.  Python standard library only.
"""

import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGS = os.path.join(ROOT, "tests", "e2e", "progs")
TOOLS = os.path.join(ROOT, "tests", "tools")

sys.path.insert(0, TOOLS)
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import heapprof  # noqa: E402  (tests/tools: the runner's heap dump reader)

VARIANTS = {
    "fp": ["-g", "-O1", "-fno-omit-frame-pointer"],
    "nofp": ["-g", "-O1", "-fomit-frame-pointer"],
}

# Extra valgrind options beyond the oracle's leak settings change no
# count: --keep-debuginfo names frames in dlclose'd code, --num-callers
# shows the whole 60-frame recursion.
VALGRIND = [
    "valgrind", "--leak-check=full", "--show-leak-kinds=all",
    "--trace-children=yes", "--child-silent-after-fork=no",
    "--keep-debuginfo=yes", "--num-callers=100",
]

# Every program runs in the same environment: bare, under valgrind and
# under heaptrail.  LC_ALL makes setlocale(LC_ALL, "") load a real locale.
RUN_ENV = dict(os.environ, LC_ALL="C.UTF-8")
for var in list(RUN_ENV):
    if var in ("LD_PRELOAD", "VALGRIND_OPTS") or var.startswith("HEAPTRAIL"):
        del RUN_ENV[var]

PROG_TIMEOUT = 60
VG_TIMEOUT = 300

# Frames that belong to the allocator rather than to the program: the
# first frame after them is "the function that called the allocator".
ALLOC_FUNCS = {
    "malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "strdup", "strndup",
    "__strdup", "__strndup", "__libc_malloc", "__libc_calloc",
    "__libc_realloc", "__libc_memalign", "__posix_memalign",
}
ALLOC_MODULES = ("libheaptrail", "vgpreload_", "libc.so", "libc-",
                 "libstdc++", "ld-linux")


# valgrind's LEAK SUMMARY kinds, by their JSON names.
KINDS = ("definitely_lost", "indirectly_lost", "possibly_lost",
         "still_reachable")
SUMMARY_KINDS = KINDS + ("suppressed",)
VG_KINDS = {k.replace("_", " "): k for k in SUMMARY_KINDS}

# glibc's per-thread DTV, sized by the number of modules with TLS.
DTV_FUNCS = ("allocate_dtv",)


# The CLI's "never hurt the host" tests (cli:NAME, Suite.host_NAME).
HOST_TESTS = ("forward-signals", "run-bad-values", "outdir-owned",
              "bad-leak-file", "missing-report", "leaks-signal-rules",
              "leaks-refuses", "leaks-after-reset", "own-handler",
              "hostile-inputs")


class Failure(Exception):
    """A test's check failed; the message is the reason."""


class Skip(Exception):
    """A test cannot run yet (a feature is missing); the message says why."""


# ---------------------------------------------------------------- output

class Reporter:
    def __init__(self, verbose):
        self.verbose = verbose
        self.lock = threading.Lock()
        self.passed = 0
        self.failed = 0
        self.skipped = 0

    def result(self, name, problems, details=()):
        with self.lock:
            if not problems:
                self.passed += 1
                print("PASS %s" % name, flush=True)
            else:
                self.failed += 1
                reason = "; ".join(problems)
                if len(reason) > 300 and not self.verbose:
                    reason = reason[:297] + "..."
                print("FAIL %s: %s" % (name, reason), flush=True)
            if self.verbose and (problems or details):
                for p in problems:
                    print("    - %s" % p)
                for d in details:
                    for line in str(d).rstrip("\n").split("\n"):
                        print("    | %s" % line)
                sys.stdout.flush()

    def skip(self, name, reason):
        with self.lock:
            self.skipped += 1
            print("SKIP %s: %s" % (name, reason), flush=True)


# ---------------------------------------------------------------- helpers

class Once:
    """Memoizes fn(key) across threads: each key is computed once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.entries = {}

    def get(self, key, fn):
        with self.lock:
            entry = self.entries.setdefault(key, [threading.Lock(), None,
                                                  False])
        with entry[0]:
            if not entry[2]:
                try:
                    entry[1] = ("ok", fn())
                except Exception as e:   # remembered, raised to every caller
                    entry[1] = ("err", e)
                entry[2] = True
        if entry[1][0] == "err":
            raise entry[1][1]
        return entry[1][1]


def sha256_files(paths, extra=""):
    h = hashlib.sha256(extra.encode())
    for p in paths:
        with open(p, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def run(cmd, stdin=b"", cwd=None, timeout=PROG_TIMEOUT, env=RUN_ENV):
    """Runs cmd; returns (returncode, stdout bytes, stderr bytes)."""
    try:
        p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, cwd=cwd, env=env,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure("timed out after %ds: %s" % (timeout, " ".join(cmd)))
    except OSError as e:
        raise Failure("cannot run %s: %s" % (cmd[0], e.strerror))
    return p.returncode, p.stdout, p.stderr


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def short(data, limit=200):
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) \
        else str(data)
    return text if len(text) <= limit else text[:limit] + "..."


def first_difference(got, want):
    """Where two outputs part, as "line N: got X, expected Y"."""
    g, w = got.split(b"\n"), want.split(b"\n")
    for i in range(max(len(g), len(w))):
        a = g[i] if i < len(g) else b"<end>"
        b = w[i] if i < len(w) else b"<end>"
        if a != b:
            return "line %d: got %r, expected %r" % (i + 1, short(a, 60),
                                                     short(b, 60))
    return "identical"


def stderr_lines(err):
    return [l for l in err.decode("utf-8", "replace").split("\n")
            if l.strip()]


# ---------------------------------------------------------------- specs

class Spec:
    """One end-to-end program and what it must produce."""

    def __init__(self, name, src):
        self.name = name
        self.src = src
        self.cxx = src.endswith(".cc")
        self.args = []
        self.stdin = b""
        self.libs = []          # (source path, output name)
        self.link = []
        self.static = False
        self.cli_only = False   # not in the vg/ht matrix
        self.prof = False       # a heap-profiling program (prof: tests)
        self.procs = {}         # depth -> {"exit", "in_use", "args"}
        self.kinds = {}         # depth -> {kind: (bytes, blocks)}
        self.heuristics = {}    # depth -> {name: (bytes, blocks)}
        self.leaks = {}         # depth -> [(func, bytes, blocks, kind)]
        self.absent = {}        # depth -> [func]
        self.frames = {}        # depth -> [(func, count)]
        self.sites = {}         # func -> (file basename, line)
        self.srcs = []          # more sources linked into the program
        self.variants = None    # None: every variant
        self.supps = []         # heaptrail suppression files
        self.vg_supps = []      # the same, in valgrind's format
        self.ht_stderr = []     # regexes heaptrail's stderr must match
        self.checks = []        # (n, kind, bytes, blocks, func or None)
        self.usage_varies = False  # counts not compared with valgrind's

    def sources(self):
        return [self.src] + self.srcs + [s for s, _ in self.libs]


def bytes_blocks(text, path):
    b, slash, n = text.partition("/")
    if not slash:
        raise ValueError("%s: %r is not BYTES/BLOCKS" % (path, text))
    return int(b), int(n)


def kind_name(word, path, allowed=KINDS):
    if word not in allowed:
        raise ValueError("%s: unknown kind %r (one of %s)" % (
            path, word, ", ".join(allowed)))
    return word


def parse_spec(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = Spec(name, path)
    with open(path) as f:
        text = f.read()
    head = text.split("*/", 1)[0]
    for raw in head.split("\n"):
        m = re.match(r"^\s*\*?\s*@([\w-]+)\s*(.*?)\s*$", raw)
        if not m:
            continue
        key, rest = m.group(1), m.group(2)
        words = rest.split()
        if key == "proc":
            depth = int(words[0])
            proc = {"exit": None, "in_use": None, "args": None}
            for w in words[1:]:
                k, _, v = w.partition("=")
                if k == "exit":
                    proc["exit"] = int(v)
                elif k == "in_use":
                    b, _, n = v.partition("/")
                    proc["in_use"] = (int(b), int(n))
                elif k == "args":
                    proc["args"] = v.split(",")
                else:
                    raise ValueError("%s: unknown @proc field %r" % (path, k))
            spec.procs[depth] = proc
        elif key == "leak":
            b, n = bytes_blocks(words[2], path)
            kind = kind_name(words[3], path) if len(words) > 3 else None
            spec.leaks.setdefault(int(words[0]), []).append(
                (words[1], b, n, kind))
        elif key == "kinds":
            kinds = spec.kinds.setdefault(int(words[0]), {})
            for w in words[1:]:
                k, _, v = w.partition("=")
                kinds[kind_name(k, path, SUMMARY_KINDS)] = \
                    bytes_blocks(v, path)
        elif key == "heuristic":
            spec.heuristics.setdefault(int(words[0]), {})[words[1]] = \
                bytes_blocks(words[2], path)
        elif key == "check":
            b, n = bytes_blocks(words[2], path)
            spec.checks.append((int(words[0]), kind_name(words[1], path),
                                b, n, words[3] if len(words) > 3 else None))
        elif key == "src":
            spec.srcs.append(os.path.join(PROGS, words[0]))
        elif key == "variants":
            for v in words:
                if v not in VARIANTS:
                    raise ValueError("%s: unknown variant %r" % (path, v))
            spec.variants = words
        elif key == "suppressions":
            spec.supps.append(os.path.join(PROGS, words[0]))
        elif key == "vg-suppressions":
            spec.vg_supps.append(os.path.join(PROGS, words[0]))
        elif key == "ht-stderr":
            spec.ht_stderr.append(rest)
        elif key == "absent":
            spec.absent.setdefault(int(words[0]), []).append(words[1])
        elif key == "frames":
            spec.frames.setdefault(int(words[0]), []).append(
                (words[1], int(words[2])))
        elif key == "args":
            spec.args = words
        elif key == "stdin":
            spec.stdin = rest.encode().decode("unicode_escape").encode()
        elif key == "lib":
            spec.libs.append((os.path.join(PROGS, words[0]), words[1]))
        elif key == "link":
            spec.link = words
        elif key == "usage-varies":
            spec.usage_varies = True
        elif key == "static":
            spec.static = spec.cli_only = True
        elif key == "cli-only":
            spec.cli_only = True
        elif key == "prof":
            spec.prof = spec.cli_only = True
        elif key == "site":
            pass
        else:
            raise ValueError("%s: unknown directive @%s" % (path, key))
    for src in spec.sources():
        with open(src) as f:
            for lineno, line in enumerate(f, 1):
                m = re.search(r"@site\s+(\S+)", line)
                if m:
                    spec.sites[m.group(1)] = (os.path.basename(src), lineno)
    return spec


# cli:same-as-bare's programs: each prints what its allocator calls
# returned, and "expect in use: BYTES bytes in BLOCKS blocks".
SAME_AS_BARE = ("new_handler", "alloc_edges")


def load_specs():
    paths = sorted(os.path.join(PROGS, f) for f in os.listdir(PROGS)
                   if f.endswith((".c", ".cc")))
    specs = [parse_spec(p) for p in paths]
    parts = {s for spec in specs for s in spec.sources()[1:]}
    return [s for s in specs if s.src not in parts]


# ---------------------------------------------------------------- frames

def base_name(function):
    """The qualified name without parameters or return type:
    "short* leaky::make_array_of<short>(unsigned long)" ->
    "leaky::make_array_of<short>"."""
    depth, cut = 0, len(function)
    for i, c in enumerate(function):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and i > 0:
            cut = i
            break
    name = function[:cut]
    depth, start = 0, 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0:
            start = i + 1
    return name[start:] if not name.startswith("operator") else name


def name_matches(want, function):
    return bool(function) and (function == want or
                               base_name(function) == want)


def is_alloc_frame(frame):
    fn = frame.get("function") or ""
    module = os.path.basename(frame.get("module") or "")
    if base_name(fn) in ALLOC_FUNCS or fn.startswith(("operator new",
                                                      "operator delete")):
        return True
    return module.startswith(ALLOC_MODULES)


def first_user_frame(stack):
    for frame in stack:
        if not is_alloc_frame(frame):
            return frame
    return None


def names(records, func):
    """The records whose stack has FUNC."""
    return [r for r in records
            if any(name_matches(func, f.get("function")) for f in r["stack"])]


def check_records(label, records, spec, depth, problems, which="all",
                  dtv_exact=True):
    """The @leak, @site, @absent and @frames checks, on records given as
    {"kind", "bytes", "blocks", "stack": [{"function", "file", "line",
    ...}]}.  which: "all", "plain" (skip the @leak checks that name a
    kind: the records have none yet) or "kinds" (only those).  Without
    dtv_exact (heaptrail's records), a @leak of a DTV function compares
    blocks only."""
    for func, want_bytes, want_blocks, kind in spec.leaks.get(depth, []):
        if (kind is None and which == "kinds") or \
                (kind is not None and which == "plain"):
            continue
        got_b = got_n = 0
        for r in names(records, func):
            if kind is None or r.get("kind") == kind:
                got_b += r["bytes"]
                got_n += r["blocks"]
        if not dtv_exact and func in DTV_FUNCS:
            got_b = want_bytes
        if (got_b, got_n) != (want_bytes, want_blocks):
            problems.append("%s: %srecords with %s hold %d bytes in %d "
                            "blocks, expected %d in %d" % (
                                label, kind + " " if kind else "", func,
                                got_b, got_n, want_bytes, want_blocks))
            continue
        if which == "kinds":
            continue
        if func not in spec.sites:
            continue
        want_file, want_line = spec.sites[func]
        firsts = [first_user_frame(r["stack"]) for r in records]
        firsts = [f for f in firsts if f and name_matches(func,
                                                          f.get("function"))]
        if not firsts:
            problems.append("%s: %s is never the first frame after the "
                            "allocator" % (label, func))
            continue
        good = [f for f in firsts
                if os.path.basename(f.get("file") or "") == want_file
                and f.get("line") == want_line]
        if not good:
            f = firsts[0]
            problems.append("%s: %s at %s:%s, expected %s:%d" % (
                label, func, f.get("file"), f.get("line"), want_file,
                want_line))
    if which == "kinds":
        return
    for func in spec.absent.get(depth, []):
        if names(records, func):
            problems.append("%s: %s must not be in use here" % (label, func))
    for func, count in spec.frames.get(depth, []):
        best = max([sum(1 for f in r["stack"]
                        if name_matches(func, f.get("function")))
                    for r in records] or [0])
        if best < count:
            problems.append("%s: deepest stack has %d frames of %s, expected"
                            " %d" % (label, best, func, count))


# ---------------------------------------------------------------- suite

class Suite:
    def __init__(self, args):
        self.build = os.path.abspath(args.build)
        self.e2e = os.path.join(self.build, "e2e")
        self.heaptrail = os.path.join(self.build, "heaptrail")
        self.verbose = args.verbose
        self.use_cache = not args.no_cache
        self.cc = os.environ.get("CC", "cc")
        self.cxx = os.environ.get("CXX", "c++")
        self.specs = {s.name: s for s in load_specs()}
        self.builds = Once()
        self.bares = Once()
        self.vgs = Once()
        self.ht_runs = Once()
        self.features = Once()
        self.tools = Once()
        self.syms = Once()

    # -- building

    def bin_dir(self, variant):
        return os.path.join(self.e2e, variant)

    def binary(self, spec, variant):
        return os.path.join(self.bin_dir(variant), spec.name)

    def compile(self, cmd, out, inputs):
        """Runs cmd unless out exists and was built by the same command
        from the same inputs."""
        stamp = out + ".stamp"
        headers = sorted(os.path.join(PROGS, f) for f in os.listdir(PROGS)
                         if f.endswith(".h"))
        key = sha256_files(inputs + headers, json.dumps(cmd))
        if os.path.exists(out) and os.path.exists(stamp):
            with open(stamp) as f:
                if f.read() == key:
                    return
        os.makedirs(os.path.dirname(out), exist_ok=True)
        rc, _, err = run(cmd, env=os.environ, timeout=300)
        if rc != 0:
            raise Failure("build failed: %s\n%s" % (" ".join(cmd),
                                                     short(err, 2000)))
        with open(stamp, "w") as f:
            f.write(key)

    def build_prog(self, spec, variant):
        def do():
            flags = ["-static", "-g", "-O1"] if variant == "static" \
                else VARIANTS[variant]
            out_dir = self.bin_dir(variant)
            for src, lib in spec.libs:
                self.compile([self.cc] + flags + ["-fPIC", "-shared", "-I",
                             PROGS, "-o", os.path.join(out_dir, lib), src],
                             os.path.join(out_dir, lib), [src])
            out = self.binary(spec, variant)
            cc = self.cxx if spec.cxx else self.cc
            self.compile([cc] + flags + ["-Wall", "-I", PROGS, "-o", out,
                                         spec.src] + spec.srcs +
                         ["-pthread"] + spec.link, out,
                         [spec.src] + spec.srcs)
            return out
        return self.builds.get((spec.name, variant), do)

    # -- running

    def command(self, spec, variant):
        return [self.binary(spec, variant)] + spec.args

    def bare(self, spec, variant):
        """The program run on its own: (status, stdout)."""
        def do():
            self.build_prog(spec, variant)
            rc, out, _ = run(self.command(spec, variant), spec.stdin,
                             cwd=self.bin_dir(variant))
            return rc, out
        return self.bares.get((spec.name, variant), do)

    def valgrind(self, spec, variant):
        """Memcheck's view: {"status", "stdout", "procs": [...]}, each proc
        {"pid", "ppid", "args", "in_use": [bytes, blocks], "records"}."""
        def do():
            binary = self.build_prog(spec, variant)
            libs = [os.path.join(self.bin_dir(variant), l)
                    for _, l in spec.libs]
            rc, version, _ = run(["valgrind", "--version"], env=os.environ)
            supps = ["--suppressions=" + f for f in spec.vg_supps]
            key = sha256_files([binary] + libs + spec.vg_supps, json.dumps(
                [VG_PARSER, VALGRIND, supps, spec.args, spec.stdin.decode(),
                 version.decode(), RUN_ENV.get("LC_ALL")]))
            cache = os.path.join(self.e2e, "vgcache", key + ".json")
            if self.use_cache and os.path.exists(cache):
                with open(cache) as f:
                    return json.load(f)
            logs = fresh_dir(os.path.join(self.e2e, "vg", variant,
                                          spec.name))
            cmd = VALGRIND + supps + \
                ["--log-file=" + os.path.join(logs, "vg.%p")] + \
                self.command(spec, variant)
            rc, out, _ = run(cmd, spec.stdin, cwd=self.bin_dir(variant),
                             timeout=VG_TIMEOUT)
            result = {"status": rc, "stdout": out.decode("utf-8", "replace"),
                      "procs": parse_vg_logs(logs)}
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            with open(cache + ".tmp", "w") as f:
                json.dump(result, f)
            os.rename(cache + ".tmp", cache)
            return result
        return self.vgs.get((spec.name, variant), do)

    def feature(self, name):
        """Whether heaptrail has a feature the tests of it need:
        "suppressions" (run --suppressions), "profiling_flags" (run
        --sample ...) or "leak_check" (the agent exports
        heaptrail_leak_check)."""
        def do():
            if name in ("suppressions", "profiling_flags"):
                rc, out, err = run([self.heaptrail, "run", "--help"],
                                   env=os.environ)
                return (b"--suppressions" if name == "suppressions" else
                        b"--sample") in out + err
            rc, out, err = run(["nm", "-D", "--defined-only",
                                os.path.join(self.build, "libheaptrail.so")],
                               env=os.environ)
            return rc == 0 and bool(re.search(rb"\sheaptrail_leak_check$",
                                              out, re.M))
        if not os.path.exists(self.heaptrail):
            raise Failure("%s not found (build it with make)" %
                          self.heaptrail)
        return self.features.get(name, do)

    def ht_main_run(self, spec, variant):
        """The heaptrail run that ht:, kinds: and delta: share, with the
        program's suppressions; Skip when heaptrail cannot take them."""
        if spec.supps and not self.feature("suppressions"):
            raise Skip("heaptrail run has no --suppressions yet")
        extra = []
        for f in spec.supps:
            extra += ["--suppressions", f]
        return self.ht_runs.get((spec.name, variant), lambda: (
            self.heaptrail_run(spec, variant, "", extra)))

    def heaptrail_run(self, spec, variant, tag, extra=()):
        """heaptrail run -o OUT --json OUT.json -- PROG; returns
        (status, stdout, stderr, outdir, json path)."""
        if not os.path.exists(self.heaptrail):
            raise Failure("%s not found (build it with make)" %
                          self.heaptrail)
        self.build_prog(spec, variant)
        work = fresh_dir(os.path.join(self.e2e, "ht", variant,
                                      spec.name + tag))
        outdir = os.path.join(work, "out")
        jpath = os.path.join(work, "out.json")
        cmd = [self.heaptrail, "run", "-o", outdir, "--json", jpath] + \
            list(extra) + ["--"] + self.command(spec, variant)
        rc, out, err = run(cmd, spec.stdin, cwd=self.bin_dir(variant))
        with open(os.path.join(work, "stderr"), "wb") as f:
            f.write(err)
        return rc, out, err, outdir, jpath

    # -- the tests

    def test_vg(self, spec, variant):
        problems, details = [], []
        bare_rc, bare_out = self.bare(spec, variant)
        vg = self.valgrind(spec, variant)
        if vg["status"] != bare_rc:
            problems.append("status %d under valgrind, %d bare" %
                            (vg["status"], bare_rc))
        if vg["stdout"].encode() != bare_out:
            problems.append("stdout differs under valgrind: " +
                            first_difference(vg["stdout"].encode(), bare_out))
        root = spec.procs.get(0, {})
        if root.get("exit") is not None and bare_rc != root["exit"]:
            problems.append("exits %d, expected %d" % (bare_rc, root["exit"]))
        procs = with_depth(vg["procs"])
        details.append("valgrind: " + ", ".join(
            "pid %d depth %d args %s: %d bytes in %d blocks" % (
                p["pid"], p["depth"], p["args"], p["in_use"][0],
                p["in_use"][1]) for p in procs))
        if len(procs) != len(spec.procs):
            problems.append("%d processes under valgrind, expected %d" %
                            (len(procs), len(spec.procs)))
        for depth, want in sorted(spec.procs.items()):
            match = [p for p in procs if p["depth"] == depth and
                     (want["args"] is None or p["args"] == want["args"])]
            if len(match) != 1:
                problems.append("depth %d: %d matching processes" %
                                (depth, len(match)))
                continue
            p = match[0]
            label = "depth %d" % depth
            if want["in_use"] and tuple(p["in_use"]) != want["in_use"]:
                problems.append("%s: in use %d bytes in %d blocks, expected"
                                " %d in %d" % ((label,) + tuple(p["in_use"])
                                               + want["in_use"]))
            details.append("%s: %s" % (label, show_kinds(p["kinds"])))
            if depth in spec.kinds:
                if p["kinds"] is None:
                    problems.append("%s: no LEAK SUMMARY" % label)
                else:
                    for kind in SUMMARY_KINDS:
                        got = tuple(p["kinds"].get(kind, (0, 0)))
                        exp = spec.kinds[depth].get(kind, (0, 0))
                        if got != exp:
                            problems.append(
                                "%s: %s %d bytes in %d blocks, expected %d"
                                " in %d" % ((label, kind) + got + exp))
            if depth in spec.heuristics and \
                    p["heuristics"] != {k: list(v) for k, v in
                                        spec.heuristics[depth].items()}:
                problems.append("%s: reachable via heuristic %s, expected "
                                "%s" % (label, p["heuristics"],
                                        spec.heuristics[depth]))
            check_records(label, p["records"], spec, depth, problems)
            if depth == 0:
                check_checks("valgrind", p["checks"], spec, problems)
        return problems, details

    def test_ht(self, spec, variant):
        problems, details = [], []
        bare_rc, bare_out = self.bare(spec, variant)
        vg = self.valgrind(spec, variant)
        rc, out, err, _, jpath = self.ht_main_run(spec, variant)
        details.append("heaptrail stderr:\n" + short(err, 4000))
        text = err.decode("utf-8", "replace").split("\n")
        for regex in spec.ht_stderr:
            if not any(re.search(regex, l, re.I) for l in text):
                problems.append("no line of heaptrail's report matches %r" %
                                regex)
        if rc != bare_rc:
            problems.append("status %d, bare run %d" % (rc, bare_rc))
        if out != bare_out:
            problems.append("stdout differs from the bare run: " +
                            first_difference(out, bare_out))
        ht_procs, pairs = match_procs(vg, load_json_objects(jpath),
                                      problems)
        matched_pids = {h["pid"] for _, h, _ in pairs}
        matched = [h for _, h, _ in pairs]
        for v, h, label in pairs:
            check_process(label, h["obj"], v, spec, problems)
            t = h["obj"].get("totals") or {}
            details.append("%s: allocs/frees/bytes allocated: heaptrail %s/"
                           "%s/%s, valgrind %s" % (label, t.get("allocs"),
                                                   t.get("frees"),
                                                   t.get("bytes_allocated"),
                                                   "/".join(map(str,
                                                       v["usage"] or []))))
        for h in ht_procs:
            if h["pid"] in matched_pids and not any(h is m for m in matched):
                # The image a process had before it exec'd: valgrind says
                # nothing about it (no exit), so there is nothing to check.
                details.append("pre-exec image pid %s %s" % (h["pid"],
                                                             h["args"]))
            elif h["pid"] not in matched_pids:
                problems.append("unexpected heaptrail process pid %s %s" %
                                (h["pid"], h["args"]))
        # The root process's exit is the program's exit.
        roots = [h for h in matched if h["depth"] == 0]
        # (a negative status: killed by that signal)
        want_exit = {"signal": -bare_rc} if bare_rc < 0 else {"status": bare_rc}
        for h in roots:
            if h["obj"].get("exit") != want_exit:
                problems.append("root exit %s, bare run status %d" %
                                (h["obj"].get("exit"), bare_rc))
        return problems, details

    def test_kinds(self, spec, variant):
        """Per process, heaptrail's four kinds (and suppressed) against
        valgrind's LEAK SUMMARY, and the @leak checks that name a kind."""
        problems, details = [], []
        vg = self.valgrind(spec, variant)
        _, _, _, _, jpath = self.ht_main_run(spec, variant)
        objs = load_json_objects(jpath)
        if not any(classified(o) for o in objs):
            raise Skip("no classification yet")
        _, pairs = match_procs(vg, objs, problems)
        for v, h, label in pairs:
            o = h["obj"]
            if not classified(o):
                problems.append("%s: not classified: summary %s" % (
                    label, sorted((o.get("summary") or {}).keys())))
                continue
            if v["kinds"] is None:
                problems.append("%s: valgrind printed no LEAK SUMMARY" %
                                label)
                continue
            got = ht_kinds(o)
            want = {k: list(v["kinds"].get(k, [0, 0]))
                    for k in SUMMARY_KINDS}
            details.append("%s: heaptrail %s" % (label, show_kinds(got)))
            details.append("%s: valgrind  %s" % (label, show_kinds(want)))
            ht_dtv = dtv_bytes(records_of(o))
            vg_dtv = dtv_bytes(v["records"])
            for kind in SUMMARY_KINDS:
                gb, gn = got[kind]
                wb, wn = want[kind]
                if gn != wn or gb - ht_dtv.get(kind, 0) != \
                        wb - vg_dtv.get(kind, 0):
                    dtv = ""
                    if ht_dtv.get(kind) or vg_dtv.get(kind):
                        dtv = " (DTV bytes not compared: heaptrail %d, " \
                              "valgrind %d)" % (ht_dtv.get(kind, 0),
                                                vg_dtv.get(kind, 0))
                    problems.append("%s: %s %d bytes in %d blocks, valgrind"
                                    " %d in %d%s" % (label, kind, gb, gn, wb,
                                                     wn, dtv))
            # The records hold the summary, kind by kind.
            rsum = {}
            for r in records_of(o):
                if r["kind"] not in KINDS:
                    problems.append("%s: a record of kind %r" %
                                    (label, r["kind"]))
                    continue
                b, n = rsum.get(r["kind"], (0, 0))
                rsum[r["kind"]] = (b + r["bytes"], n + r["blocks"])
            for kind in KINDS:
                if rsum.get(kind, (0, 0)) != tuple(got[kind]):
                    problems.append("%s: %s records add up to %d bytes in %d"
                                    " blocks, the summary says %d in %d" % (
                                        (label, kind) + rsum.get(kind, (0, 0))
                                        + tuple(got[kind])))
            check_records(label, records_of(o), spec, v["depth"], problems,
                          which="kinds", dtv_exact=False)
        return problems, details

    def test_delta(self, spec, variant):
        """The leak checks the program asked for while it ran: one file
        heaptrail.PID.check-N.leaks each, read with report --json."""
        if not self.feature("leak_check"):
            raise Skip("libheaptrail.so does not export heaptrail_leak_check"
                       " yet")
        problems, details = [], []
        vg_roots = [p for p in with_depth(self.valgrind(spec, variant)
                                          ["procs"]) if p["depth"] == 0]
        vg_checks = vg_roots[0]["checks"] if len(vg_roots) == 1 else []
        _, _, _, outdir, jpath = self.ht_main_run(spec, variant)
        roots = [o for o in with_depth([dict(o) for o in
                                        load_json_objects(jpath)])
                 if o["depth"] == 0]
        if len(roots) != 1:
            raise Failure("%d root processes in the JSON report" %
                          len(roots))
        pid = roots[0]["pid"]
        nchecks = max(n for n, _, _, _, _ in spec.checks)
        pattern = re.compile(r"^heaptrail\.%d\.check-(\d+)\.leaks$" % pid)
        found = sorted(int(m.group(1)) for m in
                       map(pattern.match, os.listdir(outdir)) if m)
        if found != list(range(1, nchecks + 1)):
            problems.append("check files %s in %s, expected 1 to %d" % (
                found, outdir, nchecks))
        checks = []
        for n in range(1, nchecks + 1):
            path = os.path.join(outdir, "heaptrail.%d.check-%d.leaks" %
                                (pid, n))
            if not os.path.exists(path):
                checks.append(None)
                continue
            rc, out, err = run([self.heaptrail, "report", "--json", path])
            if rc != 0:
                problems.append("report --json %s: status %d: %s" % (
                    os.path.basename(path), rc, short(err)))
                checks.append(None)
                continue
            try:
                objs = wrap(json.loads(out))
            except ValueError as e:
                raise Failure("report --json %s: not JSON: %s" % (path, e))
            if len(objs) != 1:
                problems.append("%s: %d processes" % (path, len(objs)))
            details.append("check %d: %s" % (n, short(out, 4000)))
            # The summary holds every block at the time of the check, as
            # valgrind's LEAK SUMMARY does, not only the records shown.
            if n <= len(vg_checks):
                got, want = ht_kinds(objs[0]), vg_checks[n - 1]["kinds"]
                for kind in SUMMARY_KINDS:
                    if tuple(got[kind]) != tuple(want.get(kind, (0, 0))):
                        problems.append("check %d: summary %s %d bytes in %d"
                                        " blocks, valgrind %d in %d" % (
                                            (n, kind) + tuple(got[kind]) +
                                            tuple(want.get(kind, (0, 0)))))
            recs = []
            for r in records_of(objs[0]):
                inc = record_increase(r)
                if inc is None:
                    problems.append("check %d: a %s record without its "
                                    "increase" % (n, r["kind"]))
                    inc = (0, 0)
                recs.append(dict(r, increase={"bytes": inc[0],
                                              "blocks": inc[1]}))
            checks.append({"records": recs})
        check_checks("heaptrail", checks, spec, problems)
        return problems, details

    def test_report(self, spec, want_func):
        problems, details = [], []
        rc, _, err, outdir, jpath = self.heaptrail_run(spec, "fp", ".report")
        if rc != self.bare(spec, "fp")[0]:
            problems.append("run: status %d" % rc)
        rc, out, err2 = run([self.heaptrail, "report", outdir])
        text = out.decode("utf-8", "replace")
        details.append("report:\n" + short(text, 4000))
        if rc != 0:
            problems.append("report: status %d: %s" % (rc, short(err2)))
        if "bytes in" not in text:
            problems.append("report: no 'bytes in' in the text")
        if want_func not in text:
            problems.append("report: %s not named" % want_func)
        rc, out, err2 = run([self.heaptrail, "report", "--json", outdir])
        if rc != 0:
            problems.append("report --json: status %d: %s" % (rc,
                                                              short(err2)))
        else:
            try:
                again = wrap(json.loads(out))
            except ValueError as e:
                raise Failure("report --json: not JSON: %s" % e)
            if again != load_json_objects(jpath):
                problems.append("report --json differs from run --json")
        return problems, details

    def test_cli(self, name):
        """The CLI's own behaviour: errors, passthrough, exit codes."""
        if not os.path.exists(self.heaptrail):
            raise Failure("%s not found (build it with make)" %
                          self.heaptrail)
        ht = self.heaptrail
        work = fresh_dir(os.path.join(self.e2e, "cli", name))
        out = os.path.join(work, "out")
        problems = []

        def one_line_error(rc, err, mention, what):
            lines = stderr_lines(err)
            if rc == 0:
                problems.append("%s: exit status 0" % what)
            if len(lines) != 1:
                problems.append("%s: %d stderr lines, expected 1: %r" %
                                (what, len(lines), short(err)))
            elif mention.lower() not in lines[0].lower():
                problems.append("%s: error does not mention %r: %r" %
                                (what, mention, lines[0]))

        def status(cmd, want, stdin=b"", want_out=None, cwd=work):
            rc, o, e = run(cmd, stdin, cwd=cwd)
            if rc != want:
                problems.append("%s: status %d, expected %d (%s)" % (
                    " ".join(os.path.basename(c) for c in cmd[1:]), rc,
                    want, short(e)))
            if want_out is not None and o != want_out:
                problems.append("%s: stdout %r, expected %r" % (
                    cmd[-1], short(o), short(want_out)))

        leak = self.specs["leak_one"]
        clean = self.specs["noleak_libc"]
        if name == "nonexistent":
            rc, o, e = run([ht, "run", "-o", out, "--", "/nonexistent"],
                           cwd=work)
            one_line_error(rc, e, "/nonexistent", "run -- /nonexistent")
        elif name == "passthrough":
            # No -o: the default output directory goes in the cwd.
            status([ht, "run", "--", "/bin/true"], 0, want_out=b"")
            status([ht, "run", "-o", out + "1", "--", "/bin/false"], 1)
            status([ht, "run", "-o", out + "2", "--", "/bin/sh", "-c",
                    "read x; echo got $x; exit 5"], 5, b"hello\n",
                   b"got hello\n")
        elif name == "forbidden-outdir":
            prog = self.build_prog(leak, "fp")
            rc, o, e = run([ht, "run", "-o", "/proc/forbidden", "--", prog],
                           cwd=work)
            one_line_error(rc, e, "/proc/forbidden", "run -o /proc/forbidden")
            if b"leaked one block" in o:
                problems.append("the program ran although the output "
                                "directory cannot be made")
        elif name == "error-exitcode":
            status([ht, "run", "-o", out + "1", "--error-exitcode=42", "--",
                    self.build_prog(leak, "fp")], 42)
            status([ht, "run", "-o", out + "2", "--error-exitcode=42", "--",
                    self.build_prog(self.specs["exit_status"], "fp")], 42)
            status([ht, "run", "-o", out + "3", "--error-exitcode=42", "--",
                    self.build_prog(clean, "fp")], 0)
            status([ht, "run", "-o", out + "4", "--error-exitcode=42", "--",
                    self.build_prog(clean, "fp"), "5"], 5)
        elif name == "static":
            prog = self.build_prog(self.specs["static_leak"], "static")
            rc, o, e = run([ht, "run", "-o", out, "--", prog], cwd=work)
            one_line_error(rc, e, "static", "run -- static binary")
            if b"static program ran" in o:
                problems.append("the static program ran untracked")
        elif name == "signal-status":
            sig = self.specs["signal_exit"]
            bare_rc, bare_out = self.bare(sig, "fp")
            if bare_rc != -15:
                problems.append("bare run: status %d, expected SIGTERM" %
                                bare_rc)
            rc, o, e = run([ht, "run", "-o", out, "--",
                            self.binary(sig, "fp")], cwd=work)
            if rc != bare_rc:
                problems.append("status %d, bare run %d (a wrapper must die "
                                "of the same signal)" % (rc, bare_rc))
            if o != bare_out:
                problems.append("stdout differs from the bare run: " +
                                first_difference(o, bare_out))
            # Killed by a fault, with the default disposition: the agent
            # writes the report first, and the file says how it ended.
            segv = self.build_prog(self.specs["killed_segv"], "fp")
            rc, o, e = run([ht, "run", "-o", out + "2", "--", segv], cwd=work)
            if rc != -11:
                problems.append("killed_segv: status %d, expected SIGSEGV" % rc)
            rc, o, e = run([ht, "report", out + "2"], cwd=work)
            if rc != 0 or b"killed by signal 11" not in o + e:
                problems.append("report of killed_segv: status %d, no "
                                "'killed by signal 11': %r" % (rc, short(o + e)))
        elif name == "no-follow-children":
            # A forked child reports by default, and not with the option.
            prog = self.build_prog(self.specs["fork_leak"], "fp")
            for opt, want in (([], 2), (["--no-follow-children"], 1)):
                jpath = os.path.join(work, "follow%d.json" % len(opt))
                rc, o, e = run([ht, "run", "-o", out + str(len(opt)), "--json",
                                jpath] + opt + ["--", prog], cwd=work)
                got = len(load_json_objects(jpath)) if os.path.exists(jpath) \
                    else 0
                if got != want:
                    problems.append("%s: %d process reports, expected %d" % (
                        " ".join(opt) or "default", got, want))
        elif name == "same-as-bare":
            # Allocator edge cases (failures, errno, odd alignments, the
            # new_handler): the program prints what each call returned,
            # which must not change under heaptrail, exact or sampling;
            # its "expect in use" line, from what it kept, is what the
            # exact report must count.
            for pname in SAME_AS_BARE:
                spec = self.specs[pname]
                bare_rc, bare_out = self.bare(spec, "fp")
                m = re.search(rb"expect in use: (\d+) bytes in (\d+) blocks",
                              bare_out)
                if not m:
                    problems.append("%s: no 'expect in use' line" % pname)
                    continue
                want = (int(m.group(1)), int(m.group(2)))
                for opts in ([], ["--sample", "4096"]):
                    tag = "%s %s" % (pname, " ".join(opts) or "exact")
                    jpath = os.path.join(work, "%s%d.json" % (pname, len(opts)))
                    rc, o, e = run([ht, "run", "-o", os.path.join(
                        work, "%s%d" % (pname, len(opts))), "--json", jpath]
                        + opts + ["--", self.binary(spec, "fp")], cwd=work)
                    if rc != bare_rc:
                        problems.append("%s: status %d, bare %d (%s)" % (
                            tag, rc, bare_rc, short(e)))
                    if o != bare_out:
                        problems.append("%s: stdout differs from the bare "
                                        "run: %s" % (tag, first_difference(
                                            o, bare_out)))
                    if opts:
                        continue
                    objs = load_json_objects(jpath) \
                        if os.path.exists(jpath) else []
                    t = objs[0].get("totals", {}) if objs else {}
                    got = (t.get("in_use_bytes"), t.get("in_use_blocks"))
                    if got != want:
                        problems.append("%s: in use %s bytes in %s blocks, "
                                        "the program kept %d in %d" % (
                                            (tag,) + got + want))
        elif name == "fault-signal":
            # A fault or an uncatchable signal is refused as a dump, check
            # or stop signal, by the CLI and by the agent; the program
            # dies of its fault as bare, instead of dumping in a loop.
            spec = self.specs["fault_segv"]
            bare_rc, bare_out = self.bare(spec, "fp")
            if bare_rc != -11:
                problems.append("bare run: status %d, expected SIGSEGV" %
                                bare_rc)
            rc, o, e = run([ht, "run", "-o", out, "--signal", "11", "--",
                            self.binary(spec, "fp")], cwd=work)
            one_line_error(rc, e, "signal", "run --signal 11")
            for opt in ("signal=11", "signal=SIGSEGV", "stop_signal:SIGBUS",
                        "leak_check_signal=11"):
                env = dict(os.environ, LD_PRELOAD=self.agent(),
                           HEAPTRAIL_OUTPUT=work,
                           HEAPTRAIL_OPTIONS="sample=1," + opt)
                try:
                    r = subprocess.run([self.binary(spec, "fp")], env=env,
                                       cwd=work, capture_output=True,
                                       timeout=20)
                    rc, o, e = r.returncode, r.stdout, r.stderr
                except subprocess.TimeoutExpired:
                    problems.append("%s: still running after 20 s" % opt)
                    continue
                if rc != bare_rc or o != bare_out:
                    problems.append("%s: status %d, bare %d" % (
                        opt, rc, bare_rc))
                if b"ignoring option '%s'" % opt.encode() not in e:
                    problems.append("%s: not refused on stderr: %s" % (
                        opt, short(e)))
        elif name == "cancel-in-dump":
            # a pthread_cancel pending while the agent dumps on that
            # thread acts after the dump, not inside it
            spec = self.specs["cancel_in_dump"]
            rc, o, e = run([ht, "run", "-o", out, "--signal", "USR1",
                            "--final", "--", self.build_prog(spec, "fp")],
                           cwd=work)
            if rc != 0 or o != b"thread cancelled\ndone\n":
                problems.append("status %d, stdout %r" % (rc, short(o)))
            names = os.listdir(out) if os.path.isdir(out) else []
            sig = [n for n in names if n.endswith(".signal.heap")]
            final = [n for n in names if n.endswith(".final.heap")]
            if len(sig) != 2 or len(final) != 1:
                problems.append("%d signal dumps and %d final, expected 2 "
                                "and 1: %s" % (len(sig), len(final),
                                               sorted(names)))
        elif name == "other-allocator":
            problems += self.other_allocator(work)
        elif name == "leaks-pid":
            problems += self.leaks_pid(work, out)
        elif name == "stop-transparent":
            # Leak checks stop the other threads while they sleep, poll,
            # read, wait on a futex...: each call must return what it
            # returns bare, neither early nor late; with ptrace (the
            # default), with the signal fallback, and under strace -f
            # (ptrace taken: the fallback again).
            spec = self.specs["stop_blocking_calls"]
            prog = self.build_prog(spec, "fp")
            bare_rc, bare_out = self.bare(spec, "fp")
            want = sorted(bare_out.decode().split("\n"))
            if bare_rc != 0:
                problems.append("bare run: status %d, output %r" %
                                (bare_rc, short(bare_out)))
            runs = [("ptrace", [], {}),
                    ("signal", [], {"HEAPTRAIL_OPTIONS": "stop_ptrace=0"})]
            # (strace comes with scripts/install-deps --test: its absence
            # is a failure, not a quiet skip)
            if not shutil.which("strace"):
                problems.append("strace is not installed "
                                "(scripts/install-deps --test)")
            else:
                runs.append(("strace", ["strace", "-f", "-o", os.devnull],
                             {}))
            # The fallback's signal can still hit a thread in the instant
            # it wakes from its call (rare): up to three tries there.
            for i, (what, wrap_cmd, extra) in enumerate(runs):
                env = dict(RUN_ENV, **extra)
                for attempt in range(1 if what == "ptrace" else 3):
                    rc, o, e = run(wrap_cmd + [ht, "run", "-o", "%s%d-%d" % (
                        out, i, attempt), "--", prog], cwd=work, env=env)
                    got = sorted(o.decode().split("\n"))
                    if rc == bare_rc and got == want:
                        break
                if rc != bare_rc or got != want:
                    problems.append("%s: status %d, stdout %r; bare: %d, %r "
                                    "(%s)" % (what, rc, short(o), bare_rc,
                                              short(bare_out), e.decode(errors="replace")[-600:]))
                if what == "ptrace" and b"blocks the stop signal" in e:
                    problems.append("ptrace: a thread was not stopped: %s" %
                                    short(e, 400))
            # Threads still allocating at exit: "in use at exit" is what
            # the summary's kinds add up to (one snapshot for both).
            bprog = self.build_prog(self.specs["stop_busy_exit"], "fp")
            for i, opts in enumerate(("", "leak_kinds=0")):
                jpath = os.path.join(work, "busy%d.json" % i)
                env = dict(RUN_ENV, HEAPTRAIL_OPTIONS=opts)
                rc, o, e = run([ht, "run", "-o", "%sb%d" % (out, i), "--json",
                                jpath, "--", bprog], cwd=work, env=env)
                objs = load_json_objects(jpath) if os.path.exists(jpath) \
                    else []
                if rc != 0 or len(objs) != 1:
                    problems.append("busy exit (%s): status %d, %d reports" %
                                    (opts or "classified", rc, len(objs)))
                    continue
                tot = objs[0]["totals"]
                summ = objs[0]["summary"]
                kinds = [k for k in summ if k != "suppressed"]
                got = [sum(summ[k]["bytes"] for k in kinds) +
                       summ["suppressed"]["bytes"],
                       sum(summ[k]["blocks"] for k in kinds) +
                       summ["suppressed"]["blocks"]]
                if got != [tot["in_use_bytes"], tot["in_use_blocks"]]:
                    problems.append("busy exit (%s): in use at exit %d/%d, "
                                    "the summary adds up to %d/%d" % (
                                        opts or "classified",
                                        tot["in_use_bytes"],
                                        tot["in_use_blocks"], got[0], got[1]))
            # Children forked while a thread walks the loaded objects exit
            # (none blocks on the walk's lock) and each writes its report.
            fspec = self.specs["stop_fork_threads"]
            fprog = self.build_prog(fspec, "fp")
            bare_rc, bare_out = self.bare(fspec, "fp")
            jpath = os.path.join(work, "fork.json")
            rc, o, e = run([ht, "run", "-o", out + "f", "--json", jpath, "--",
                            fprog], cwd=work)
            nrep = len(load_json_objects(jpath)) if os.path.exists(jpath) \
                else 0
            if bare_out != b"30 of 30 children exited\n" or o != bare_out \
                    or rc != bare_rc or nrep != 31:
                problems.append("fork from threads: status %d, stdout %r, %d "
                                "reports; bare: %d, %r; 31 reports expected"
                                % (rc, short(o), nrep, bare_rc,
                                   short(bare_out)))
            # The process ends in the middle of a stop: nothing lingers.
            eprog = self.build_prog(self.specs["stop_exit_two"], "fp")
            for i in range(6):
                rc, o, e = run([ht, "run", "-o", "%se%d" % (out, i), "--",
                                eprog], cwd=work, timeout=20)
                if rc != 6:
                    problems.append("two threads exit: status %d, expected "
                                    "6 (%s)" % (rc, short(e, 300)))
                    break
            # A zombie main thread (pthread_exit) is skipped, in both ways.
            zprog = self.build_prog(self.specs["stop_main_exited"], "fp")
            for i, opts in enumerate(("", "stop_ptrace=0")):
                env = dict(RUN_ENV, HEAPTRAIL_OPTIONS=opts)
                rc, o, e = run([ht, "run", "-o", "%sz%d" % (out, i), "--",
                                zprog], cwd=work, env=env)
                if rc != 0 or o != b"check 0\n" or b"blocks the stop" in e:
                    problems.append("main thread exited (%s): status %d, "
                                    "stdout %r, stderr %s" % (
                                        opts or "ptrace", rc, short(o),
                                        short(e, 300)))
        elif name == "gen-suppressions":
            # The suppression heaptrail prints, fed back, hides the leak.
            prog = self.build_prog(leak, "fp")
            rc, o, e = run([ht, "run", "-o", out + "1", "--gen-suppressions",
                            "--", prog], cwd=work)
            supp = [l.split("suppression:", 1)[1].strip()
                    for l in e.decode("utf-8", "replace").split("\n")
                    if "suppression: leak:" in l]
            if not supp:
                problems.append("--gen-suppressions printed no suppression")
            else:
                spath = os.path.join(work, "gen.supp")
                with open(spath, "w") as f:
                    f.write("\n".join(supp) + "\n")
                jpath = os.path.join(work, "gen.json")
                run([ht, "run", "-o", out + "2", "--suppressions", spath,
                     "--json", jpath, "--", prog], cwd=work)
                obj = load_json_objects(jpath)[0]
                kinds = ht_kinds(obj)
                if kinds["definitely_lost"] != [0, 0] or \
                        kinds["suppressed"][1] == 0:
                    problems.append("with the generated suppressions: %s" %
                                    show_kinds(kinds))
        elif name == "agent-files":
            problems += self.agent_files(work, out)
        elif name == "timeline-step":
            # After 300 idle ms, the row for just before the second 4 MiB
            # block (the unchanged figures, a millisecond before) comes
            # first, then the row with it: a step, not a slope.
            prog = self.build_prog(self.specs["timeline_step"], "fp")
            rc, o, e = run([ht, "run", "-q", "--sample", "1", "--timeline",
                            "10", "-o", out, "--", prog], cwd=work)
            tl = [f for f in os.listdir(out) if f.endswith(".timeline")] \
                if os.path.isdir(out) else []
            rows = []
            if rc != 0 or len(tl) != 1:
                problems.append("status %d, timelines %r: %s" % (
                    rc, tl, short(e)))
            else:
                with open(os.path.join(out, tl[0])) as f:
                    rows = [[int(x) for x in l.split()] for l in f
                            if not l.startswith("#")]
            step = [i for i in range(1, len(rows) - 1)
                    if rows[i][0] - rows[i - 1][0] >= 250]
            if rows and len(step) != 1:
                problems.append("no single idle gap of 250 ms or more "
                                "in the rows %r" % rows[:12])
            elif rows:
                i = step[0]
                before, prev, after = rows[i], rows[i - 1], rows[i + 1]
                if before[1:3] != prev[1:3] or after[0] != before[0] + 1 \
                        or after[1] - before[1] != 4 << 20 \
                        or after[2] - before[2] != 1:
                    problems.append("rows around the idle gap: %r %r %r" %
                                    (prev, before, after))
        elif name == "threads-seen":
            # The time triggers run on the program's own allocating
            # thread: under --every and --timeline it sees the threads it
            # sees bare (a ticker thread of the agent's made it one more).
            prog = self.build_prog(self.specs["threads_seen"], "fp")
            _, bare_out, _ = run([prog], cwd=work)
            for sample in ("512k", "1"):
                d = "%s-%s" % (out, sample)
                rc, o, e = run([ht, "run", "-q", "--sample", sample,
                                "--every", "100ms", "--timeline", "10",
                                "-o", d, "--", prog], cwd=work)
                if rc != 0 or o != bare_out or bare_out != b"threads 1\n":
                    problems.append("sample %s: status %d, stdout %r, bare "
                                    "%r" % (sample, rc, short(o),
                                            short(bare_out)))
                files = os.listdir(d) if os.path.isdir(d) else []
                every = [f for f in files if f.endswith(".every.heap")]
                tl = [f for f in files if f.endswith(".timeline")]
                rows = []
                if len(tl) == 1:
                    with open(os.path.join(d, tl[0])) as f:
                        rows = [l for l in f if not l.startswith("#")]
                # 300 ms of events: about 3 `every` dumps, 30 rows
                if not every or len(rows) < 5:
                    problems.append("sample %s: %d every dumps, %d timeline "
                                    "rows (timelines %r)" % (
                                        sample, len(every), len(rows), tl))
        elif name == "report-lost":
            # The exit report cannot be written: the agent says why and,
            # with --error-exitcode, the run fails (it used to pass).
            prog = self.build_prog(self.specs["report_lost"], "fp")
            modes = ["rlimit3", "rmdir"]
            if os.geteuid() == 0:
                modes += ["setuid", "chroot"]
            for mode in modes:
                d = out + "-" + mode
                rc, o, e = run([ht, "run", "-q", "-o", d, "--error-exitcode=42",
                                "--", prog, mode], cwd=work)
                if o != ("done %s\n" % mode).encode():
                    problems.append("%s: stdout %r" % (mode, short(o)))
                if rc != 42:
                    problems.append("%s: status %d, expected 42 (no report "
                                    "was written)" % (mode, rc))
                if b"cannot write the leak report" not in e:
                    problems.append("%s: the agent did not say the report "
                                    "was lost: %r" % (mode, short(e)))
            # A soft limit of 3 under a higher hard one: the agent borrows
            # descriptors up to the hard limit and the report is written.
            rc, o, e = run([ht, "run", "-q", "-o", out + "-soft3",
                            "--error-exitcode=42", "--", prog, "soft3"],
                           cwd=work)
            if rc != 42 or b"definitely lost: 100 bytes in 1 block" not in e:
                problems.append("soft3: status %d, expected 42 with the leak "
                                "reported: %r" % (rc, short(e, 400)))
        elif name in HOST_TESTS:
            problems += getattr(self, "host_" + name.replace("-", "_"))(
                work, out, one_line_error)
        elif name == "usage-errors":
            for cmd in ([ht, "run"], [ht, "no-such-command"],
                        [ht, "report", os.path.join(work, "missing")]):
                rc, o, e = run(cmd, cwd=work)
                if rc == 0 or not stderr_lines(e):
                    problems.append("%s: status %d, stderr %r" % (
                        " ".join(cmd[1:]), rc, short(e)))
            rc, o, e = run([ht, "report", os.path.join(work, "missing")],
                           cwd=work)
            one_line_error(rc, e, "missing", "report of a missing directory")
        return problems, []

    def agent_files(self, work, out):
        """Names planted by whoever can write to the output directory, and
        descriptors the program closes and reuses, cannot make the agent
        write into anything but its own new files, and those are 0600."""
        prog = self.build_prog(self.specs["hostile_files"], "fp")
        ht = self.heaptrail
        problems = []
        d = out + "-plant"
        os.makedirs(d)
        env = dict(RUN_ENV, HEAPTRAIL_OPTIONS="run=t3st_Run-1")
        rc, o, e = run([ht, "run", "-q", "--final", "-o", d, "--", prog,
                        "plant", d], cwd=work, env=env)
        if rc != 0 or o != b"planted 6\n":
            problems.append("plant: status %d, stdout %r, stderr %r" % (
                rc, short(o), short(e)))
        for n in range(6):
            with open(os.path.join(d, "victim-%d" % n)) as f:
                got = f.read()
            if got != "victim\n":
                problems.append("victim-%d was written through a planted "
                                "symlink: %r" % (n, short(got.encode())))
        made = [f for f in os.listdir(d) if f.startswith("heaptrail.")
                and not os.path.islink(os.path.join(d, f))]
        leaks = [f for f in os.listdir(d) if f.endswith(".leaks")]
        if len(leaks) != 1 or not os.path.isfile(os.path.join(d, leaks[0])) \
                or os.path.islink(os.path.join(d, leaks[0])):
            problems.append("no regular report file among %r" % leaks)
        for f in made:
            mode = os.stat(os.path.join(d, f)).st_mode & 0o777
            if mode != 0o600:
                problems.append("%s has mode %o, expected 600" % (f, mode))
        if not any(f.endswith(".heap") for f in made):
            problems.append("no final heap dump among %r" % made)
        # Each file names the run it belongs to (the agent's run option).
        for f in made:
            with open(os.path.join(d, f), errors="replace") as fh:
                text = fh.read()
            if f.endswith(".leaks") and "\nrun t3st_Run-1\n" not in text:
                problems.append("%s has no line 'run t3st_Run-1'" % f)
            if f.endswith(".heap") and " run=t3st_Run-1\n" not in text:
                problems.append("%s has no 'run=t3st_Run-1' in its "
                                "heaptrail-dump line" % f)
        left = [f for f in os.listdir(d) if "tmp" in f and
                not os.path.islink(os.path.join(d, f))]
        if left:
            problems.append("temporary files left behind: %r" % left)
        # The program closes every descriptor and reuses the lowest for its
        # own file while the timeline ticks every 10 ms.
        bare_dir = os.path.join(work, "bare")
        os.makedirs(bare_dir)
        _, bare_out, _ = run([prog, "fds", bare_dir], cwd=work)
        d = out + "-fds"
        os.makedirs(d)
        rc, o, e = run([ht, "run", "-q", "--timeline", "10", "-o", d, "--",
                        prog, "fds", d], cwd=work)
        if o != bare_out or rc != 0:
            problems.append("fds: status %d, stdout %r, bare %r" % (
                rc, short(o), short(bare_out)))
        tl = [f for f in os.listdir(d) if f.endswith(".timeline")]
        if len(tl) != 1:
            problems.append("fds: timelines %r" % tl)
        else:
            path = os.path.join(d, tl[0])
            if os.stat(path).st_mode & 0o777 != 0o600:
                problems.append("%s is not mode 600" % tl[0])
            with open(path) as f:
                rows = [l for l in f if not l.startswith("#")]
            if len(rows) < 5:
                problems.append("fds: %d timeline rows over 300 ms at 10 ms "
                                "(rows must go on after close_range)" %
                                len(rows))
        return problems

    def other_allocator(self, work):
        """Debian's jemalloc and tcmalloc preloaded too. `heaptrail run`
        puts the agent first: the program prints what it does bare with
        that allocator, and alloc_apis' leaks (checked against valgrind by
        its vg: test) are all found. With the other allocator first the
        agent sees nothing, and must say so once on stderr and in the
        report."""
        problems = []
        found = False
        spec = self.specs["alloc_apis"]
        prog = self.build_prog(spec, "fp")
        for lib in ("libjemalloc.so.2", "libtcmalloc_minimal.so.4"):
            path = os.path.join("/usr/lib/x86_64-linux-gnu", lib)
            if not os.path.exists(path):
                continue
            found = True
            env = dict(os.environ, LD_PRELOAD=path)
            r = subprocess.run([prog], env=env, cwd=work, capture_output=True,
                               timeout=60)
            out = os.path.join(work, lib)
            jpath = out + ".json"
            h = subprocess.run([self.heaptrail, "run", "-o", out, "--json",
                                jpath, "--", prog], env=env, cwd=work,
                               capture_output=True, timeout=120)
            if (h.returncode, h.stdout) != (r.returncode, r.stdout):
                problems.append("%s: status %d and stdout differ from the bare "
                                "run's (%d)" % (lib, h.returncode, r.returncode))
            objs = load_json_objects(jpath) if os.path.exists(jpath) else []
            if len(objs) != 1:
                problems.append("%s: %d reports" % (lib, len(objs)))
                continue
            for func, b, n, _ in spec.leaks.get(0, []):
                got = [0, 0]
                for rec in records_of(objs[0]):
                    if any(f.get("function") == func for f in rec["stack"]):
                        got[0] += rec["bytes"]
                        got[1] += rec["blocks"]
                if got != [b, n]:
                    problems.append("%s first: %s holds %d/%d, expected %d/%d"
                                    % (lib, func, got[0], got[1], b, n))
            if b"not heaptrail's" in h.stderr:
                problems.append("%s first: a warning about another allocator"
                                % lib)
            # the other allocator first, as a user might preload them
            out2 = out + "-first"
            os.makedirs(out2, exist_ok=True)
            env2 = dict(os.environ, LD_PRELOAD=path + ":" + self.agent(),
                        HEAPTRAIL_OUTPUT=out2, HEAPTRAIL_OPTIONS="sample=1")
            r2 = subprocess.run([prog], env=env2, cwd=work,
                                capture_output=True, timeout=60)
            if r2.stdout != r.stdout:
                problems.append("%s before the agent: stdout differs" % lib)
            warned = r2.stderr.count(b"not heaptrail's but that of " +
                                     path.encode())
            if warned != 1:
                problems.append("%s before the agent: warned %d times on "
                                "stderr, expected once: %s" % (
                                    lib, warned, short(r2.stderr)))
            rc, o, e = run([self.heaptrail, "report", "--json", out2], cwd=work)
            objs = [wrap(json.loads(o))[0]] if rc == 0 and o.strip() else []
            if not objs or objs[0].get("allocator_bypassed") != path:
                problems.append("%s before the agent: the report does not "
                                "name it as allocator_bypassed" % lib)
            rc, o, e = run([self.heaptrail, "report", out2], cwd=work)
            if b"warning: the program's malloc was that of" not in o + e:
                problems.append("%s before the agent: no warning in the text "
                                "report" % lib)
        if not found:
            raise Skip("neither libjemalloc2 nor libtcmalloc-minimal4 is "
                       "installed")
        return problems

    # -- the CLI never hurts the host (issue 11); each one_line_error
    # -- check means: non-zero status, exactly one stderr line naming it

    def host_start(self, args, work, env=None, opts=None):
        """Starts `heaptrail run ... host_signals ARGS`; returns the Popen
        and the program's pid once it printed "ready"."""
        prog = self.build_prog(self.specs["host_signals"], "fp")
        e = dict(RUN_ENV)
        if opts is not None:
            e["HEAPTRAIL_OPTIONS"] = opts
        self.host_starts = getattr(self, "host_starts", 0) + 1
        p = subprocess.Popen([self.heaptrail, "run", "-q", "-o",
                              os.path.join(work, "out-%s-%d" % (
                                  args[0], self.host_starts)), "--",
                              prog] + args, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=work, env=e)
        line = p.stdout.readline()
        if line != b"ready\n":
            p.kill()
            raise Failure("host_signals %s did not start: %r" % (args, line))
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            kids = f.read().split()
        return p, int(kids[0])

    def host_forward_signals(self, work, out, one_line_error):
        """SIGTERM sent to heaptrail run (by timeout, kill, a service
        manager) reaches the program, and heaptrail exits as it did."""
        problems = []
        p, child = self.host_start(["term"], work)
        try:
            os.kill(p.pid, signal.SIGTERM)
            o, e = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
            try:
                os.kill(child, signal.SIGKILL)
                problems.append("the program was still running after "
                                "heaptrail run ended")
            except ProcessLookupError:
                pass
        if p.returncode != 3:
            problems.append("status %d, expected 3 (the program's, after its "
                            "SIGTERM handler)" % p.returncode)
        if o.count(b"got SIGTERM\n") != 1:
            problems.append("stdout %r, expected 'got SIGTERM' once" % o)
        return problems

    def host_run_bad_values(self, work, out, one_line_error):
        """Bad profiling values stop heaptrail run before the program
        starts, with one line naming the option."""
        problems = []
        marker = os.path.join(work, "ran")
        for opt, val in (("--sample", "banana"), ("--sample", "0"),
                         ("--interval", "12q"), ("--every", "soon"),
                         ("--signal", "11"), ("--signal", "NOSUCHSIG"),
                         ("--timeline", "-5"), ("--timeline", "9999999")):
            rc, o, e = run([self.heaptrail, "run", "-o", out + opt + val, opt,
                            val, "--", "/bin/sh", "-c", "touch " + marker],
                           cwd=work)
            one_line_error(rc, e, opt, "run %s %s" % (opt, val))
            if os.path.exists(marker):
                problems.append("run %s %s started the program" % (opt, val))
                os.unlink(marker)
        for opt, val in (("--sample", "512k"), ("--every", "500ms"),
                         ("--signal", "USR2"), ("--timeline", "0")):
            rc, o, e = run([self.heaptrail, "run", "-q", "-o", out + opt + val,
                            opt, val, "--", "/bin/true"], cwd=work)
            if rc != 0 or b"ignoring" in e:
                problems.append("run %s %s: status %d: %s" % (opt, val, rc,
                                                            short(e)))
        return problems

    def host_outdir_owned(self, work, out, one_line_error):
        """A run directory belongs to one run: -o DIR with an earlier run's
        files is refused; the default directory is made fresh, 0700, and
        one that already exists (or a symlink) is refused."""
        problems = []
        rc, o, e = run([self.heaptrail, "run", "-q", "-o", out, "--",
                        "/bin/true"], cwd=work)
        if rc != 0:
            return ["first run: status %d: %s" % (rc, short(e))]
        rc, o, e = run([self.heaptrail, "run", "-q", "-o", out, "--",
                        "/bin/sh", "-c", "echo ran"], cwd=work)
        one_line_error(rc, e, "another run", "run -o DIR of an earlier run")
        if o:
            problems.append("the program ran into an earlier run's directory")
        # the default directory, named after the pid: plant a symlink at
        # every name the next pids would get, then run
        victim = os.path.join(work, "victim")
        os.mkdir(victim)
        with open("/proc/sys/kernel/ns_last_pid") as f:
            last = int(f.read())
        planted = set()
        for pid in range(last + 1, last + 3000):
            name = os.path.join(work, "heaptrail-true-%d" % pid)
            os.symlink(victim, name)
            planted.add(pid)
        rc, o, e = run([self.heaptrail, "run", "--", "/bin/true"], cwd=work)
        if os.listdir(victim):
            problems.append("heaptrail wrote into a planted symlink: %s" %
                            os.listdir(victim))
        lines = stderr_lines(e)
        if rc == 0:
            made = [d for d in os.listdir(work) if d.startswith(
                "heaptrail-true-") and not os.path.islink(os.path.join(work, d))]
            if not made:
                problems.append("status 0 and no fresh directory")
            for d in made:
                mode = os.stat(os.path.join(work, d)).st_mode & 0o777
                if mode != 0o700:
                    problems.append("%s has mode %o, expected 700" % (d, mode))
        else:
            one_line_error(rc, e, "already exists", "run with a planted "
                           "default directory")
        # and without a planted one, the fresh directory is 0700
        fresh = os.path.join(work, "fresh")
        os.mkdir(fresh)
        rc, o, e = run([self.heaptrail, "run", "-q", "--", "/bin/true"],
                       cwd=fresh)
        made = os.listdir(fresh)
        if rc != 0 or len(made) != 1:
            problems.append("default directory: status %d, made %s" % (rc,
                                                                      made))
        else:
            mode = os.stat(os.path.join(fresh, made[0])).st_mode & 0o777
            if mode != 0o700:
                problems.append("%s has mode %o, expected 700" % (made[0], mode))
        return problems

    def host_bad_leak_file(self, work, out, one_line_error):
        """A garbage .leaks file in the directory is named on one line; the
        program's own report is still printed, and --error-exitcode fails
        the run (a report it cannot read is one nobody checked)."""
        problems = []
        prog = self.build_prog(self.specs["host_signals"], "fp")
        for opts, want in (([], 0), (["--error-exitcode=9"], 9)):
            d = out + str(len(opts))
            rc, o, e = run([self.heaptrail, "run", "-o", d] + opts +
                           ["--", prog, "garbage"], cwd=work)
            if rc != want:
                problems.append("%s: status %d, expected %d" % (
                    " ".join(opts) or "no option", rc, want))
            bad = [l for l in stderr_lines(e) if "heaptrail.1.leaks" in l]
            if len(bad) != 1:
                problems.append("%d lines name the garbage file, expected 1: %r"
                                % (len(bad), short(e, 400)))
            if b"leak_a_block" not in e or b"40 bytes" not in e:
                problems.append("the program's own leak is not reported: %r"
                                % short(e, 400))
        rc, o, e = run([self.heaptrail, "report", out + "0"], cwd=work)
        if rc == 0 or b"leak_a_block" not in o or \
                len([l for l in stderr_lines(e) if "heaptrail.1" in l]) != 1:
            problems.append("report DIR: status %d, stdout %r, stderr %r" % (
                rc, short(o), short(e)))
        return problems

    def host_missing_report(self, work, out, one_line_error):
        """--error-exitcode: a process that left no report fails the run."""
        problems = []
        rc, o, e = run([self.heaptrail, "run", "-q", "-o", out,
                        "--error-exitcode=9", "--", "/bin/sh", "-c",
                        "kill -9 $$"], cwd=work)
        if rc != 9:
            problems.append("killed program: status %d, expected 9" % rc)
        if not any("no report" in l or "before it could write" in l
                   for l in stderr_lines(e)):
            problems.append("no line says which process has no report: %r"
                            % short(e))
        return problems

    def host_leaks_signal_rules(self, work, out, one_line_error):
        """heaptrail leaks PID sends the signal the agent listens on when
        leak_check_signal is given as key:value, or twice."""
        problems = []
        for opts in ("leak_check_signal:40", "leak_check_signal=40,"
                     "leak_check_signal=41", "leak_check_signal=41,"
                     "leak_check_signal=banana"):
            p, child = self.host_start(["serve"], work, opts=opts)
            try:
                rc, o, e = run([self.heaptrail, "leaks", "--json", str(child)],
                                       cwd=work)
                if rc != 0:
                    problems.append("%s: heaptrail leaks: status %d: %s" % (
                        opts, rc, short(e)))
                p.stdin.close()
                p.wait(timeout=30)
                if p.returncode != 0:
                    problems.append("%s: the program ended with status %d" %
                                    (opts, p.returncode))
            finally:
                if p.poll() is None:
                    p.kill()
        return problems

    def host_leaks_refuses(self, work, out, one_line_error):
        """heaptrail leaks PID does not kill a program that reset its
        signal dispositions behind the agent's back (raw rt_sigaction):
        it refuses, naming the cause."""
        problems = []
        p, child = self.host_start(["rawreset"], work)
        try:
            rc, o, e = run([self.heaptrail, "leaks", str(child)], cwd=work)
            one_line_error(rc, e, "catch", "leaks PID of a program with "
                           "default dispositions")
            o2, e2 = p.communicate(b"x\n", timeout=30)
            if p.returncode != 0 or o2 != b"done\n":
                problems.append("the program ended with status %d, stdout %r"
                                % (p.returncode, o2))
        finally:
            if p.poll() is None:
                p.kill()
        return problems

    def host_leaks_after_reset(self, work, out, one_line_error):
        """A program that reset every disposition to SIG_DFL with signal():
        the agent keeps its handler, so heaptrail leaks PID works and the
        program lives on; a plain kill of the leak check signal from
        outside still takes the default action (it dies of it, as bare)."""
        problems = []
        sig = signal.SIGRTMAX - 2
        p, child = self.host_start(["reset"], work)
        try:
            rc, o, e = run([self.heaptrail, "leaks", "--json", str(child)],
                           cwd=work)
            if rc != 0:
                problems.append("heaptrail leaks: status %d: %s" % (
                    rc, short(e)))
            if p.poll() is not None:
                problems.append("the program died of heaptrail leaks")
            os.kill(child, sig)
            o2, e2 = p.communicate(timeout=30)
            if p.returncode not in (-sig, 128 + sig) or b"done" in o2:
                problems.append("kill -%d from outside: the run ended with "
                                "status %d, stdout %r, expected death by "
                                "the signal" % (sig, p.returncode, o2))
        finally:
            if p.poll() is None:
                p.kill()
        return problems

    def host_own_handler(self, work, out, one_line_error):
        """A program's own handler on the leak check signal: sigaction's
        oldact and signal()'s return give back its own dispositions (not
        the agent's), heaptrail leaks PID does not run its handler, and a
        kill from outside does, once per signal."""
        problems = []
        sig = signal.SIGRTMAX - 2
        p, child = self.host_start(["own"], work)
        try:
            rc, o, e = run([self.heaptrail, "leaks", "--json", str(child)],
                           cwd=work)
            if rc != 0:
                problems.append("heaptrail leaks: status %d: %s" % (
                    rc, short(e)))
            for i in range(2):
                os.kill(child, sig)
                line = p.stdout.readline()
                if line != b"hit\n":
                    problems.append("kill %d: the program's handler did not "
                                    "run (read %r)" % (i + 1, line))
                    break
            o2, e2 = p.communicate(b"", timeout=30)
            if p.returncode != 0 or o2 != (b"roundtrip ok 0\nhandler ran 2\n"
                                           b"done\n"):
                problems.append("the program ended with status %d, stdout %r"
                                % (p.returncode, o2))
        finally:
            if p.poll() is None:
                p.kill()
        return problems

    def host_hostile_inputs(self, work, out, one_line_error):
        """Every analyzer command, given /dev/zero, a FIFO without a writer
        or a directory holding them: one line, non-zero, no hang; and an
        output that cannot be written leaves no partial file."""
        problems = []
        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo)
        d = os.path.join(work, "dir")
        os.mkdir(d)
        for n in ("heaptrail.7.leaks", "heaptrail.7.timeline",
                  "heaptrail.7.1.every.heap", "heaptrail.7.2.every.heap",
                  "heaptrail.7.3.every.heap"):
            os.mkfifo(os.path.join(d, n))
        cmds = []
        for src in ("/dev/zero", fifo):
            for c in ("top", "collapsed", "callgraph", "report", "timeline"):
                cmds.append([c, src])
            cmds.append(["flame", "-o", os.path.join(work, "f.svg"), src])
            cmds.append(["pprof", "-o", os.path.join(work, "p.pb.gz"), src])
            cmds.append(["diff", src, src])
            cmds.append(["growth", src, src, src])
        cmds += [["report", d], ["timeline", d], ["growth", d]]
        for c in cmds:
            try:
                rc, o, e = run([self.heaptrail] + c, cwd=work, timeout=20)
            except Failure:
                problems.append("%s: no answer within 20 s" % " ".join(c))
                continue
            one_line_error(rc, e, os.path.basename(c[-1]) if c[-1] != d
                           else "heaptrail.7.", " ".join(c))
        return problems

    def leaks_pid(self, work, out):
        """`heaptrail leaks PID` on a running server, twice: everything, then
        only what increased."""
        prog = self.build_prog(self.specs["delta_leak_server"], "fp")
        problems = []
        p = subprocess.Popen([self.heaptrail, "run", "-q", "-o", out, "--",
                              prog], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, cwd=work)
        try:
            child = None
            for _ in range(200):
                try:
                    with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                        kids = f.read().split()
                except OSError:
                    kids = []
                if kids and os.path.exists(os.path.join(out)):
                    child = int(kids[0])
                    with open("/proc/%d/maps" % child) as f:
                        if "libheaptrail" in f.read():
                            break
                time.sleep(0.02)
            if child is None:
                return ["the server under heaptrail did not start"]
            checks = []
            for reqs, opt in ((5, []), (3, ["--increased"])):
                p.stdin.write(b"".join(b"req-%d\n" % i for i in range(reqs)))
                p.stdin.flush()
                time.sleep(0.3)  # the server reads and handles them
                rc, o, e = run([self.heaptrail, "leaks", "--json"] + opt +
                               [str(child)], cwd=work)
                if rc != 0:
                    return ["heaptrail leaks %s: status %d: %s" % (
                        " ".join(opt), rc, short(e))]
                checks.append(wrap(json.loads(o))[0])
            first = ht_kinds(checks[0])["definitely_lost"]
            if first != [240, 5]:
                problems.append("first check: definitely lost %d/%d, "
                                "expected 240/5" % tuple(first))
            inc = [r for r in records_of(checks[1])
                   if r["kind"] == "definitely_lost"]
            names = {f.get("function") for r in inc
                     for f in r["stack"][:1]}
            grown = [(r.get("increase") or {}).get("bytes") for r in inc]
            if names != {"log_request"} or grown != [144]:
                problems.append("second check: increased records %s with "
                                "increases %s, expected log_request +144" %
                                (sorted(names), grown))
        finally:
            p.stdin.close()
            p.wait(timeout=30)
        if p.returncode != 0:
            problems.append("the server exited with %d" % p.returncode)
        problems += self.leaks_pid_hostile(work, out + "-hostile")
        return problems

    def leaks_pid_hostile(self, work, out):
        """`heaptrail leaks PID` where only a thread with a 16 KiB stack can
        take the check and a live block has a PROT_NONE page."""
        prog = self.build_prog(self.specs["leaks_pid_hostile"], "fp")
        p = subprocess.Popen([self.heaptrail, "run", "-q", "-o", out, "--",
                              prog], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, cwd=work)
        problems = []
        try:
            child = None
            for _ in range(200):
                try:
                    with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                        kids = f.read().split()
                except OSError:
                    kids = []
                if kids:
                    try:
                        with open("/proc/%d/status" % int(kids[0])) as f:
                            threads = [l for l in f if l.startswith("Threads:")]
                    except OSError:
                        threads = []
                    if threads and int(threads[0].split()[1]) >= 2:
                        child = int(kids[0])
                        break
                time.sleep(0.02)
            if child is None:
                return ["hostile: the program under heaptrail did not start"]
            time.sleep(0.2)  # main blocks the check signal after the thread
            rc, o, e = run([self.heaptrail, "leaks", "--json", str(child)],
                           cwd=work)
            if rc != 0:
                problems.append("hostile: heaptrail leaks: status %d: %s" %
                                (rc, short(e)))
            else:
                lost = ht_kinds(wrap(json.loads(o))[0])["definitely_lost"]
                if lost != [100, 1]:
                    problems.append("hostile: definitely lost %d/%d, "
                                    "expected 100/1" % tuple(lost))
        finally:
            o, _ = p.communicate(b"", timeout=60)
        if p.returncode != 0 or o != b"done\n":
            problems.append("hostile: the program ended with %d, stdout %r" %
                            (p.returncode, o))
        return problems

    # -- heap profiles: the prof: tests (see the module comment)

    def agent(self):
        return os.path.join(self.build, "libheaptrail.so")

    def require_dumps(self):
        """Skips the calling test while the agent writes no heap dumps."""
        agent = self.agent()
        if not os.path.exists(agent):
            raise Failure("%s not found (build it with make)" % agent)

        def do():
            work = fresh_dir(os.path.join(self.e2e, "prof", "probe"))
            run(["/bin/true"], cwd=work, env=dict(
                RUN_ENV, LD_PRELOAD=agent, HEAPTRAIL_OUTPUT=work,
                HEAPTRAIL_OPTIONS="final=1"))
            return any(f.endswith(".heap") for f in os.listdir(work))
        if not self.features.get("heap_dumps", do):
            raise Skip("the agent writes no heap dumps yet (final=1 left no "
                       "heaptrail.*.heap)")

    def require_export(self, symbol):
        def do():
            rc, out, _ = run(["nm", "-D", "--defined-only", self.agent()],
                             env=os.environ)
            return rc == 0 and bool(re.search(
                rb"\s%s$" % symbol.encode(), out, re.M))
        if not self.features.get("export:" + symbol, do):
            raise Skip("libheaptrail.so does not export %s yet" % symbol)

    def tool(self, name):
        """The path of jeprof, pprof (built by tests/tools/get-pprof) or
        Debian's libjemalloc.so.2; Failure when it cannot be had."""
        def do():
            if name == "jeprof":
                path = shutil.which("jeprof")
                if not path:
                    raise Failure("jeprof not found (it comes with "
                                  "libjemalloc-dev: scripts/install-deps "
                                  "--test)")
                return path
            if name == "pprof":
                rc, out, err = run([os.path.join(TOOLS, "get-pprof"),
                                    self.build], env=os.environ, timeout=600)
                if rc != 0:
                    raise Failure(short(err, 300).strip() or
                                  "get-pprof: status %d" % rc)
                return out.decode().strip().split("\n")[-1]
            found = sorted(glob.glob("/usr/lib/*/libjemalloc.so.2") +
                           glob.glob("/usr/lib/libjemalloc.so.2"))
            if not found:
                raise Failure("libjemalloc.so.2 not found (libjemalloc2: "
                              "scripts/install-deps --test)")
            return found[0]
        return self.tools.get(name, do)

    def symbols(self, binary):
        return self.syms.get(binary, lambda: heapprof.Symbols(binary))

    def prof_work(self, spec, tag):
        return os.path.join(self.e2e, "prof", spec.name + tag)

    def prof_run(self, spec, tag, options=None, args=(), cli=None,
                 during=None):
        """Runs a @prof program (built with frame pointers) with the agent:
        under LD_PRELOAD with HEAPTRAIL_OPTIONS=options (None: unset) and
        HEAPTRAIL_OUTPUT=WORK/out, or, with cli (a list of flags), as
        `heaptrail run -o WORK/out CLI -- PROG`.  during(proc, outdir) is
        called while it runs.  Returns {"status", "stdout", "stderr",
        "outdir", "work", "binary", "pid"}: pid is the program's (under
        the CLI: read from the names of the files the agent wrote)."""
        binary = self.build_prog(spec, "fp")
        work = fresh_dir(self.prof_work(spec, tag))
        outdir = os.path.join(work, "out")
        env = dict(RUN_ENV)
        if options is not None:
            env["HEAPTRAIL_OPTIONS"] = options
        if cli is None:
            os.makedirs(outdir)
            env.update(LD_PRELOAD=self.agent(), HEAPTRAIL_OUTPUT=outdir)
            cmd = [binary] + list(args)
        else:
            cmd = [self.heaptrail, "run", "-o", outdir] + list(cli) + \
                ["--", binary] + list(args)
        try:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, cwd=work, env=env)
        except OSError as e:
            raise Failure("cannot run %s: %s" % (cmd[0], e.strerror))
        try:
            if during:
                during(p, outdir)
            out, err = p.communicate(timeout=PROG_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failure("timed out after %ds: %s" % (PROG_TIMEOUT,
                                                       " ".join(cmd)))
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        with open(os.path.join(work, "stderr"), "wb") as f:
            f.write(err)
        pid = p.pid
        if cli is not None:
            pids = {m.group(1) for m in map(re.compile(
                r"^heaptrail\.(\d+)\.").match, os.listdir(outdir)
                if os.path.isdir(outdir) else []) if m}
            pid = int(pids.pop()) if len(pids) == 1 else None
        return {"status": p.returncode, "stdout": out, "stderr": err,
                "outdir": outdir, "work": work, "binary": binary, "pid": pid}

    def bare_args(self, spec, args):
        binary = self.build_prog(spec, "fp")
        rc, out, _ = run([binary] + list(args), cwd=self.bin_dir("fp"))
        return rc, out

    def reader_estimates(self, binary, path, prof, funcs, problems,
                         tolerance=None):
        """Estimated in-use bytes of funcs (and "total") from one dump, by
        heapprof (pprof's maths), jeprof --text and pprof -top (cum of
        each function); jeprof and pprof must agree with heapprof within
        a byte or two per line of the dump (pprof truncates each line,
        jeprof keeps floats).  {reader: {func or "total": bytes}}."""
        ours = heapprof.by_function(prof, self.symbols(binary), funcs)
        est = {"heapprof": {f: ours.get(f, [0] * 4)[1] for f in funcs}}
        est["heapprof"]["total"] = prof.total_inuse()
        index = "inuse_space" if prof.has_alloc else None
        for reader, top in (("jeprof", self.jeprof_top(binary, path)),
                            ("pprof", self.pprof_top(binary, path,
                                                     index=index))):
            rows = {name: cum for _, cum, name in top["rows"]}
            est[reader] = {f: rows.get(f, 0) for f in funcs}
            est[reader]["total"] = top["total"]
        slack = tolerance if tolerance is not None else \
            2 + 2 * len(prof.samples)
        name = os.path.basename(path)
        for reader in ("jeprof", "pprof"):
            for f in list(funcs) + ["total"]:
                if abs(est[reader][f] - est["heapprof"][f]) > slack:
                    problems.append("%s: %s says %s holds %d bytes, the "
                                    "runner's reader %d" % (
                                        name, reader, f, est[reader][f],
                                        est["heapprof"][f]))
        return est

    def jeprof_top(self, binary, dump, base=None):
        """`jeprof --text --show_bytes`: {"total", "rows": [(flat, cum,
        function)]} in jeprof's order (by flat)."""
        cmd = [self.tool("jeprof"), "--text", "--show_bytes",
               "--nodefraction=0", "--edgefraction=0"]
        if base:
            cmd.append("--base=" + base)
        rc, out, err = run(cmd + [binary, dump], cwd=os.path.dirname(dump))
        text = out.decode("utf-8", "replace")
        tm = re.search(r"^Total: (-?[\d.]+) B$", text, re.M)
        if rc != 0 or not tm:
            raise Failure("jeprof --text %s%s: status %d: %s" % (
                "--base=%s " % os.path.basename(base) if base else "",
                os.path.basename(dump), rc, short(err + out, 300)))
        rows = [(int(m.group(1)), int(m.group(2)), m.group(3))
                for m in map(JEPROF_ROW.match, text.split("\n")) if m]
        return {"total": int(float(tm.group(1))), "rows": rows,
                "text": text}

    def pprof_top(self, binary, dump, base=None, index=None):
        """`pprof -top -unit=B`: {"total", "rows": [(flat, cum, function)]}
        in pprof's order (by flat)."""
        cmd = [self.tool("pprof"), "-top", "-unit=B", "-nodefraction=0",
               "-edgefraction=0"]
        if index:
            cmd.append("-sample_index=" + index)
        if base:
            cmd += ["-base", base]
        env = dict(RUN_ENV, PPROF_TMPDIR=os.path.dirname(dump))
        rc, out, err = run(cmd + [binary, dump], cwd=os.path.dirname(dump),
                           env=env)
        text = out.decode("utf-8", "replace")
        tm = re.search(r" of (-?\d+)B total", text)
        if rc != 0 or not tm:
            raise Failure("pprof -top %s%s: status %d: %s" % (
                "-base %s " % os.path.basename(base) if base else "",
                os.path.basename(dump), rc, short(err + out, 300)))
        rows = [(int(m.group(1)), int(m.group(2)), m.group(3))
                for m in map(PPROF_ROW.match, text.split("\n")) if m]
        return {"total": int(tm.group(1)), "rows": rows, "text": text}

    def test_prof(self, name):
        return getattr(self, "prof_" + name.replace("-", "_"))()

    def prof_readers(self):
        """The oracle itself, without heaptrail: jemalloc's profiler on
        prof_accuracy at S = 512 KiB, its dump converted to the legacy
        layout; heapprof, jeprof and pprof agree, and the shares are the
        true ones within 3 points (jemalloc counts its size classes, so
        its total is not the requested bytes)."""
        spec = self.specs["prof_accuracy"]
        binary = self.build_prog(spec, "fp")
        work = fresh_dir(self.prof_work(spec, ".jemalloc"))
        env = dict(RUN_ENV, LD_PRELOAD=self.tool("jemalloc"),
                   MALLOC_CONF="prof:true,prof_accum:true,lg_prof_sample:19,"
                               "prof_prefix:" + os.path.join(work, "jeprof"))
        rc, out, err = run([binary], cwd=work, env=env)
        problems, details = [], []
        if rc != 0:
            raise Failure("under jemalloc: status %d: %s" % (rc, short(err)))
        truth = accuracy_truth(out)
        dumps = glob.glob(os.path.join(work, "jeprof.*.heap"))
        if len(dumps) != 1:
            raise Failure("jemalloc wrote %d dumps, expected 1" % len(dumps))
        legacy = os.path.join(work, "legacy.heap")
        heapprof.from_jemalloc(dumps[0], legacy)
        prof = read_dump(legacy, problems, 524288)
        if prof is None:
            return problems, details
        est = self.reader_estimates(binary, legacy, prof, ACCURACY_SITES,
                                    problems)
        for reader, e in sorted(est.items()):
            details.append("%s: %s" % (reader, e))
            check_shares(reader, e, truth, problems, total=False)
        return problems, details

    def prof_accuracy(self):
        """prof_accuracy three times at the default S: shares within 3
        points, total within 5 %, by all three readers."""
        self.require_dumps()
        self.require_export("heaptrail_dump")
        spec = self.specs["prof_accuracy"]
        bare_rc, bare_out = self.bare(spec, "fp")
        truth = accuracy_truth(bare_out)
        problems, details = [], []
        headers = []
        for i in range(3):
            label = "run %d" % (i + 1)
            r = self.prof_run(spec, ".%d" % i)
            if r["status"] != bare_rc or r["stdout"] != bare_out:
                problems.append("%s: status %d, stdout %s the bare run's" % (
                    label, r["status"], "differs from"
                    if r["stdout"] != bare_out else "equal to"))
            dumps = list_dumps(r["outdir"], problems, r["pid"])
            api = [d for d in dumps["seq"] if d["kind"] == "api"]
            if len(api) != 1:
                problems.append("%s: %d API dumps in %s, expected 1" % (
                    label, len(api), r["outdir"]))
                continue
            path = api[0]["path"]
            prof = read_dump(path, problems, 512 * 1024)
            if prof is None:
                continue
            headers.append(prof.header)
            if not prof.has_alloc:
                problems.append("%s: the header's allocated pair equals the "
                                "in-use pair although scratch freed %d bytes "
                                "(pprof then offers no inuse_space and "
                                "refuses -base against other dumps)" % (
                                    label, truth["scratch"][0]))
            est = self.reader_estimates(r["binary"], path, prof,
                                        ACCURACY_SITES, problems)
            for reader, e in sorted(est.items()):
                details.append("%s %s: %s" % (label, reader, e))
                check_shares("%s: %s" % (label, reader), e, truth, problems)
            # The fourth site: freed, so only in the allocated columns.
            got = heapprof.by_function(prof, self.symbols(r["binary"]),
                                       ACCURACY_SITES + ("scratch",))
            n, b, n2, b2 = got.get("scratch", [0] * 4)
            want = truth["scratch"][0]
            details.append("%s scratch: %d in use, %d allocated (true %d)" %
                           (label, b, b2, want))
            if b != 0:
                problems.append("%s: scratch has %d bytes in use, all were "
                                "freed" % (label, b))
            if abs(b2 - want) > 0.15 * want:
                problems.append("%s: scratch allocated %d bytes (estimated), "
                                "true %d: off by more than 15 %%" % (
                                    label, b2, want))
        if len(headers) == 3 and len(set(headers)) == 1:
            problems.append("the three runs sampled exactly the same blocks "
                            "(%d: %d): every process draws the same random "
                            "numbers" % headers[0][:2])
        return problems, details

    def prof_exact(self):
        """prof_accuracy at sample=1: every reader says the true bytes."""
        self.require_dumps()
        self.require_export("heaptrail_dump")
        spec = self.specs["prof_accuracy"]
        bare_rc, bare_out = self.bare(spec, "fp")
        truth = accuracy_truth(bare_out)
        problems, details = [], []
        r = self.prof_run(spec, ".exact", options="sample=1")
        if r["status"] != bare_rc or r["stdout"] != bare_out:
            problems.append("status %d, stdout %s the bare run's" % (
                r["status"], "differs from" if r["stdout"] != bare_out
                else "equal to"))
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        api = [d for d in dumps["seq"] if d["kind"] == "api"]
        if len(api) != 1:
            raise Failure("%d API dumps in %s, expected 1" % (len(api),
                                                               r["outdir"]))
        path = api[0]["path"]
        prof = read_dump(path, problems, 1)
        if prof is None:
            return problems, details
        est = self.reader_estimates(r["binary"], path, prof, ACCURACY_SITES,
                                    problems, tolerance=0)
        for reader, e in sorted(est.items()):
            details.append("%s: %s" % (reader, e))
            for f in ACCURACY_SITES:
                if e[f] != truth[f][0]:
                    problems.append("%s: %s %d bytes, true %d" % (
                        reader, f, e[f], truth[f][0]))
        got = heapprof.by_function(prof, self.symbols(r["binary"]),
                                   ACCURACY_SITES + ("scratch",))
        for f in ACCURACY_SITES + ("scratch",):
            n, b, n2, b2 = got.get(f, [0] * 4)
            tb, tn = truth[f]
            want = (0, 0, tn, tb) if f == "scratch" else (tn, tb, tn, tb)
            if (n, b, n2, b2) != want:
                problems.append("%s: %d: %d [%d: %d] in the dump, expected "
                                "%d: %d [%d: %d]" % ((f, n, b, n2, b2) + want))
        sites = sum(truth[f][0] for f in ACCURACY_SITES)
        if not sites <= prof.total_inuse() <= sites + (1 << 20):
            problems.append("%d bytes in use in all, the sites hold %d" % (
                prof.total_inuse(), sites))
        return problems, details

    def cache_signal(self, sig):
        """A during() for prof_run: once the program's first dump is there
        (so the agent is set up), sends it signal sig."""
        def during(p, outdir):
            deadline = time.time() + 20
            while time.time() < deadline and p.poll() is None:
                names = os.listdir(outdir) if os.path.isdir(outdir) else []
                for m in map(DUMP_NAME.match, names):
                    if m and m.group("kind") in ("every", "interval"):
                        os.kill(int(m.group("pid")), sig)
                        return
                time.sleep(0.01)
            raise Failure("no interval or every dump within 20 s: signal "
                          "%d not sent" % sig)
        return during

    def prof_cache(self):
        """Every trigger at once, under LD_PRELOAD."""
        self.require_dumps()
        self.require_export("heaptrail_dump")
        spec = self.specs["prof_cache"]
        r = self.prof_run(spec, "", "interval=128m,every=100ms,peak=1,"
                          "signal=%d,final=1,timeline=50" % CACHE_SIGNAL,
                          during=self.cache_signal(CACHE_SIGNAL))
        return self.check_cache_run(spec, r, 512 * 1024)

    def prof_run_flags(self):
        """The same triggers through heaptrail run's flags."""
        self.require_dumps()
        self.require_export("heaptrail_dump")
        if not self.feature("profiling_flags"):
            raise Skip("heaptrail run has no --sample yet")
        spec = self.specs["prof_cache"]
        r = self.prof_run(spec, ".cli", cli=[
            "--sample", "256k", "--interval", "128m", "--peak", "--every",
            "100ms", "--signal", str(CACHE_SIGNAL), "--final",
            "--timeline", "50"],
            during=self.cache_signal(CACHE_SIGNAL))
        return self.check_cache_run(spec, r, 256 * 1024)

    def check_cache_run(self, spec, r, period):
        problems, details = [], []
        bare_rc, bare_out = self.bare(spec, "fp")
        details.append("stderr: " + short(r["stderr"], 2000))
        if r["status"] != bare_rc:
            problems.append("status %d, bare run %d" % (r["status"], bare_rc))
        if r["stdout"] != bare_out:
            problems.append("stdout differs from the bare run: " +
                            first_difference(r["stdout"], bare_out))
        if r["pid"] is None:
            raise Failure("no files of one process in %s: %s" % (
                r["outdir"], sorted(os.listdir(r["outdir"]))))
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        details.append("dumps: " + " ".join(
            os.path.basename(d["path"]) for d in dumps["seq"] + dumps["peak"]))
        kinds = {}
        for d in dumps["seq"]:
            kinds.setdefault(d["kind"], []).append(d)
        for kind, least, most in (("interval", 2, None), ("every", 3, None),
                                  ("signal", 1, 1), ("api", 1, 1),
                                  ("final", 1, 1)):
            n = len(kinds.get(kind, []))
            if n < least or (most is not None and n > most):
                problems.append("%d %s dumps, expected %s" % (
                    n, kind, least if least == most else
                    "at least %d" % least))
        if len(dumps["peak"]) != 1:
            problems.append("%d peak dumps, expected exactly one" %
                            len(dumps["peak"]))
        sym = self.symbols(r["binary"])
        funcs = ("load_config", "cache_grow", "handle_request")
        profs = []
        for d in dumps["seq"] + dumps["peak"]:
            prof = read_dump(d["path"], problems, period)
            if prof is not None:
                profs.append((d, prof, heapprof.by_function(prof, sym,
                                                            funcs)))
        mib = 1 << 20
        # SEQ is time order: the cache never shrinks before the frees,
        # which start after the API dump.
        last = None
        api_seq = min([d["seq"] for d in dumps["seq"] if d["kind"] == "api"]
                      or [None])
        for d, prof, got in profs:
            if d["kind"] in ("final", "peak") or \
                    (api_seq is not None and d["seq"] > api_seq):
                continue
            raw = heapprof.by_function(prof, sym, funcs, raw=True)
            now = raw.get("cache_grow", [0] * 4)[1]
            if last is not None and now < last[1]:
                problems.append("cache_grow shrinks from %d sampled bytes in "
                                "%s to %d in %s: SEQ is not time order" % (
                                    last[1], last[0], now,
                                    os.path.basename(d["path"])))
            last = (os.path.basename(d["path"]), now)
        for d, prof, got in profs:
            name = os.path.basename(d["path"])
            live = {f: got.get(f, [0] * 4)[1] for f in funcs}
            details.append("%s: %s, total %d" % (name, live,
                                                 prof.total_inuse()))
            if d["kind"] == "final":
                if live["cache_grow"] or live["load_config"]:
                    problems.append("%s: %s in use at exit, after the frees"
                                    % (name, live))
            elif d["kind"] == "api":
                for f, want in (("load_config", 96 * mib),
                                ("cache_grow", 50 * mib)):
                    if abs(live[f] - want) > 0.35 * want:
                        problems.append("%s: %s %d bytes (estimated), true "
                                        "%d" % (name, f, live[f], want))
            elif d["kind"] == "peak":
                total = prof.total_inuse()
                if not 0.6 * 146 * mib <= total <= 1.4 * 154 * mib:
                    problems.append("%s: %d bytes in use (estimated); the "
                                    "peak is 146 to 154 MiB" % (name, total))
        timeline = os.path.join(r["outdir"], "heaptrail.%d.timeline" %
                                r["pid"])
        rows = read_timeline(timeline, problems)
        if rows is not None and len(rows) < 3:
            problems.append("%s: %d rows over a run of a second" % (
                os.path.basename(timeline), len(rows)))
        # What grew: the first dump against the API dump (full cache).
        seq = [(d, prof) for d, prof, _ in profs
               if d["kind"] not in ("peak", "final")]
        api = [(d, prof) for d, prof in seq if d["kind"] == "api"]
        if not api or seq[0][0]["kind"] == "api":
            problems.append("no dump before the API dump to compare with")
            return problems, details
        # The earliest dump that pprof reads with four columns: a dump
        # taken before anything was freed has equal in-use and allocated
        # pairs (a loaded machine can delay the first request that long).
        early = [(d, p) for d, p in seq
                 if p.has_alloc and d["seq"] < api[0][0]["seq"]] or seq
        (first, fprof), (lastd, lprof) = early[0], api[0]
        index = "inuse_space" if fprof.has_alloc and lprof.has_alloc \
            else None
        if index is None:
            problems.append("%s or %s has equal in-use and allocated pairs "
                            "in its header: pprof reads it as a different "
                            "profile type" % (
                                os.path.basename(first["path"]),
                                os.path.basename(lastd["path"])))
        for reader, alone, diff in (
                ("jeprof", lambda: self.jeprof_top(r["binary"],
                                                   lastd["path"]),
                 lambda: self.jeprof_top(r["binary"], lastd["path"],
                                         base=first["path"])),
                ("pprof", lambda: self.pprof_top(r["binary"], lastd["path"],
                                                 index=index),
                 lambda: self.pprof_top(r["binary"], lastd["path"],
                                        base=first["path"], index=index))):
            for what, want, top in (("alone", "load_config", alone),
                                    ("--base", "cache_grow", diff)):
                try:
                    t = top()
                except Failure as e:
                    problems.append(str(e))
                    continue
                head = t["rows"][0][2] if t["rows"] else None
                details.append("%s %s:\n%s" % (reader, what,
                                               "\n".join(t["text"].split(
                                                   "\n")[:8])))
                if head != want:
                    problems.append("%s %s %s: first function %s, expected "
                                    "%s" % (reader, os.path.basename(
                                        lastd["path"]), what, head, want))
        return problems, details

    def prof_timeline(self):
        """prof_cache in exact mode with a 10 ms timeline and a peak dump."""
        self.require_dumps()
        spec = self.specs["prof_cache"]
        r = self.prof_run(spec, ".timeline", "sample=1,timeline=10,peak=1")
        problems, details = [], []
        if r["status"] != 0:
            problems.append("status %d" % r["status"])
        mib = 1 << 20
        path = os.path.join(r["outdir"], "heaptrail.%d.timeline" % r["pid"])
        rows = read_timeline(path, problems)
        if rows:
            details.append("%d rows, last %s" % (len(rows), rows[-1]))
            live = [row[1] for row in rows]
            top = max(live)
            details.append("live bytes at most %d" % top)
            if not 0.9 * 146 * mib <= top <= 1.1 * 154 * mib:
                problems.append("live bytes peak at %d, the program's peak "
                                "is 146 MiB (+8 in flight)" % top)
            blocks = max(row[2] for row in rows)
            if not 96 + 400 <= blocks <= 1000:
                problems.append("live blocks peak at %d, expected 496 to "
                                "560 (+ libc's)" % blocks)
            if len(rows) < 20:
                problems.append("%d rows over a run of a second at 10 ms" %
                                len(rows))
            else:
                fifth = len(rows) // 5
                early = sum(live[:fifth]) / fifth
                late = sum(live[-fifth:]) / fifth
                if late - early < 25 * mib:
                    problems.append("live bytes do not grow: %d in the first "
                                    "fifth, %d in the last" % (early, late))
            allocated = rows[-1][3]
            if not 0.9 * 546 * mib <= allocated <= 546 * mib + 16 * mib:
                problems.append("last row: %d bytes allocated, the program "
                                "allocates 546 MiB" % allocated)
            if not 0 < max(row[4] for row in rows) < 1 << 30:
                problems.append("RSS %d: the program touches no block" %
                                max(row[4] for row in rows))
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        if len(dumps["peak"]) != 1:
            problems.append("%d peak dumps, expected 1" % len(dumps["peak"]))
        else:
            prof = read_dump(dumps["peak"][0]["path"], problems, 1)
            if prof is not None:
                got = prof.total_inuse()
                details.append("peak dump: %d bytes" % got)
                if not 146 * mib / 1.1 <= got <= 155 * mib:
                    problems.append("the peak dump holds %d bytes; the peak "
                                    "is 146 MiB (+8 in flight) and the dump "
                                    "is rewritten at each 10 %% of growth" %
                                    got)
        return problems, details

    def prof_transparent(self):
        """The agent's timers (every, timeline) must not reach the program:
        prof_cache's sleeps are not cut short (EINTR) under them."""
        self.require_dumps()
        spec = self.specs["prof_cache"]
        bare_rc, bare_out = self.bare(spec, "fp")
        r = self.prof_run(spec, ".transparent", "every=50ms,timeline=10")
        problems = []
        if r["status"] != bare_rc:
            problems.append("status %d, bare run %d" % (r["status"], bare_rc))
        if r["stdout"] != bare_out:
            problems.append("stdout differs from the bare run: " +
                            first_difference(r["stdout"], bare_out))
        for line in stderr_lines(r["stderr"]):
            if "interrupted" in line:
                problems.append("%s (the agent's timer signal interrupts "
                                "the program's system calls)" % line.strip())
        return problems, ["stderr: " + short(r["stderr"], 2000)]

    def prof_api(self):
        self.require_dumps()
        for sym in ("heaptrail_dump", "heaptrail_reset",
                    "heaptrail_set_active"):
            self.require_export(sym)
        spec = self.specs["prof_api"]
        explicit = os.path.join(self.prof_work(spec, ""), "explicit.heap")
        r = self.prof_run(spec, "", "sample=1", args=[explicit])
        problems = check_lines(r, API_OUTPUT)
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        api = [d for d in dumps["seq"] if d["kind"] == "api"]
        if len(api) != 1:
            problems.append("%d automatic API dumps, expected 1" % len(api))
        details = []
        if os.path.exists(explicit) and len(api) == 1:
            self.check_api_dumps(r["binary"], explicit, api[0]["path"],
                                 problems, details)
        elif not os.path.exists(explicit):
            problems.append("heaptrail_dump(path) wrote no %s" % explicit)
        return problems, details

    def prof_mallctl(self):
        self.require_dumps()
        self.require_export("mallctl")
        spec = self.specs["prof_mallctl"]
        work = self.prof_work(spec, "")
        one, two = (os.path.join(work, f) for f in ("one.heap", "two.heap"))
        r = self.prof_run(spec, "", "sample=1", args=[one, two])
        problems = check_lines(r, MALLCTL_OUTPUT)
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        api = [d for d in dumps["seq"] if d["kind"] == "api"]
        if len(api) != 1:
            problems.append("%d automatic dumps (prof.dump without a name),"
                            " expected 1" % len(api))
        details = []
        for f in (one, two):
            if not os.path.exists(f):
                problems.append("prof.dump wrote no %s" % f)
        if os.path.exists(one) and len(api) == 1:
            self.check_api_dumps(r["binary"], one, api[0]["path"], problems,
                                 details)
        if os.path.exists(two):
            read_dump(two, problems, 1 << 19)
        return problems, details

    def prof_mallctl_jemalloc(self):
        """The program is right for jemalloc: under jemalloc's profiler it
        prints the same and its dumps appear."""
        spec = self.specs["prof_mallctl"]
        binary = self.build_prog(spec, "fp")
        work = fresh_dir(self.prof_work(spec, ".jemalloc"))
        one, two = (os.path.join(work, f) for f in ("one.heap", "two.heap"))
        rc, out, err = run([binary, one, two], cwd=work, env=dict(
            RUN_ENV, LD_PRELOAD=self.tool("jemalloc"),
            MALLOC_CONF="prof:true,lg_prof_sample:0,prof_prefix:" +
                        os.path.join(work, "jeprof")))
        problems = check_lines({"status": rc, "stdout": out, "stderr": err},
                               MALLCTL_OUTPUT)
        details = []
        auto = glob.glob(os.path.join(work, "jeprof.*.heap"))
        if len(auto) != 1:
            problems.append("%d automatic dumps, expected 1" % len(auto))
        if not os.path.exists(two):
            problems.append("no %s" % two)
        else:
            with open(two) as f:
                head = f.readline().strip()
            if head != "heap_v2/524288":
                problems.append("%s: header %r after prof.reset = 19" % (
                    two, head))
        if not os.path.exists(one):
            problems.append("no %s" % one)
        else:
            legacy = one + ".legacy"
            heapprof.from_jemalloc(one, legacy)
            prof = read_dump(legacy, problems, 1)
            if prof is not None:
                got = heapprof.by_function(prof, self.symbols(binary),
                                           API_FUNCS, raw=True)
                details.append("%s: %s" % (one, got))
                if got.get("kept_across_reset", [0])[0] != 3 or \
                        got.get("while_inactive"):
                    problems.append("%s: %s, expected 3 blocks of "
                                    "kept_across_reset and no "
                                    "while_inactive" % (one, got))
        return problems, details

    def prof_api_bare(self):
        rc, out = self.bare_args(self.specs["prof_api"], ["x.heap"])
        want = b"heaptrail: not loaded\ndone: 9 blocks kept and freed\n"
        if (rc, out) != (0, want):
            return ["without the agent: status %d, stdout %r" % (
                rc, short(out))], []
        return [], []

    def prof_mallctl_bare(self):
        rc, out = self.bare_args(self.specs["prof_mallctl"], ["a", "b"])
        want = b"mallctl: not available\ndone: 9 blocks kept and freed\n"
        if (rc, out) != (0, want):
            return ["without the agent: status %d, stdout %r" % (
                rc, short(out))], []
        return [], []

    def check_api_dumps(self, binary, before, after, problems, details):
        """The dump before the reset and the one after (prof_api and
        prof_mallctl, exact mode)."""
        sym = self.symbols(binary)
        for path, want in (
                (before, {"while_inactive": (0, 0, 0, 0),
                          "kept_across_reset": (3, 3000, 3, 3000),
                          "churn_before_reset": (0, 0, 10, 5000),
                          "after_reset": (0, 0, 0, 0)}),
                (after, {"while_inactive": (0, 0, 0, 0),
                         "kept_across_reset": (3, 3000, None, None),
                         "churn_before_reset": (0, 0, 0, 0),
                         "after_reset": (2, 1400, 2, 1400)})):
            prof = read_dump(path, problems, 1)
            if prof is None:
                continue
            got = heapprof.by_function(prof, sym, API_FUNCS, raw=True)
            details.append("%s: %s" % (os.path.basename(path), got))
            for f, w in want.items():
                g = got.get(f, [0] * 4)
                if any(x is not None and x != y for x, y in zip(w, g)):
                    problems.append("%s: %s %d: %d [%d: %d], expected %s" % (
                        os.path.basename(path), f, g[0], g[1], g[2], g[3],
                        "%s: %s [%s: %s]" % tuple(
                            "*" if x is None else x for x in w)))

    def prof_aliases(self):
        """jemalloc's MALLOC_CONF vocabulary in HEAPTRAIL_OPTIONS."""
        self.require_dumps()
        self.require_export("heaptrail_dump")
        spec = self.specs["prof_cache"]
        prefix = os.path.join(self.prof_work(spec, ".aliases"), "out", "jp")
        r = self.prof_run(spec, ".aliases", ",".join([
            "prof:true", "prof_active:true", "lg_prof_sample:0",
            "lg_prof_interval:27", "prof_gdump:true", "prof_final:true",
            "prof_leak:true", "prof_accum:true", "prof_prefix:" + prefix]),
            args=["5"])
        problems, details = [], []
        if r["status"] != 0:
            problems.append("status %d" % r["status"])
        # Every name is accepted: the agent says nothing (the program's
        # own note about interrupted sleeps is prof:transparent's).
        said = [l for l in stderr_lines(r["stderr"])
                if not l.startswith("prof_cache:")]
        if said:
            problems.append("stderr: %r" % short("\n".join(said)))
        dumps = list_dumps(r["outdir"], problems, r["pid"], prefix="jp")
        kinds = [d["kind"] for d in dumps["seq"]]
        details.append("dumps: %s" % sorted(os.listdir(r["outdir"])))
        for kind, least in (("interval", 3), ("api", 1), ("final", 1)):
            if kinds.count(kind) < least:
                problems.append("%d jp.PID.SEQ.%s.heap dumps, expected at "
                                "least %d" % (kinds.count(kind), kind, least))
        if len(dumps["peak"]) != 1:
            problems.append("%d jp.PID.peak.heap (prof_gdump), expected 1" %
                            len(dumps["peak"]))
        for d in dumps["seq"] + dumps["peak"]:
            read_dump(d["path"], problems, 1)
        return problems, details

    def prof_bad_options(self):
        """Malformed options: reported once each, ignored, the rest kept."""
        self.require_dumps()
        spec = self.specs["exit_status"]
        bare_rc, bare_out = self.bare(spec, "fp")
        bad = ["sample=banana", "nope=1", "every=soon", "lg_prof_sample:x"]
        binary = self.build_prog(spec, "fp")
        work = fresh_dir(os.path.join(self.e2e, "prof", "bad-options"))
        rc, out, err = run([binary], cwd=work, env=dict(
            RUN_ENV, LD_PRELOAD=self.agent(), HEAPTRAIL_OUTPUT=work,
            HEAPTRAIL_OPTIONS=",".join(bad[:1] + ["final=1"] + bad[1:])))
        problems = []
        if rc != bare_rc:
            problems.append("status %d, bare run %d" % (rc, bare_rc))
        if out != bare_out:
            problems.append("stdout differs from the bare run: " +
                            first_difference(out, bare_out))
        lines = stderr_lines(err)
        if len(lines) != len(bad):
            problems.append("%d stderr lines for %d bad options: %r" % (
                len(lines), len(bad), short(err, 400)))
        for opt in bad:
            n = sum(1 for l in lines if opt in l)
            if n != 1:
                problems.append("%d stderr lines name %r" % (n, opt))
        finals = [f for f in os.listdir(work) if f.endswith(".final.heap")]
        if len(finals) != 1:
            problems.append("final=1 between the bad options: %d final "
                            "dumps" % len(finals))
        else:
            read_dump(os.path.join(work, finals[0]), problems, 512 * 1024)
        return problems, []

    def test_unit(self, path):
        rc, out, err = run([path], cwd=ROOT, timeout=300,
                           env=os.environ)
        text = out.decode("utf-8", "replace")
        bad = [l for l in text.split("\n") if l.startswith("not ok")]
        oks = [l for l in text.split("\n") if l.startswith("ok")]
        problems = []
        if rc != 0:
            problems.append("exit status %d" % rc)
        problems += bad[:5]
        if rc != 0 and not bad:
            problems.append(short(err) or "no output")
        return problems, ["%d ok, %d not ok" % (len(oks), len(bad)), text]


def check_process(label, obj, vg, spec, problems):
    """One heaptrail process object against valgrind's view of it."""
    if obj.get("heaptrail") != 1:
        problems.append("%s: \"heaptrail\" is %r, expected 1" %
                        (label, obj.get("heaptrail")))
    totals = obj.get("totals") or {}
    # valgrind's "total heap usage": N allocs, M frees (a realloc to 0 is a
    # free, a failed allocation is nothing)
    usage = (totals.get("allocs"), totals.get("frees"))
    if not spec.usage_varies and vg.get("usage") and usage != tuple(vg["usage"][:2]):
        problems.append("%s: %s allocs, %s frees, valgrind %d allocs, %d frees" %
                        ((label,) + usage + tuple(vg["usage"][:2])))
    got = (totals.get("in_use_bytes"), totals.get("in_use_blocks"))
    records = obj.get("records") or []
    ht_dtv = sum(dtv_bytes(records_of(obj)).values())
    vg_dtv = sum(dtv_bytes(vg["records"]).values())
    if got[1] != vg["in_use"][1] or \
            got[0] is None or got[0] - ht_dtv != vg["in_use"][0] - vg_dtv:
        dtv = ""
        if ht_dtv or vg_dtv:
            dtv = " (DTV bytes not compared: heaptrail %d, valgrind %d)" % (
                ht_dtv, vg_dtv)
        problems.append("%s: in use %s bytes in %s blocks, valgrind %d in %d"
                        "%s" % ((label,) + got + tuple(vg["in_use"]) +
                                (dtv,)))
    summary = obj.get("summary") or {}
    if classified(obj):
        # The four kinds and what was suppressed are all that is in use.
        kinds = ht_kinds(obj)
        ssum = (sum(b for b, _ in kinds.values()),
                sum(n for _, n in kinds.values()))
        shown = (ssum[0] - kinds["suppressed"][0],
                 ssum[1] - kinds["suppressed"][1])
        what = "the four kinds and suppressed"
    else:
        ssum = ((summary.get("in_use") or {}).get("bytes"),
                (summary.get("in_use") or {}).get("blocks"))
        shown = got
        what = "summary.in_use"
    if ssum != got:
        problems.append("%s: %s add up to %s bytes in %s blocks, totals say"
                        " %s in %s" % ((label, what) + ssum + got))
    rsum = (sum(r.get("bytes", 0) for r in records),
            sum(r.get("blocks", 0) for r in records))
    if rsum != shown:
        problems.append("%s: records add up to %d bytes in %d blocks, "
                        "expected %s in %s" % ((label,) + rsum + shown))
    # Blocks from one stack are one record (valgrind merges them too).
    seen = {}
    for r in records:
        key = (r.get("kind"), tuple(f.get("pc") for f in r.get("stack") or []))
        seen[key] = seen.get(key, 0) + 1
    dups = sum(n - 1 for n in seen.values() if n > 1)
    if dups:
        problems.append("%s: %d records repeat another record's kind and "
                        "stack instead of being merged" % (label, dups))
    depth = vg["depth"]
    want = spec.procs.get(depth)
    if want and want["exit"] is not None:
        # exit=-N: killed by signal N
        want_exit = {"signal": -want["exit"]} if want["exit"] < 0 else \
            {"status": want["exit"]}
        if obj.get("exit") != want_exit:
            problems.append("%s: exit %s, expected %s" %
                            (label, obj.get("exit"), want_exit))
    check_records(label, records_of(obj), spec, depth, problems,
                  which="plain", dtv_exact=False)


def classified(obj):
    """Whether a process object carries the four kinds (else the agent
    does not classify yet: its summary has only "in_use")."""
    return all(k in (obj.get("summary") or {}) for k in KINDS)


def ht_kinds(obj):
    summary = obj.get("summary") or {}
    return {k: [(summary.get(k) or {}).get("bytes", 0),
                (summary.get(k) or {}).get("blocks", 0)]
            for k in SUMMARY_KINDS}


def show_kinds(kinds):
    if not kinds:
        return "no LEAK SUMMARY"
    return ", ".join("%s %d/%d" % ((k,) + tuple(kinds.get(k, (0, 0))))
                     for k in SUMMARY_KINDS)


def records_of(obj):
    return [dict(r, bytes=r.get("bytes", 0), blocks=r.get("blocks", 0),
                 stack=r.get("stack") or [], kind=r.get("kind"))
            for r in obj.get("records") or []]


def dtv_bytes(records):
    """{kind: bytes} of glibc's DTV blocks (see the module comment)."""
    out = {}
    for r in records:
        if any(base_name(f.get("function") or "") in DTV_FUNCS
               for f in r["stack"]):
            out[r["kind"]] = out.get(r["kind"], 0) + r["bytes"]
    return out


def record_increase(r):
    """(bytes, blocks) a record of an "increased" leak check grew by, from
    its "increase": {"bytes", "blocks"}; None when it has none."""
    inc = r.get("increase")
    if isinstance(inc, dict) and "bytes" in inc and "blocks" in inc:
        return inc["bytes"], inc["blocks"]
    return None


def check_checks(label, checks, spec, problems):
    """The @check directives against the leak checks seen ([{"records",
    "increase"?}] in order, None for one that could not be read)."""
    for n, kind, want_b, want_n, func in spec.checks:
        if n > len(checks):
            problems.append("%s: %d leak checks, expected at least %d" % (
                label, len(checks), n))
            continue
        c = checks[n - 1]
        if c is None:
            continue
        recs = [r for r in c["records"] if r["kind"] == kind]
        if "increase" in c and c["increase"]:    # valgrind's summary
            got = tuple(c["increase"].get(kind, (0, 0)))
        else:
            got = (sum(r["increase"]["bytes"] for r in recs),
                   sum(r["increase"]["blocks"] for r in recs))
        if got != (want_b, want_n):
            problems.append("%s: check %d: %s increased by %d bytes in %d "
                            "blocks, expected %d in %d" % (
                                label, n, kind, got[0], got[1], want_b,
                                want_n))
        if func:
            others = [r for r in recs if not names([r], func)]
            if others or not recs:
                problems.append("%s: check %d: %d %s records, %d without %s"
                                % (label, n, len(recs), kind, len(others),
                                   func))


def match_procs(vg, objs, problems):
    """Pairs valgrind's processes with heaptrail's process objects by
    depth and arguments: (heaptrail's, [(vg proc, ht proc, label)])."""
    ht_procs = with_depth([{"pid": o.get("pid"), "ppid": o.get("ppid"),
                            "args": list(o.get("command") or [])[1:],
                            "obj": o} for o in objs])
    pairs = []
    for v in with_depth(vg["procs"]):
        label = " ".join(["depth %d" % v["depth"]] + v["args"])
        cands = [h for h in ht_procs if h["depth"] == v["depth"]
                 and h["args"] == v["args"]]
        if len(cands) != 1:
            problems.append("%s: %d heaptrail processes match (pids %s)"
                            % (label, len(cands),
                               [h["pid"] for h in ht_procs]))
            continue
        pairs.append((v, cands[0], label))
    return ht_procs, pairs


def wrap(data):
    return data if isinstance(data, list) else [data]


def load_json_objects(path):
    try:
        with open(path) as f:
            return wrap(json.load(f))
    except OSError as e:
        raise Failure("no JSON from heaptrail: %s: %s" % (path, e.strerror))
    except ValueError as e:
        raise Failure("%s: not JSON: %s" % (path, e))


def with_depth(procs):
    """Adds "depth": how many ancestors of a process are in the list.
    An exec keeps the pid, so a pid may appear twice; depth follows ppid
    only."""
    pids = {p["pid"]: p for p in procs}

    def depth(p, seen=()):
        parent = pids.get(p["ppid"])
        if parent is None or parent is p or p["pid"] in seen:
            return 0
        return 1 + depth(parent, seen + (p["pid"],))
    for p in procs:
        p["depth"] = depth(p)
    return procs


# ---------------------------------------------------------------- heap dumps

ACCURACY_SITES = ("site_large", "site_medium", "site_small")
API_FUNCS = ("while_inactive", "kept_across_reset", "churn_before_reset",
             "after_reset")
CACHE_SIGNAL = 12   # SIGUSR2: kills the program if the agent ignores it

API_OUTPUT = """heaptrail_set_active(0) -> 1
heaptrail_set_active(1) -> 0
heaptrail_dump(path) -> 0
heaptrail_reset() -> 0
heaptrail_dump(NULL) -> 0
heaptrail_dump(bad path) -> negative
done: 9 blocks kept and freed
"""

MALLCTL_OUTPUT = """opt.prof read -> 0, true
prof.active read -> 0, true
prof.active = false -> 0
prof.active = true -> 0
prof.dump = file -> 0
prof.reset -> 0
prof.dump -> 0
prof.reset = 19 -> 0
prof.lg_sample read -> 0, 19
prof.dump = file -> 0
prof.no_such_name -> ENOENT
done: 9 blocks kept and freed
"""

# PREFIX.PID.SEQ.KIND.heap and PREFIX.PID.peak.heap
DUMP_NAME = re.compile(r"^(?P<prefix>.+?)\.(?P<pid>\d+)\.(?:(?P<seq>\d+)\."
                       r"(?P<kind>[a-z]+)|peak)\.heap$")
DUMP_KINDS = ("interval", "every", "signal", "api", "final")
# jeprof --text --show_bytes: flat flat% sum% cum cum% function
JEPROF_ROW = re.compile(r"^\s*(-?\d+)\s+\S+%\s+\S+%\s+(-?\d+)\s+\S+%\s+"
                        r"(.+?)\s*$")
# pprof -top -unit=B: the same columns, bytes with a "B" (0 without)
PPROF_ROW = re.compile(r"^\s*(-?\d+)B?\s+\S+%\s+\S+%\s+(-?\d+)B?\s+\S+%\s+"
                       r"(.+?)\s*$")


def list_dumps(outdir, problems, pid, prefix="heaptrail"):
    """The dumps in outdir: {"seq": [{"path", "seq", "kind", "pid"}] in
    SEQ order, "peak": [...]}; names that break the scheme (SEQ under 4
    digits or repeated, an unknown kind, another pid, leftovers such as
    temporary files) are problems."""
    seq, peak, seen = [], [], set()
    try:
        names = sorted(os.listdir(outdir))
    except OSError as e:
        problems.append("%s: %s" % (outdir, e.strerror))
        return {"seq": seq, "peak": peak}
    for name in names:
        m = DUMP_NAME.match(name)
        path = os.path.join(outdir, name)
        if not m:
            if not re.match(r"^[^.]+\.\d+\.(leaks|timeline)$", name):
                problems.append("unexpected file %s in the output directory"
                                % name)
            continue
        if m.group("prefix") != prefix:
            problems.append("%s: a dump named %s.*, expected %s.*" % (
                name, m.group("prefix"), prefix))
            continue
        d = {"path": path, "pid": int(m.group("pid")), "kind": "peak",
             "seq": None}
        if pid is not None and d["pid"] != pid:
            problems.append("%s: pid %d, the program's is %d" % (
                name, d["pid"], pid))
        if m.group("seq") is None:
            peak.append(d)
            continue
        d["seq"], d["kind"] = int(m.group("seq")), m.group("kind")
        if len(m.group("seq")) < 4:
            problems.append("%s: SEQ has fewer than 4 digits" % name)
        if d["kind"] not in DUMP_KINDS:
            problems.append("%s: unknown kind %r" % (name, d["kind"]))
        if d["seq"] in seen:
            problems.append("%s: SEQ %d used twice" % (name, d["seq"]))
        seen.add(d["seq"])
        seq.append(d)
    seq.sort(key=lambda d: d["seq"])
    return {"seq": seq, "peak": peak}


def read_dump(path, problems, period=None):
    """heapprof.parse(path), its problems (at most 3) added to problems;
    None when it is not a dump at all."""
    name = os.path.basename(path)
    try:
        prof = heapprof.parse(path)
    except (OSError, heapprof.FormatError) as e:
        problems.append("%s: %s" % (name, e))
        return None
    for p in prof.problems[:3]:
        problems.append("%s: %s" % (name, p))
    if period is not None and prof.period != period:
        problems.append("%s: header says S=%s, expected %d" % (
            name, prof.period, period))
    return prof


def read_timeline(path, problems):
    """[(ms, live bytes, live blocks, allocated bytes, rss)]: a '#' header
    line first, then rows of five integers, time increasing, allocated
    bytes never decreasing; None when the file is missing."""
    name = os.path.basename(path)
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except OSError as e:
        problems.append("%s: %s" % (name, e.strerror))
        return None
    if not lines[0].startswith("#"):
        problems.append("%s: first line %r is not a '#' header" % (
            name, lines[0][:80]))
    rows = []
    for i, line in enumerate(lines[1:], 2):
        if not line.strip() or line.startswith("#"):
            continue
        w = line.split()
        if len(w) != 5 or not all(re.match(r"^\d+$", x) for x in w):
            problems.append("%s:%d: %r is not five integers" % (name, i,
                                                                line[:80]))
            return rows
        row = tuple(int(x) for x in w)
        if rows and row[0] <= rows[-1][0]:
            problems.append("%s:%d: time %d after %d" % (name, i, row[0],
                                                         rows[-1][0]))
        if rows and row[3] < rows[-1][3]:
            problems.append("%s:%d: bytes allocated fall from %d to %d" % (
                name, i, rows[-1][3], row[3]))
        rows.append(row)
    if not rows:
        problems.append("%s: no rows" % name)
    return rows


def accuracy_truth(stdout):
    """prof_accuracy's own account: {site: (bytes, blocks)}."""
    truth = {}
    for line in stdout.decode().split("\n"):
        m = re.match(r"^(\w+) (\d+) bytes in (\d+) blocks", line)
        if m:
            truth[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    if not all(f in truth for f in ACCURACY_SITES + ("scratch",)):
        raise Failure("prof_accuracy printed %r" % short(stdout))
    return truth


def check_shares(label, est, truth, problems, total=True):
    """Each site's share of the three within 3 points of the truth; with
    total, their sum within 5 % of the true bytes."""
    true_sum = sum(truth[f][0] for f in ACCURACY_SITES)
    got_sum = sum(est[f] for f in ACCURACY_SITES)
    if got_sum <= 0:
        problems.append("%s: nothing at the three sites" % label)
        return
    for f in ACCURACY_SITES:
        share = 100.0 * est[f] / got_sum
        want = 100.0 * truth[f][0] / true_sum
        if abs(share - want) > 3:
            problems.append("%s: %s %.1f %% of the sites' bytes, true %.1f %%"
                            % (label, f, share, want))
    if total and abs(got_sum - true_sum) > 0.05 * true_sum:
        problems.append("%s: the sites hold %d bytes (estimated), true %d: "
                        "off by %.1f %%" % (label, got_sum, true_sum,
                                            100.0 * (got_sum / true_sum - 1)))


def check_lines(r, want):
    """A prof_api/prof_mallctl run: status 0 and the expected results."""
    problems = []
    if r["status"] != 0:
        problems.append("status %d: %s" % (r["status"], short(r["stderr"])))
    got = r["stdout"].decode("utf-8", "replace").split("\n")
    exp = want.split("\n")
    for i in range(max(len(got), len(exp))):
        g = got[i] if i < len(got) else "<end>"
        e = exp[i] if i < len(exp) else "<end>"
        if g != e:
            problems.append("said %r, expected %r" % (g, e))
    return problems


# ---------------------------------------------------------------- valgrind

VG_PARSER = 3   # bump when parse_vg_log's output changes: invalidates cache
VG_PREFIX = re.compile(r"^==(\d+)== ?(.*)$")
VG_RECORD = re.compile(r"^([\d,]+)(?: \(([\d,]+) direct, ([\d,]+) indirect\))?"
                       r" bytes in ([\d,]+) blocks are (.+?) in loss record")
VG_FRAME = re.compile(r"^\s*(?:at|by) 0x([0-9A-Fa-f]+): (.*?)"
                      r"(?: \(([^()]*)\))?$")
# A leak check's change since the previous one: "384 (+144) bytes".
VG_DELTA = re.compile(r" \(([+-][\d,]+)\)")
VG_KIND = re.compile(r"^\s*(definitely lost|indirectly lost|possibly lost|"
                     r"still reachable|suppressed): ([\d,]+) bytes in "
                     r"([\d,]+) blocks")
VG_HEURISTIC = re.compile(r"^\s*(\w+)\s*: ([\d,]+) bytes in ([\d,]+) blocks")


def num(s):
    return int(s.replace(",", ""))


def parse_vg_logs(logdir):
    """One entry per valgrind log that reached exit (has a heap summary)."""
    procs = []
    for fname in sorted(os.listdir(logdir)):
        m = re.match(r"^vg\.(\d+)$", fname)
        if not m:
            continue
        with open(os.path.join(logdir, fname), errors="replace") as f:
            proc = parse_vg_log(int(m.group(1)), f.read())
        if proc:
            procs.append(proc)
    return procs


def parse_vg_log(pid, text):
    """{"pid", "ppid", "args", "in_use", "usage", "records", "kinds",
    "heuristics", "checks"}: records and kinds (LEAK SUMMARY, all zero
    when every block was freed) are those of the check at exit; checks
    are the leak checks the program asked for while it ran, in order,
    each {"records", "kinds", "increase"} where increase is each kind's
    change since the previous check."""
    proc = {"pid": pid, "ppid": None, "args": [], "in_use": None,
            "usage": None, "records": [], "kinds": None, "heuristics": {},
            "checks": []}
    check = None        # the leak check being read
    at_exit = False     # past HEAP SUMMARY: the check at exit
    record = None
    in_heuristics = False

    def new_check():
        return {"records": [], "kinds": {}, "increase": {}}

    for raw in text.split("\n"):
        m = VG_PREFIX.match(raw)
        if not m:
            continue
        line = m.group(2)
        deltas = [num(d) for d in VG_DELTA.findall(line)]
        line = VG_DELTA.sub("", line)
        if record is not None:
            fm = VG_FRAME.match(line)
            if fm:
                fn, loc = fm.group(2), fm.group(3) or ""
                frame = {"pc": "0x" + fm.group(1).lower(), "function": fn,
                         "file": None, "line": None, "module": None}
                lm = re.match(r"^(.*):(\d+)$", loc)
                if loc.startswith("in "):
                    frame["module"] = loc[3:]
                elif lm:
                    frame["file"], frame["line"] = lm.group(1), int(lm.group(2))
                record["stack"].append(frame)
                continue
            record = None
        if line.startswith("Command: "):
            proc["args"] = line[len("Command: "):].split()[1:]
        elif line.startswith("Parent PID: "):
            proc["ppid"] = int(line[len("Parent PID: "):])
        elif line.startswith("HEAP SUMMARY:"):
            at_exit = True
            check = new_check()
        elif "in use at exit:" in line:
            um = re.search(r"in use at exit: ([\d,]+) bytes in ([\d,]+) "
                           r"blocks", line)
            proc["in_use"] = [num(um.group(1)), num(um.group(2))]
        elif "total heap usage:" in line:
            um = re.search(r"([\d,]+) allocs, ([\d,]+) frees, ([\d,]+) "
                           r"bytes allocated", line)
            proc["usage"] = [num(g) for g in um.groups()]
        elif "All heap blocks were freed" in line and at_exit:
            proc["kinds"] = {k: [0, 0] for k in SUMMARY_KINDS}
        elif "of which reachable via heuristic" in line:
            in_heuristics = True
        elif VG_KIND.match(line):
            km = VG_KIND.match(line)
            kind = VG_KINDS[km.group(1)]
            if check is None:
                check = new_check()
            check["kinds"][kind] = [num(km.group(2)), num(km.group(3))]
            if len(deltas) == 2:
                check["increase"][kind] = deltas
            in_heuristics = False
            if kind == "suppressed":    # the summary's last line
                if at_exit:
                    proc["kinds"] = check["kinds"]
                    proc["records"] = check["records"]
                else:
                    proc["checks"].append(check)
                check = None
        elif in_heuristics and VG_HEURISTIC.match(line) and at_exit:
            hm = VG_HEURISTIC.match(line)
            proc["heuristics"][hm.group(1)] = [num(hm.group(2)),
                                               num(hm.group(3))]
        else:
            rm = VG_RECORD.match(line)
            if rm:
                own = rm.group(2) or rm.group(1)
                record = {"bytes": num(own), "blocks": num(rm.group(4)),
                          "kind": VG_KINDS.get(rm.group(5), rm.group(5)),
                          "stack": []}
                if deltas:
                    # total, [direct, indirect,] blocks
                    record["increase"] = {
                        "bytes": deltas[1] if rm.group(2) else deltas[0],
                        "blocks": deltas[-1]}
                if check is None:
                    check = new_check()
                check["records"].append(record)
    return proc if proc["in_use"] is not None else None


# ---------------------------------------------------------------- main

def collect_tests(suite):
    """[(name, thunk)] in the order they are scheduled."""
    tests = []
    unit_dir = os.path.join(suite.build, "tests")
    if os.path.isdir(unit_dir):
        for f in sorted(os.listdir(unit_dir)):
            p = os.path.join(unit_dir, f)
            if os.path.isfile(p) and os.access(p, os.X_OK):
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
                 "cancel-in-dump", "stop-transparent") + HOST_TESTS:
        tests.append(("cli:" + name, lambda n=name: suite.test_cli(n)))
    # The long ones first, so the two workers end together.
    for name in ("accuracy", "cache", "run-flags", "timeline", "transparent",
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
    """Tests from tests/analyze/test_*.py: each module defines
    collect(suite) -> [(name, thunk)], a thunk returning (problems, details)
    or raising Skip/Failure, as the tests above do. Modules import this
    file as `run_tests` for Failure, Skip, run() and the Suite."""
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
    pdir = os.path.join(here, "analyze")
    if not os.path.isdir(pdir):
        return tests
    if pdir not in sys.path:
        sys.path.insert(0, pdir)   # for their shared common.py
    for f in sorted(os.listdir(pdir)):
        if not (f.startswith("test_") and f.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(f[:-3], os.path.join(pdir, f))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        tests += mod.collect(suite)
    return tests


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
    args = ap.parse_args()

    started = time.time()
    suite = Suite(args)
    reporter = Reporter(args.verbose)
    tests = collect_tests(suite)
    if args.k:
        tests = [t for t in tests if any(k in t[0] for k in args.k)]
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
