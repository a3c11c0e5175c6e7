#!/usr/bin/env python3
"""The hostile-host suite (issue 11, "Never hurt the host"): programs
written the way daemons, thread pools and test suites are, each run bare
and under heaptrail, which must not change what they do.

    python3 tests/hostile/run.py --build build [-k SUBSTR] [-v] [-j N]

`make test` runs it too: tests/run_tests.py imports this file and calls
collect(suite), so its tests share that runner's PASS/FAIL/SKIP lines and
its final count.

Programs live in tests/hostile/progs/ (C, or C++ for .cc), built with
frame pointers and -O1.  Each describes itself in its header comment, in
the annotation language of tests/runner/annotations.py (a key not below
is an error):

    @kinds DEPTH [case=CASE] [KIND=BYTES/BLOCKS ...]
        heaptrail's leak summary for the process at DEPTH (0: the one
        started, 1: its forked child...) in exact mode, less glibc's
        per-thread blocks (program_kinds); a kind not named must be 0/0
        (suppressed included); with case=, for that @case only (it
        replaces the line without case= for that depth)
    @vg                  the @kinds of depth 0 are also checked against
                         valgrind memcheck's LEAK SUMMARY (the oracle),
                         cached by binary hash in BUILD/hostile/vgcache
    @exit N / (default 0)  the bare run's exit status
    @killed              the bare run dies of a signal (@case decides
                         which); heaptrail's report must name that signal
    @case NAME ARGS...   one set of tests per case, with these arguments
    @modes M ...         which heaptrail runs (default: exact sample
                         leaks; "none": only the runner's own cases)
    @leaks-calls         runs long enough that at least one `heaptrail
                         leaks PID` call must succeed in the leaks mode
    @leaks-refused       every `heaptrail leaks PID` call must fail
                         (non-zero status) and the program survive
    @max-extra SECONDS   heaptrail run may take at most this much longer
                         than the bare run (exact mode)
    @ci                  also run with --error-exitcode=42: the program
                         leaks, so the run must not exit 0 (a report
                         that cannot be written must fail CI, not pass it)
    @unwritable          the program puts its output directory out of the
                         agent's reach before exit (chroot, setuid drop,
                         RLIMIT_NOFILE 3): no report is expected, but the
                         agent must say so ("cannot write the leak
                         report") and the @ci run must exit 42
    @root                needs root (SKIP otherwise, unless CI=true)
    @lib SRC NAME.so     a shared library built beside the program
    @helper SRC NAME [static] [setuid]  another program built beside it
                         (setuid: owned by 65534 with the set-user-ID bit)
    @timeout SECONDS     per run (default 10)
    @env NAME=VALUE      in the environment of every run, bare included
    @every INTERVAL      the sample mode's --every (default 50ms)

Per program and case, the tests (all compare with the bare run's stdout,
exit status or death signal, and fail on a timeout, which kills the whole
process group):
  hostile:PROG[CASE]:exact    heaptrail run -o OUT --json J: same
                    behaviour; the @kinds; each process's summary adds up
                    to its in-use totals
  hostile:PROG[CASE]:sample   --every 50ms (or @every) --timeline 10 (a profiling
                    run's default, --sample auto: S from 8k, raised with
                    the samples thinned as the heap grows): same
                    behaviour, a timeline was written, and no heap
                    error (the sampled blocks' mismatched and double
                    frees, which the quarantine finds: the programs
                    make none)
  hostile:PROG[CASE]:leaks    exact, with `heaptrail leaks --json PID`
                    calls every 100 ms while it runs: same behaviour,
                    the @kinds at exit, @leaks-calls / @leaks-refused
  hostile:PROG[CASE]:ci       for @ci programs (above)
  hostile:PROG[CASE]:vg  for @vg programs: valgrind's LEAK SUMMARY of
                    the root process equals @kinds (checks the program)
and the runner's own cases, on simple_leak.c and the others:
  hostile:run:preload-jemalloc[ORDER], ...-tcmalloc[ORDER]  another
                    allocator preloaded too, before and after the agent:
                    same output; after it (and under `heaptrail run`) the
                    right figures; before it, a warning on stderr and in
                    the report that allocations are not seen
  hostile:run:full-disk, :readonly-dir, :removed-dir  the report cannot
                    be written: same program output, and with
                    --error-exitcode the run does not exit 0
  hostile:run:file-modes  every file the agent writes (report, leak
                    check, dumps, timeline) is 0600
  hostile:run:symlinks  symlinks planted at every name the agent writes:
                    none is followed, the victim file is unchanged
  hostile:run:sigkill-dump  SIGKILL in the middle of a large dump: every
                    file named like a dump or report is whole
  hostile:run:exit-race-loop  exit_main_race 30 times (main returns while
                    a thread calls exit()): a report every time
  hostile:run:timeout-term  `timeout -s TERM 1 heaptrail run -- PROG`,
                    with --foreground, and kill -TERM of heaptrail run
                    alone: the program dies too, promptly
  hostile:run:pipeline-sigpipe  `sh -c 'seq 1 50000 | sort | uniq -c |
                    sort -rn | head -3'`: output and status as bare, a
                    report for each process, sort -rn's killed by 13
  hostile:run:default-dir  ./heaptrail-PROG-PID directories planted
                    (another owner, 0777) for the next 400 pids: the run
                    without -o writes into none of them
  hostile:run:bad-options  bad --sample/--every/--interval/--signal/
                    --timeline/--depth values: one-line error, non-zero
                    exit, the program never started
  hostile:run:long-values  100 KB bad values (--alloc-fn, --sample, an
                    unknown option; run, top, the agent alone) and one
                    with a newline: one short line saying how long
  hostile:run:signal-11  --signal 11: refused with one line before the
                    program starts (a handler on a fault signal would turn
                    a crash into an endless loop of dumps)
  hostile:run:stale-dir  -o DIR holding an earlier run's report and a
                    garbage .leaks file: either a clear refusal before
                    the program starts, or only this run's report
  hostile:run:relative-output  the agent alone with a relative output=
                    (and prefix=, and none) in a program that changes
                    directory before exit: its files go where the options
                    said at start-up
  hostile:run:shared-dir  two runs started together into one empty -o
                    DIR: each reports only its own process (the clean
                    one passes --error-exitcode)
  hostile:run:analyzers-devzero  the analyzer commands on /dev/zero and
                    on a FIFO fail promptly instead of reading for ever
Python standard library only.
"""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROGS = os.path.join(HERE, "progs")
E2E_PROGS = os.path.join(ROOT, "tests", "e2e", "progs")

if "run_tests" not in sys.modules:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    sys.dont_write_bytecode = True
    import run_tests  # noqa: E402
else:
    run_tests = sys.modules["run_tests"]

Failure = run_tests.Failure
Skip = run_tests.Skip
from runner import annotations  # noqa: E402

CFLAGS = ["-g", "-O1", "-fno-omit-frame-pointer", "-Wall", "-I", PROGS,
          "-I", E2E_PROGS, "-I", os.path.join(ROOT, "include")]
DEFAULT_TIMEOUT = 10
LEAKS_CALL_TIMEOUT = 3
KINDS = run_tests.SUMMARY_KINDS
CI = os.environ.get("CI") == "true"

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


# ---------------------------------------------------------------- specs

# the @ keys of this suite's programs (the language: runner/annotations.py)
KEYS = ("kinds", "vg", "exit", "killed", "case", "modes", "leaks-calls", "leaks-refused",
        "max-extra", "ci", "unwritable", "root", "lib", "helper", "env", "timeout", "every")


class Prog:
    def __init__(self, path):
        self.path = path
        self.src = os.path.basename(path)
        self.name = re.sub(r"\.(c|cc)$", "", self.src)
        self.cxx = path.endswith(".cc")
        self.kinds = {}          # depth -> {kind: [bytes, blocks]}
        self.vg = False
        self.exit = 0
        self.killed = False
        self.cases = []          # [(name, args)]
        self.modes = ["exact", "sample", "leaks"]
        self.leaks_calls = False
        self.leaks_refused = False
        self.max_extra = None
        self.ci = False
        self.unwritable = False
        self.root = False
        self.libs = []
        self.helpers = []        # [(src, name, flags)]
        self.timeout = DEFAULT_TIMEOUT
        self.env = {}
        self.every = "50ms"
        for key, rest, _ in annotations.read(path, KEYS):
            if key == "kinds":
                depth, case, got = annotations.kinds(rest, path)
                want = {k: [0, 0] for k in KINDS}
                want.update({k: list(v) for k, v in got.items()})
                self.kinds[(case, depth)] = want
            elif key == "vg":
                self.vg = True
            elif key == "exit":
                self.exit = int(rest[0])
            elif key == "killed":
                self.killed = True
            elif key == "case":
                self.cases.append((rest[0], rest[1:]))
            elif key == "modes":
                self.modes = [] if rest == ["none"] else rest
            elif key == "leaks-calls":
                self.leaks_calls = True
            elif key == "leaks-refused":
                self.leaks_refused = True
            elif key == "max-extra":
                self.max_extra = float(rest[0])
            elif key == "ci":
                self.ci = True
            elif key == "unwritable":
                self.unwritable = True
            elif key == "root":
                self.root = True
            elif key == "lib":
                self.libs.append((rest[0], rest[1]))
            elif key == "helper":
                self.helpers.append((rest[0], rest[1], rest[2:]))
            elif key == "env":
                k, v = rest[0].split("=", 1)
                self.env[k] = v
            elif key == "timeout":
                self.timeout = int(rest[0])
            elif key == "every":
                self.every = rest[0]
        if not self.cases:
            self.cases = [("", [])]

    def want_kinds(self, case):
        """{depth: {kind: [bytes, blocks]}} expected for case."""
        out = {d: w for (c, d), w in self.kinds.items() if c is None}
        out.update({d: w for (c, d), w in self.kinds.items() if c == case})
        return out


GLIBC_THREAD_FUNCS = ("allocate_dtv", "_dl_allocate_tls", "_dl_allocate_tls_init")


def program_kinds(kinds, records):
    """The summary {kind: [bytes, blocks]} less glibc's per-thread blocks
    (each live thread's DTV, whose size depends on how many modules have
    TLS, so it differs under heaptrail): the figures a program states
    leave them out, under valgrind and heaptrail alike."""
    out = {k: list(kinds.get(k) or (0, 0)) for k in KINDS}
    for r in records:
        if r.get("kind") in out and any(
                run_tests.base_name(f.get("function") or "")
                in GLIBC_THREAD_FUNCS for f in r.get("stack") or []):
            out[r["kind"]][0] -= r.get("bytes", 0)
            out[r["kind"]][1] -= r.get("blocks", 0)
    return out


def load_progs():
    progs = {}
    for f in sorted(os.listdir(PROGS)):
        if not f.endswith((".c", ".cc")):
            continue
        with open(os.path.join(PROGS, f)) as fh:
            if "int main" not in fh.read():
                continue      # a library
        p = Prog(os.path.join(PROGS, f))
        progs[p.name] = p
    for p in list(progs.values()):    # helpers are built by their program
        for src, _, _ in p.helpers:
            progs.pop(re.sub(r"\.(c|cc)$", "", src), None)
    return progs


# ---------------------------------------------------------------- running

def run_group(cmd, cwd, timeout, env=None, stdin=b""):
    """Runs cmd in its own session; on timeout kills the whole group and
    raises Failure.  Returns (status, stdout, stderr, seconds)."""
    start = time.time()
    p = subprocess.Popen(cmd, cwd=cwd, env=env or run_tests.RUN_ENV,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        raise Failure("hung: no exit after %ds: %s" % (
            timeout, " ".join(os.path.basename(c) for c in cmd[:6])))
    return p.returncode, out, err, time.time() - start


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        p.communicate(timeout=10)
    except Exception:
        pass


def describe(rc):
    if rc is None:
        return "no status"
    if rc < 0:
        try:
            return "killed by %s" % signal.Signals(-rc).name
        except ValueError:
            return "killed by signal %d" % -rc
    return "exit %d" % rc


def same_behaviour(label, got, bare, problems, err=b"", keep=None):
    """got, bare: (status, stdout); err: the run's stderr, whose last
    lines the failure quotes (the program's own complaint, if it made
    one), and which is kept whole in the file keep (when given)."""
    if keep:
        with open(keep, "wb") as f:
            f.write(err)
    if got[0] != bare[0]:
        # the program's own lines: before heaptrail's report, which ends it
        own = (b"\n" + err).split(b"\n== ")[0].splitlines()
        own = [l for l in own if l.strip() and not l.startswith(b"heaptrail:")]
        tail = b"\n".join(own[-3:])
        problems.append("%s: %s, bare %s%s%s" % (
            label, describe(got[0]), describe(bare[0]),
            " (stderr ends: %s)" % run_tests.short(tail, 300) if tail else "",
            " (all of it: %s)" % keep if keep else ""))
    if got[1] != bare[1]:
        problems.append("%s: stdout differs from bare: %s" % (
            label, run_tests.first_difference(got[1], bare[1])))


def child_with_agent(root_pid, deadline):
    """The pid of the first descendant of root_pid with the agent mapped."""
    while time.time() < deadline:
        try:
            with open("/proc/%d/task/%d/children" % (root_pid, root_pid)) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            return None
        for k in kids:
            try:
                with open("/proc/%d/maps" % k) as f:
                    if "libheaptrail" in f.read():
                        return k
            except OSError:
                pass
        time.sleep(0.01)
    return None


def catches(pid, sig):
    """Whether pid has a handler for sig (SigCgt in /proc/PID/status)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            m = re.search(r"^SigCgt:\s*([0-9a-f]+)$", f.read(), re.M)
        return bool(m) and bool(int(m.group(1), 16) >> (sig - 1) & 1)
    except OSError:
        return False


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ", 1)[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


class Hostile:
    def __init__(self, suite):
        self.suite = suite
        self.build = suite.build
        self.heaptrail = suite.heaptrail
        self.dir = os.path.join(self.build, "hostile")
        self.progs = load_progs()
        self.builds = run_tests.Once()
        self.bares = run_tests.Once()
        self.vgs = run_tests.Once()

    # -- building

    def bin(self, name):
        return os.path.join(self.dir, "bin", name)

    def compile(self, cmd, out, inputs):
        # every header a program may include: its own and the e2e ones
        # hostile.h pulls in (kinds.h, common.h)
        headers = sorted(os.path.join(d, f) for d in (PROGS, run_tests.PROGS)
                         for f in os.listdir(d) if f.endswith(".h"))
        key = run_tests.sha256_files(inputs + headers, json.dumps(
            [cmd, run_tests.compiler_id(cmd)]))
        stamp = out + ".stamp"
        if os.path.exists(out) and os.path.exists(stamp):
            with open(stamp) as f:
                if f.read() == key:
                    return
        os.makedirs(os.path.dirname(out), exist_ok=True)
        rc, _, err = run_tests.run(cmd, env=os.environ, timeout=300)
        if rc != 0:
            raise Failure("build failed: %s\n%s" % (
                " ".join(cmd), run_tests.short(err, 2000)))
        with open(stamp, "w") as f:
            f.write(key)

    def build_prog(self, prog):
        def do():
            cc = self.suite.cxx if prog.cxx else self.suite.cc
            for src, lib in prog.libs:
                self.compile([self.suite.cc] + CFLAGS + [
                    "-fPIC", "-shared", "-o", self.bin(lib),
                    os.path.join(PROGS, src)], self.bin(lib),
                    [os.path.join(PROGS, src)])
            for src, name, flags in prog.helpers:
                s = os.path.join(PROGS, src)
                extra = ["-static"] if "static" in flags else []
                self.compile([self.suite.cc] + CFLAGS + extra +
                             ["-o", self.bin(name), s], self.bin(name), [s])
                if "setuid" in flags:
                    os.chown(self.bin(name), 65534, 65534)
                    os.chmod(self.bin(name), 0o4755)
            out = self.bin(prog.name)
            self.compile([cc] + CFLAGS + ["-o", out, prog.path, "-pthread",
                                          "-ldl"], out, [prog.path])
            return out
        return self.builds.get(prog.name, do)

    def work(self, label):
        return run_tests.fresh_dir(os.path.join(self.dir, "work",
                                                label.replace("/", "_")))

    @staticmethod
    def env(prog):
        return dict(run_tests.RUN_ENV, **prog.env)

    def check_root(self, prog):
        if prog.root and os.geteuid() != 0:
            if CI:
                raise Failure("needs root, and CI=true")
            raise Skip("needs root")

    # -- the runs

    def bare(self, prog, case):
        def do():
            self.check_root(prog)
            binary = self.build_prog(prog)
            w = self.work("%s.%s.bare" % (prog.name, case[0]))
            rc, out, err, secs = run_group([binary] + case[1], w,
                                           prog.timeout,
                env=self.env(prog))
            want = prog.exit
            if prog.killed:
                if rc >= 0:
                    raise Failure("bare run: %s, expected a death by signal"
                                  " (%s)" % (describe(rc), run_tests.short(err)))
            elif rc != want:
                raise Failure("bare run: %s, expected exit %d (%s)" % (
                    describe(rc), want, run_tests.short(err)))
            return rc, out, secs
        return self.bares.get((prog.name, case[0]), do)

    def ht_cmd(self, outdir, jpath, extra, prog, case):
        # HT_E2E_GUARD=SIZE: with --guard SIZE (docs/testing.md)
        guard = os.environ.get("HT_E2E_GUARD")
        return [self.heaptrail, "run", "-o", outdir, "--json", jpath] + \
            (["--guard", guard] if guard else []) + \
            list(extra) + ["--", self.build_prog(prog)] + case[1]

    def check_kinds(self, label, jpath, prog, case, problems, details):
        """The @kinds against heaptrail's JSON, plus the consistency of
        each process's totals and summary."""
        if not os.path.exists(jpath):
            if not prog.unwritable:
                problems.append("%s: no JSON report written" % label)
            return
        objs = run_tests.load_json_objects(jpath)
        procs = run_tests.with_depth([{"pid": o.get("pid"),
                                       "ppid": o.get("ppid"), "obj": o}
                                      for o in objs])
        for p in procs:
            o = p["obj"]
            if not run_tests.classified(o):
                continue
            got = run_tests.ht_kinds(o)
            details.append("%s: pid %s depth %d: %s" % (
                label, p["pid"], p["depth"], run_tests.show_kinds(got)))
            tot = o.get("totals") or {}
            s_b = sum(got[k][0] for k in KINDS)
            s_n = sum(got[k][1] for k in KINDS)
            if (s_b, s_n) != (tot.get("in_use_bytes"),
                              tot.get("in_use_blocks")):
                problems.append("%s: pid %s: the leak summary adds up to "
                                "%d/%d, in use at exit %s/%s" % (
                                    label, p["pid"], s_b, s_n,
                                    tot.get("in_use_bytes"),
                                    tot.get("in_use_blocks")))
        for depth, want in sorted(prog.want_kinds(case[0]).items()):
            at = [p for p in procs if p["depth"] == depth]
            if not at:
                problems.append("%s: no report of a process at depth %d" %
                                (label, depth))
                continue
            for p in at:
                o = p["obj"]
                if not run_tests.classified(o):
                    problems.append("%s: pid %s not classified" % (
                        label, p["pid"]))
                    continue
                got = program_kinds(run_tests.ht_kinds(o),
                                    run_tests.records_of(o))
                bad = ["%s %d/%d (want %d/%d)" % (k, got[k][0], got[k][1],
                                                  want[k][0], want[k][1])
                       for k in KINDS if got[k] != want[k]]
                if bad:
                    problems.append("%s: depth %d: %s" % (label, depth,
                                                           ", ".join(bad)))
                if prog.killed and depth == 0:
                    ex = o.get("exit") or {}
                    bare_rc = self.bare(prog, case)[0]
                    if ex.get("signal") != -bare_rc:
                        problems.append("%s: report not marked as killed by"
                                        " signal %d, as the bare run was "
                                        "(exit %s)" % (
                                            label, -bare_rc,
                                            json.dumps(o.get("exit"))))

    def check_modes(self, label, outdir, problems):
        """Every file the run left is the owner's alone."""
        if not os.path.isdir(outdir):
            return
        for f in sorted(os.listdir(outdir)):
            st = os.lstat(os.path.join(outdir, f))
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
                problems.append("%s: %s has mode %03o, expected 0600" % (
                    label, f, st.st_mode & 0o777))

    def test_mode(self, prog, case, mode):
        problems, details = [], []
        bare_rc, bare_out, bare_secs = self.bare(prog, case)
        label = mode
        w = self.work("%s.%s.%s" % (prog.name, case[0], mode))
        outdir, jpath = os.path.join(w, "out"), os.path.join(w, "out.json")
        if mode == "exact":
            rc, out, err, secs = run_group(
                self.ht_cmd(outdir, jpath, [], prog, case), w, prog.timeout,
                env=self.env(prog))
            same_behaviour(label, (rc, out), (bare_rc, bare_out), problems,
                           err, os.path.join(w, "stderr"))
            self.check_kinds(label, jpath, prog, case, problems, details)
            if prog.max_extra is not None and secs - bare_secs > prog.max_extra:
                problems.append("%s: took %.1fs, bare %.1fs (at most +%.1fs)" %
                                (label, secs, bare_secs, prog.max_extra))
        elif mode == "sample":
            rc, out, err, secs = run_group(self.ht_cmd(
                outdir, jpath, ["--every", prog.every, "--timeline", "10"], prog, case),
                w, prog.timeout,
                env=self.env(prog))
            same_behaviour(label, (rc, out), (bare_rc, bare_out), problems,
                           err, os.path.join(w, "stderr"))
            if not (os.path.isdir(outdir) and any(
                    f.endswith(".timeline") for f in os.listdir(outdir))):
                problems.append("%s: no timeline written" % label)
            if os.path.exists(jpath):
                errors = [(o.get("pid"), o.get("error_summary"))
                          for o in run_tests.load_json_objects(jpath)
                          if isinstance(o, dict) and
                          (o.get("error_summary") or {}).get("errors")]
                if errors:
                    problems.append("%s: heap errors in a program that makes "
                                    "none: %s" % (label, errors))
        elif mode == "leaks":
            rc, out, err, calls = self.run_with_leaks(
                self.ht_cmd(outdir, jpath, ["-q"], prog, case), w,
                prog.timeout, problems, env=self.env(prog))
            same_behaviour(label, (rc, out), (bare_rc, bare_out), problems,
                           err, os.path.join(w, "stderr"))
            ok = [c for c in calls if c[0] == 0]
            details.append("leaks calls: %s" % ", ".join(
                describe(c[0]) if c[0] is not None else "no answer"
                for c in calls))
            if prog.leaks_refused:
                if not calls:
                    problems.append("no `heaptrail leaks` call was made "
                                    "while the program ran")
                if ok:
                    problems.append("`heaptrail leaks` succeeded %d time(s)"
                                    " on a program whose dispositions are "
                                    "SIG_DFL" % len(ok))
            elif prog.leaks_calls and not ok:
                problems.append("no `heaptrail leaks` call succeeded (%s)" % (
                    "; ".join(run_tests.short(c[1], 120) for c in calls[:2])
                    or "none made"))
            for c in ok:
                try:
                    json.loads(c[2])
                except ValueError:
                    problems.append("`heaptrail leaks --json` printed no "
                                    "JSON: %s" % run_tests.short(c[2]))
                    break
            if rc == bare_rc:
                self.check_kinds(label, jpath, prog, case, problems, details)
        elif mode == "ci":
            rc, out, err, secs = run_group(
                self.ht_cmd(outdir, jpath, ["--error-exitcode=42"], prog,
                            case), w, prog.timeout,
                env=self.env(prog))
            if out != bare_out:
                problems.append("ci: stdout differs from bare: " +
                                run_tests.first_difference(out, bare_out))
            if rc == 0:
                problems.append("ci: --error-exitcode=42 on a leaking "
                                "program exited 0 (%s)" % run_tests.short(err))
            elif rc == 42:
                if prog.unwritable and b"cannot write the leak report" not in err:
                    problems.append("ci: exit 42 but the agent did not say "
                                    "why: %s" % run_tests.short(err))
                self.check_kinds(label, jpath, prog, case, problems, details)
        return problems, details

    def run_with_leaks(self, cmd, cwd, timeout, problems, env=None):
        """Runs cmd (heaptrail run) and calls `heaptrail leaks --json PID`
        on the traced program every 100 ms while it lives, the first once
        the agent has started (its constructor has installed the handler
        of the default leak_check_signal; or after 0.5 s: a program may
        reset it at once).  Returns (status, stdout, stderr, [(status,
        stderr, stdout)])."""
        sig = signal.SIGRTMAX - 2
        p = subprocess.Popen(cmd, cwd=cwd, env=env or run_tests.RUN_ENV,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        import threading
        chunks = {}

        def drain(name, f):
            chunks[name] = f.read()
        readers = [threading.Thread(target=drain, args=(n, f))
                   for n, f in (("out", p.stdout), ("err", p.stderr))]
        for t in readers:
            t.start()
        deadline = time.time() + timeout
        calls = []
        try:
            pid = child_with_agent(p.pid, deadline)
            ready = time.time() + 0.5
            while pid and time.time() < ready and not catches(pid, sig):
                time.sleep(0.005)
            while pid and p.poll() is None and time.time() < deadline:
                if not alive(pid):
                    break
                try:
                    r = subprocess.run([self.heaptrail, "leaks", "--json",
                                        str(pid)], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE,
                                       env=run_tests.RUN_ENV, cwd=cwd,
                                       timeout=LEAKS_CALL_TIMEOUT)
                    # a failed call racing the exit says nothing
                    if r.returncode == 0 or alive(pid):
                        calls.append((r.returncode, r.stderr, r.stdout))
                except subprocess.TimeoutExpired:
                    # a call that outlives its program is waiting for a
                    # check that will never come: only a hang while the
                    # program lives is counted here
                    calls.append((None, b"no answer", b""))
                    if alive(pid):
                        problems.append("`heaptrail leaks %d` hung (no "
                                        "answer after %ds)" % (
                                            pid, LEAKS_CALL_TIMEOUT))
                    break
                time.sleep(0.1)
            p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            kill_group(p)
            for t in readers:
                t.join(5)
            raise Failure("hung: no exit after %ds under heaptrail run with "
                          "leaks calls" % timeout)
        for t in readers:
            t.join(10)
        return (p.returncode, chunks.get("out", b""), chunks.get("err", b""),
                calls)

    def test_vg(self, prog, case):
        problems, details = [], []
        binary = self.build_prog(prog)

        def do():
            # the program and everything built beside it that it loads or
            # runs (@lib, @helper)
            beside = [self.bin(lib) for _, lib in prog.libs] + \
                [self.bin(name) for _, name, _ in prog.helpers]
            key = run_tests.vg_cache_key([binary] + beside, case[1])
            cache = os.path.join(self.dir, "vgcache", key + ".json")
            if self.suite.use_cache and os.path.exists(cache):
                with open(cache) as f:
                    return json.load(f)
            logs = run_tests.fresh_dir(os.path.join(self.dir, "vg",
                                                    prog.name + case[0]))
            rc, out, err, secs = run_group(
                run_tests.VALGRIND + ["--log-file=" + os.path.join(
                    logs, "vg.%p")] + [binary] + case[1], logs, 300)
            result = {"status": rc, "procs": run_tests.parse_vg_logs(logs)}
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            with open(cache + ".tmp", "w") as f:
                json.dump(result, f)
            os.rename(cache + ".tmp", cache)
            return result
        vg = self.vgs.get((prog.name, case[0]), do)
        procs = run_tests.with_depth(vg["procs"])
        root = [p for p in procs if p["depth"] == 0]
        if len(root) != 1 or root[0]["kinds"] is None:
            raise Failure("valgrind: no leak summary of the root process")
        got = program_kinds(root[0]["kinds"], root[0]["records"])
        details.append("valgrind: %s" % run_tests.show_kinds(got))
        want = prog.want_kinds(case[0]).get(0)
        for k in KINDS:
            if want is not None and got[k] != want[k]:
                problems.append("valgrind %s %d/%d, the program says %d/%d" %
                                (k, got[k][0], got[k][1], want[k][0],
                                 want[k][1]))
        return problems, details

    # -- the runner's own cases

    def simple(self):
        return self.build_prog(self.progs["simple_leak"])

    def simple_kinds(self, label, jpath, problems, details):
        self.check_kinds(label, jpath, self.progs["simple_leak"], ("", []),
                         problems, details)

    def case_preload(self, lib, order):
        """Another allocator preloaded with the agent: "cli" puts it in
        LD_PRELOAD for `heaptrail run` (which adds the agent); "before" and
        "after" preload both by hand, the other allocator first or last."""
        if not os.path.exists(lib):
            raise Failure("%s missing (scripts/install-deps --test)" % lib)
        problems, details = [], []
        prog = self.simple()
        bare_rc, bare_out, _ = self.bare(self.progs["simple_leak"], ("", []))
        w = self.work("preload-%s-%s" % (os.path.basename(lib), order))
        outdir, jpath = os.path.join(w, "out"), os.path.join(w, "out.json")
        env = dict(run_tests.RUN_ENV)
        if order == "cli":
            env["LD_PRELOAD"] = lib
            rc, out, err, _ = run_group([self.heaptrail, "run", "-o", outdir,
                                         "--json", jpath, "--", prog], w, 30,
                                        env=env)
        else:
            agent = os.path.join(self.build, "libheaptrail.so")
            env["LD_PRELOAD"] = "%s:%s" % ((lib, agent) if order == "before"
                                           else (agent, lib))
            os.makedirs(outdir)
            env["HEAPTRAIL_OPTIONS"] = "sample=1,output=" + outdir
            rc, out, err, _ = run_group([prog], w, 30, env=env)
            r = run_tests.run([self.heaptrail, "report", "--json", outdir],
                              cwd=w, timeout=30)
            if r[0] != 0:
                problems.append("report --json: %s: %s" % (
                    describe(r[0]), run_tests.short(r[2])))
            else:
                with open(jpath, "wb") as f:
                    f.write(r[1])
        same_behaviour(order, (rc, out), (bare_rc, bare_out), problems)
        if order == "before":
            # The program's malloc is the other allocator's: the agent sees
            # nothing and must say so, on stderr and in the report.
            if b"malloc here is not heaptrail's" not in err:
                problems.append("before: no warning on stderr: %s" %
                                run_tests.short(err, 300))
            r = run_tests.run([self.heaptrail, "report", outdir], cwd=w,
                              timeout=30)
            if b"warning: the program's malloc was that of" not in r[1] + r[2]:
                problems.append("before: no warning in the report")
            details.append("stderr: " + run_tests.short(err, 1000))
            return problems, details
        if os.path.exists(jpath):
            # the other allocator's own start-up blocks are not the
            # program's: check the records that name the program's code
            objs = run_tests.load_json_objects(jpath)
            roots = [o for o in run_tests.with_depth(
                [{"pid": o.get("pid"), "ppid": o.get("ppid"), "obj": o}
                 for o in objs]) if o["depth"] == 0]
            recs = run_tests.records_of(roots[0]["obj"]) if roots else []
            for func, kind, want in (("leak_bytes", "definitely_lost",
                                      [2500, 1]),
                                     ("main", "still_reachable", [40, 1])):
                got = [sum(r[x] for r in recs if r["kind"] == kind and any(
                    run_tests.base_name(f.get("function") or "") == func
                    for f in r["stack"][:2])) for x in ("bytes", "blocks")]
                if got != want:
                    problems.append("%s: %s records from %s: %d/%d, want "
                                    "%d/%d" % (order, kind, func, got[0],
                                               got[1], want[0], want[1]))
        else:
            problems.append("no report")
        details.append("stderr: " + run_tests.short(err, 1000))
        return problems, details

    def mount_tmpfs(self, path, opts):
        """Mounts a tmpfs at path; Skip (Failure under CI=true) when it
        cannot."""
        os.makedirs(path, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs",
                            path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if r.returncode != 0:
            msg = "cannot mount a tmpfs: %s" % run_tests.short(r.stderr)
            if CI:
                raise Failure(msg)
            raise Skip(msg)

    def umount(self, path):
        subprocess.run(["umount", "-l", path], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def unwritable_run(self, label, outdir, w, prog_args=(), check=None):
        """heaptrail run --error-exitcode=42 -o OUTDIR on simple_leak (or
        outdir_hostile): the program behaves as bare, the run is not 0."""
        problems = []
        name = "outdir_hostile" if prog_args else "simple_leak"
        p = self.progs[name]
        binary = self.build_prog(p)
        if prog_args:
            bw = self.work("%s-bare" % label)
            os.makedirs(bw + "/d")
            brc, bout, berr, _ = run_group([binary] + [
                a.replace(outdir, bw + "/d") for a in prog_args], bw, 30)
        else:
            brc, bout, _ = self.bare(p, ("", []))
        jpath = os.path.join(w, "out.json")
        rc, out, err, _ = run_group([self.heaptrail, "run", "-o", outdir,
                                     "--json", jpath, "--error-exitcode=42",
                                     "--", binary] + list(prog_args), w, 30)
        if rc == 0:
            problems.append("%s: exit 0 although the leak report could not "
                            "be written (%s)" % (label, run_tests.short(err)))
        if out != bout and rc != 2:   # 2: refused before starting
            problems.append("%s: stdout differs from bare: %s" % (
                label, run_tests.first_difference(out, bout)))
        return problems, [run_tests.short(err, 1000)]

    def case_full_disk(self):
        w = self.work("full-disk")
        mnt = os.path.join(w, "mnt")
        self.mount_tmpfs(mnt, "size=64k,mode=0777")
        try:
            os.makedirs(os.path.join(mnt, "out"))
            # fill it, leaving nothing for the report
            fd = os.open(os.path.join(mnt, "filler"), os.O_WRONLY | os.O_CREAT,
                         0o600)
            try:
                while os.write(fd, b"x" * 4096) > 0:
                    pass
            except OSError:
                pass
            os.close(fd)
            return self.unwritable_run("full-disk", os.path.join(mnt, "out"),
                                       w)
        finally:
            self.umount(mnt)

    def case_readonly_dir(self):
        w = self.work("readonly-dir")
        mnt = os.path.join(w, "mnt")
        self.mount_tmpfs(mnt, "size=1m,mode=0777")
        try:
            os.makedirs(os.path.join(mnt, "out"))
            subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
            return self.unwritable_run("readonly-dir",
                                       os.path.join(mnt, "out"), w)
        finally:
            self.umount(mnt)

    def case_removed_dir(self):
        w = self.work("removed-dir")
        outdir = os.path.join(w, "out")
        return self.unwritable_run("removed-dir", outdir, w,
                                   ["remove", outdir])

    def case_file_modes(self):
        """Reports, leak checks, dumps and the timeline are 0600."""
        problems = []
        prog = self.build_prog(self.progs["outdir_hostile"])
        w = self.work("file-modes")
        seen = set()
        for extra, tag in (([], "exact"), (["--sample", "64k", "--every",
                                            "50ms", "--final"], "sample")):
            d = os.path.join(w, "out-" + tag)
            os.makedirs(d)
            # "plant" into a side directory: only the leak check and the
            # dump are wanted here
            side = os.path.join(w, "side-" + tag)
            os.makedirs(side)
            run_group([self.heaptrail, "run", "-o", d] + extra + [
                "--", prog, "plant", side, os.path.join(w, "victim")], w, 30)
            for f in sorted(os.listdir(d)):
                st = os.lstat(os.path.join(d, f))
                kind = re.sub(r"^heaptrail\.\d+\.(\d+\.)?", "", f)
                seen.add(kind)
                if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
                    problems.append("%s: %s has mode %03o" % (
                        tag, kind, st.st_mode & 0o777))
        for want in ("leaks", "check-1.leaks", "timeline", "api.heap"):
            if want not in seen:
                problems.append("no %s file was written" % want)
        return sorted(set(problems)), ["files: %s" % sorted(seen)]

    def case_symlinks(self):
        problems, details = [], []
        prog = self.build_prog(self.progs["outdir_hostile"])
        w = self.work("symlinks")
        outdir = os.path.join(w, "out")
        victim = os.path.join(w, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        os.chmod(victim, 0o644)
        bw = self.work("symlinks-bare")
        os.makedirs(os.path.join(bw, "d"))
        brc, bout, _, _ = run_group([prog, "plant", os.path.join(bw, "d"),
                                     os.path.join(bw, "v")], bw, 30)
        for extra, tag in (([], "exact"), (["--sample", "64k", "--every",
                                            "50ms", "--final"], "sample")):
            jpath = os.path.join(w, "out-%s.json" % tag)
            d = outdir + "-" + tag
            rc, out, err, _ = run_group([self.heaptrail, "run", "-o", d,
                                         "--json", jpath] + extra +
                                        ["--", prog, "plant", d, victim],
                                        w, 30)
            same_behaviour(tag, (rc, out), (brc, bout), problems)
            with open(victim) as f:
                if f.read() != "precious\n":
                    problems.append("%s: the victim file was written "
                                    "through a symlink" % tag)
                    with open(victim, "w") as f2:
                        f2.write("precious\n")
            if os.stat(victim).st_mode & 0o777 != 0o644:
                problems.append("%s: the victim's mode changed" % tag)
            details.append("%s: %s" % (tag, run_tests.short(err, 500)))
        return problems, details

    def case_sigkill_dump(self):
        problems, details = [], []
        prog = self.build_prog(self.progs["big_dump"])
        w = self.work("sigkill-dump")
        outdir = os.path.join(w, "out")
        kills = 0
        for delay in (0.05, 0.15, 0.3):
            d = "%s-%d" % (outdir, kills)
            p = subprocess.Popen([self.heaptrail, "run", "--sample", "1",
                                  "-o", d, "--", prog], cwd=w,
                                 env=run_tests.RUN_ENV,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL,
                                 start_new_session=True)
            try:
                if p.stdout.readline() != b"ready\n":
                    raise Failure("big_dump did not start")
                pid = child_with_agent(p.pid, time.time() + 10)
                # wait for the first dump to exist, then kill mid-way
                t0 = time.time()
                while time.time() - t0 < 10 and not any(
                        f.endswith(".heap") for f in os.listdir(d)):
                    time.sleep(0.01)
                time.sleep(delay)
                if pid:
                    os.kill(pid, signal.SIGKILL)
                kills += 1
                rc = p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill_group(p)
                raise Failure("heaptrail run did not end after its program "
                              "was killed")
            if rc != -signal.SIGKILL:
                problems.append("run %d: %s, the program was killed by "
                                "SIGKILL" % (kills, describe(rc)))
            for f in sorted(os.listdir(d)):
                path = os.path.join(d, f)
                if re.search(r"\.heap$", f):
                    errs = []
                    run_tests.read_dump(path, errs)
                    if errs:
                        problems.append("%s: %s" % (f, errs[0]))
                elif f.endswith(".leaks"):
                    r = run_tests.run([self.heaptrail, "report", path],
                                      cwd=w)
                    if r[0] != 0:
                        problems.append("%s: %s" % (f, run_tests.short(r[2])))
            details.append("run %d: %s" % (kills, sorted(os.listdir(d))[:6]))
        return problems, details

    def case_timeout_term(self):
        """SIGTERM for `heaptrail run`, from `timeout -s TERM 1` (which
        signals its child's whole process group too), from `timeout
        --foreground` (heaptrail run alone) and from kill(2): the
        program must die too, promptly."""
        problems, details = [], []
        prog = self.simple()
        for how in ("timeout", "foreground", "kill"):
            w = self.work("timeout-term-" + how)
            pidfile = os.path.join(w, "pid")
            ht = [self.heaptrail, "run", "-o", os.path.join(w, "out"), "--",
                  prog, "pidfile", pidfile, "sleep", "8000"]
            start = time.time()
            if how == "kill":
                p = subprocess.Popen(ht, cwd=w, env=run_tests.RUN_ENV,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE,
                                     start_new_session=True)
                while time.time() - start < 10 and not os.path.exists(
                        pidfile):
                    time.sleep(0.01)
                time.sleep(0.1)
                p.send_signal(signal.SIGTERM)
                try:
                    p.communicate(timeout=10)
                    rc = p.returncode
                except subprocess.TimeoutExpired:
                    rc = None
                    problems.append("kill: heaptrail run still runs 10s "
                                    "after SIGTERM")
                want = -signal.SIGTERM
            else:
                fg = ["--foreground"] if how == "foreground" else []
                rc, out, err, secs = run_group(
                    ["timeout"] + fg + ["-s", "TERM", "1"] + ht, w, 20)
                want = 124
            try:
                with open(pidfile) as f:
                    pid = int(f.read())
            except (OSError, ValueError):
                problems.append("%s: the program never started" % how)
                continue
            if rc is not None and rc != want:
                problems.append("%s: %s, expected %s" % (how, describe(rc),
                                                         describe(want)))
            t0 = time.time()
            while alive(pid) and time.time() - t0 < 3:
                time.sleep(0.05)
            if alive(pid):
                problems.append("%s: the program (pid %d) still runs after "
                                "heaptrail run was sent SIGTERM" % (how, pid))
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if how == "kill" and rc is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
        return problems, details

    PIPELINE = "seq 1 50000 | sort | uniq -c | sort -rn | head -3"

    def case_pipeline_sigpipe(self):
        """The issue's pipeline under `heaptrail run` through sh -c:
        `head -3` leaves after three lines, so `sort -rn` dies of SIGPIPE
        writing the rest (bare too: its status, written by a subshell
        around it, is 141).  The pipeline's output and status are the
        bare run's, every one of its six processes has a report, and
        that of `sort -rn` says killed by signal 13, as valgrind's does
        (before, it had none)."""
        problems, details = [], []
        w = self.work("pipeline-sigpipe")
        with_status = self.PIPELINE.replace(
            "sort -rn", "{ sort -rn; echo $? > status; }")
        for label, ht in (("bare", []),
                          ("heaptrail", [self.heaptrail, "run", "-q", "-o",
                                         os.path.join(w, "out-status"),
                                         "--"])):
            status = os.path.join(w, "status")
            if os.path.exists(status):
                os.unlink(status)
            run_group(ht + ["sh", "-c", with_status], w, 60)
            try:
                with open(status) as f:
                    got = f.read().strip()
            except OSError:
                got = "none"
            if got != "141":
                problems.append("%s: sort -rn ended with status %s, expected"
                                " 141 (killed by SIGPIPE)" % (label, got))
        bare = run_group(["sh", "-c", self.PIPELINE], w, 60)
        outdir, jpath = os.path.join(w, "out"), os.path.join(w, "out.json")
        rc, out, err, _ = run_group(
            [self.heaptrail, "run", "-o", outdir, "--json", jpath, "--",
             "sh", "-c", self.PIPELINE], w, 60)
        same_behaviour("heaptrail", (rc, out), bare[:2], problems, err)
        objs = run_tests.load_json_objects(jpath) \
            if os.path.exists(jpath) else []
        details.append("; ".join("%s: %s" % (" ".join(o.get("command") or []),
                                             json.dumps(o.get("exit")))
                                 for o in objs))
        reports = [f for f in os.listdir(outdir) if f.endswith(".leaks")] \
            if os.path.isdir(outdir) else []
        if len(objs) != 6 or len(reports) != 6:
            problems.append("%d processes in the JSON and %d reports, expected"
                            " 6 of each (sh, seq, sort, uniq, sort -rn, head)"
                            % (len(objs), len(reports)))
        sorts = [o for o in objs if (o.get("command") or [])[:2] == ["sort", "-rn"]]
        if not sorts or (sorts[0].get("exit") or {}).get("signal") != 13:
            problems.append("the report of sort -rn does not say killed by "
                            "signal 13: %s" % (json.dumps(sorts[0].get("exit"))
                                               if sorts else "no report"))
        return problems, details

    def case_default_dir(self):
        """Directories an attacker made at the names `heaptrail run`
        without -o would pick (./heaptrail-PROG-PID for the next pids):
        it must not write into one.  Planted 400 pids ahead; tried again
        when the program's pid fell outside them."""
        problems = []
        prog = self.simple()
        for attempt in range(3):
            w = self.work("default-dir-%d" % attempt)
            with open("/proc/sys/kernel/ns_last_pid") as f:
                last = int(f.read())
            planted = set()
            for pid in range(last + 1, last + 401):
                d = os.path.join(w, "heaptrail-simple_leak-%d" % pid)
                os.mkdir(d)
                os.chmod(d, 0o777)
                try:
                    os.chown(d, 65534, 65534)
                except OSError:
                    pass
                planted.add(d)
            pidfile = os.path.join(w, "pid")
            rc, out, err, _ = run_group([self.heaptrail, "run", "--", prog,
                                         "pidfile", pidfile], w, 30)
            try:
                with open(pidfile) as f:
                    pid = int(f.read())
            except (OSError, ValueError):
                if rc != 0 and len(run_tests.stderr_lines(err)) == 1:
                    return [], ["refused: " + run_tests.short(err)]
                return ["the program did not run and no clear error: %s" %
                        run_tests.short(err)], []
            d = os.path.join(w, "heaptrail-simple_leak-%d" % pid)
            if d not in planted:
                continue
            used = [x for x in planted if os.listdir(x)]
            if used:
                problems.append("wrote into the planted %s" % ", ".join(
                    os.path.basename(u) for u in used))
            return problems, [run_tests.short(err, 300)]
        return ["the program's pid never fell in the 400 planted names"], []

    def case_bad_options(self):
        problems = []
        prog = self.simple()
        w = self.work("bad-options")
        bad = [["--sample", "banana"], ["--sample", "-5"],
               ["--every", "10parsecs"], ["--every", "0"],
               ["--interval", "1x"], ["--signal", "99"],
               ["--signal", "SIGFOO"], ["--timeline", "-1"],
               ["--timeline", "abc"], ["--depth", "0"], ["--depth", "999"]]
        for i, opt in enumerate(bad):
            marker = os.path.join(w, "started-%d" % i)
            rc, out, err, _ = run_group([self.heaptrail, "run", "-o",
                                         os.path.join(w, "out%d" % i)] +
                                        opt + ["--", prog, "marker", marker],
                                        w, 20)
            what = " ".join(opt)
            lines = run_tests.stderr_lines(err)
            if rc == 0:
                problems.append("%s: exit 0" % what)
            if len(lines) != 1:
                problems.append("%s: %d stderr lines, expected one" % (
                    what, len(lines)))
            elif opt[0] not in lines[0] and opt[1] not in lines[0]:
                problems.append("%s: the error does not name it: %r" % (
                    what, lines[0]))
            if os.path.exists(marker):
                problems.append("%s: the program was started" % what)
        return problems, []

    def case_long_values(self):
        """A 100 KB bad value (an --alloc-fn spec, a --sample, an unknown
        option, a leak kind; to `heaptrail run`, `attach`, `top`, `report`
        and the agent alone) and one
        holding a newline: the error is one line of at most 400 bytes
        that says how long the value was (it was echoed whole)."""
        problems = []
        prog = self.simple()
        w = self.work("long-values")
        big = "x" * 100000 + "("
        agent = os.path.join(self.build, "libheaptrail.so")
        dump = os.path.join(w, "d.heap")
        with open(dump, "w") as f:
            f.write("heap profile: 1: 64 [1: 64] @ heap_v2/1\n")
        # (what, command, agent options or None, the length the error
        # must state or None, whether stderr is that one line: an
        # unknown option is followed by the usage)
        n = len(big)
        cases = [
            ("run --alloc-fn BIG", [self.heaptrail, "run", "-o", w + "/o",
                                    "--alloc-fn", big, "--", prog], None,
             n, True),
            ("run --sample BIG", [self.heaptrail, "run", "-o", w + "/o",
                                  "--sample", big, "--", prog], None, n,
             True),
            ("run --BIG", [self.heaptrail, "run", "--" + big, "--", prog],
             None, n + 2, False),
            ("top --BIG", [self.heaptrail, "top", "--" + big, dump], None,
             n + 2, False),
            ("attach --alloc-fn BIG", [self.heaptrail, "attach",
                                       "--alloc-fn", big, "1"], None, n,
             True),
            ("report --show-leak-kinds BIG", [self.heaptrail, "report",
                                              "--show-leak-kinds", big, w],
             None, n, True),
            ("run --alloc-fn 'a\\nb('", [self.heaptrail, "run", "-o",
                                         w + "/o", "--alloc-fn", "a\nb(",
                                         "--", prog], None, None, True),
            ("agent alloc_fn=BIG", [prog], "sample=1,alloc_fn=" + big, n,
             False),
            ("agent BIG=1", [prog], "sample=1," + big + "=1", n + 2, False),
        ]
        for what, cmd, opts, length, alone in cases:
            env = dict(run_tests.RUN_ENV)
            if opts:
                env.update(LD_PRELOAD=agent, HEAPTRAIL_OPTIONS=opts)
            rc, out, err, _ = run_group(cmd, w, 20, env=env)
            lines = [l for l in err.split(b"\n") if l.startswith(b"heaptrail: ")]
            if opts is None and rc == 0:
                problems.append("%s: exit 0" % what)
            if alone and len(err.splitlines()) != 1:
                problems.append("%s: %d stderr lines, expected one" % (
                    what, len(err.splitlines())))
            if len(lines) != 1:
                problems.append("%s: %d heaptrail lines on stderr" % (
                    what, len(lines)))
                continue
            if len(lines[0]) > 400:
                problems.append("%s: a line of %d bytes" % (what,
                                                            len(lines[0])))
            if length and b"(%d bytes)" % length not in lines[0]:
                problems.append("%s: does not say how long it was: %r" % (
                    what, run_tests.short(lines[0], 300)))
        return problems, []

    def case_signal_11(self):
        """--signal 11 would turn a crash into an endless loop of dumps: it
        is refused before the program starts, with one line naming it."""
        problems = []
        prog = self.build_prog(self.progs["fatal"])
        w = self.work("signal-11")
        rc, out, err, secs = run_group([self.heaptrail, "run", "-o",
                                        os.path.join(w, "out"), "--signal",
                                        "11", "--", prog, "segv"], w, 10)
        lines = [l for l in err.decode(errors="replace").splitlines() if l]
        if rc in (0, None) or rc < 0:
            problems.append("%s, expected a non-zero exit" % describe(rc))
        if len(lines) != 1 or "signal" not in lines[0]:
            problems.append("stderr is not one line naming --signal: %r" %
                            run_tests.short(err, 300))
        if out:
            problems.append("the program ran: stdout %r" %
                            run_tests.short(out))
        return problems, [run_tests.short(err, 300)]

    def case_exit_race_loop(self):
        """exit_main_race 30 times in a row under `heaptrail run`: main
        returns while another thread calls exit(); every run must leave
        its report (one in three was lost when only the thread that ran
        the agent's last exit handler knew about the report)."""
        problems = []
        prog = self.build_prog(self.progs["exit_main_race"])
        w = self.work("exit-race-loop")
        runs = int(os.environ.get("HEAPTRAIL_EXIT_RACE_RUNS", "30"))
        lost = []
        for i in range(runs):
            out = os.path.join(w, "out%d" % i)
            rc, _, err, _ = run_group([self.heaptrail, "run", "-q", "-o", out, "--",
                                       prog], w, 20)
            text = err.decode(errors="replace")
            if rc != 5 or "definitely lost: 600 bytes in 1 block" not in text:
                lost.append("run %d: %s, %s" % (i + 1, describe(rc),
                                                run_tests.short(err, 200)))
        if lost:
            problems.append("%d of %d runs without the report: %s"
                            % (len(lost), runs, "; ".join(lost[:3])))
        return problems, []

    def case_stale_dir(self):
        """An earlier run's report and a garbage .leaks in -o DIR."""
        problems, details = [], []
        prog = self.simple()
        brc, bout, _ = self.bare(self.progs["simple_leak"], ("", []))
        w = self.work("stale-dir")
        outdir = os.path.join(w, "out")
        jpath = os.path.join(w, "first.json")
        run_group([self.heaptrail, "run", "-o", outdir, "--json", jpath,
                   "--", prog], w, 30)
        with open(os.path.join(outdir, "heaptrail.1.leaks"), "w") as f:
            f.write("garbage\x00\x01 not a leak file\n")
        os.chmod(os.path.join(outdir, "heaptrail.1.leaks"), 0o600)
        marker = os.path.join(w, "started")
        jpath = os.path.join(w, "second.json")
        rc, out, err, _ = run_group([self.heaptrail, "run", "-o", outdir,
                                     "--json", jpath, "--", prog, "marker",
                                     marker], w, 30)
        started = os.path.exists(marker)
        if not started:
            if rc == 0 or len(run_tests.stderr_lines(err)) != 1:
                problems.append("refused, but %s and stderr %r" % (
                    describe(rc), run_tests.short(err)))
        else:
            same_behaviour("second run", (rc, out), (brc, bout), problems)
            objs = run_tests.load_json_objects(jpath) \
                if os.path.exists(jpath) else []
            if len(objs) != 1:
                problems.append("second run: %d process reports, expected "
                                "this run's one" % len(objs))
            else:
                self.simple_kinds("second run", jpath, problems, details)
        details.append(run_tests.short(err, 500))
        return problems, details

    def case_relative_output(self):
        """The agent alone (LD_PRELOAD, no `heaptrail run`) with a relative
        output= (and a relative prefix=, and none at all), in a program
        that changes directory before it exits: the report, the final
        dump and the timeline go where the options said at start-up, and
        nothing into the new working directory (a copy of every directory
        waits there, so a report written against the new cwd would land
        rather than fail)."""
        problems, details = [], []
        prog = self.simple()
        brc, bout, _ = self.bare(self.progs["simple_leak"], ("", []))
        agent = os.path.join(self.build, "libheaptrail.so")
        for tag, opts, where in (
                ("output", "output=out", "out"),
                ("prefix", "output=out,prefix=pre/d", "pre"),
                ("none", "", ".")):
            w = self.work("relative-output-" + tag)
            away = os.path.join(w, "away")
            for d in (w, away):
                for sub in ("out", "pre"):
                    os.makedirs(os.path.join(d, sub), exist_ok=True)
            env = dict(run_tests.RUN_ENV, LD_PRELOAD=agent,
                       HEAPTRAIL_OPTIONS="sample=1,final=1,timeline=5" +
                       ("," + opts if opts else ""))
            rc, out, err, _ = run_group([prog, "sleep", "30", "chdir", away],
                                        w, 30, env=env)
            same_behaviour(tag, (rc, out), (brc, bout), problems, err)
            def ours(d):
                return sorted(f for f in os.listdir(d)
                              if f.startswith(("heaptrail.", "d.")))
            got = ours(os.path.join(w, where))
            for kind in (".leaks", ".final.heap", ".timeline"):
                want = "report" if kind == ".leaks" else kind[1:]
                # the dumps follow prefix=, the rest output=
                if tag == "prefix" and kind != ".final.heap":
                    continue
                if not any(f.endswith(kind) for f in got):
                    problems.append("%s: no %s in %s (%s)" % (
                        tag, want, where, run_tests.short(err, 200)))
            stray = [os.path.join(r, f) for r, _, fs in os.walk(away)
                     for f in fs]
            if stray:
                problems.append("%s: written into the new working directory:"
                                " %s" % (tag, ", ".join(
                                    os.path.relpath(x, w) for x in stray)))
            details.append("%s: %s; %s" % (tag, got, run_tests.short(err, 300)))
        return problems, details

    def case_shared_dir(self):
        """Two runs started together into one empty -o DIR, both with
        --error-exitcode=42 and --json: simple_leak (leaks) and a clean
        /bin/sleep that ends after it. Each run reports its own process
        only: the clean one exits 0 (it failed with the other's leak)."""
        problems, details = [], []
        prog = self.simple()
        for attempt in range(2):
            w = self.work("shared-dir-%d" % attempt)
            d = os.path.join(w, "out")
            runs = {}
            for tag, cmd in (("leaky", [prog, "sleep", "200"]),
                             ("clean", ["/bin/sleep", "1"])):
                j = os.path.join(w, tag + ".json")
                runs[tag] = (j, subprocess.Popen(
                    [self.heaptrail, "run", "-q", "-o", d, "--json", j,
                     "--error-exitcode=42", "--"] + cmd, cwd=w,
                    env=run_tests.RUN_ENV, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, start_new_session=True))
            res = {}
            for tag, (j, p) in runs.items():
                try:
                    out, err = p.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    kill_group(p)
                    raise Failure("%s: hung" % tag)
                res[tag] = (p.returncode, err)
            if any(b"another run" in e for _, e in res.values()):
                continue  # one started after the other's first file: again
            want = {"leaky": (42, prog), "clean": (0, "/bin/sleep")}
            for tag, (rc, err) in res.items():
                j = runs[tag][0]
                objs = run_tests.load_json_objects(j) \
                    if os.path.exists(j) else []
                cmds = [" ".join(o.get("command") or []) if isinstance(
                    o.get("command"), list) else str(o.get("command"))
                    for o in objs]
                if rc != want[tag][0]:
                    problems.append("%s run: %s, expected exit %d (%s)" % (
                        tag, describe(rc), want[tag][0],
                        run_tests.short(err, 300)))
                if len(objs) != 1:
                    problems.append("%s run: %d process reports in its "
                                    "JSON, expected its own one (%s)" % (
                                        tag, len(objs), cmds))
                details.append("%s: %s, %s" % (tag, describe(rc), cmds))
            return problems, details
        return ["the two runs never started together (each time one was "
                "refused for the other's files)"], details

    def case_analyzers(self):
        """Every analyzer command on /dev/zero and on a FIFO nobody
        writes: all started at once, each must have failed within 3 s."""
        problems = []
        w = self.work("analyzers")
        fifo = os.path.join(w, "fifo")
        os.mkfifo(fifo)
        procs = []
        for target in ("/dev/zero", fifo):
            for i, cmd in enumerate((["top"], ["diff", target],
                                     ["collapsed"], ["growth"],
                                     ["timeline"], ["callgraph", "--dot"],
                                     ["flame", "-o", "f%d.svg"],
                                     ["pprof", "-o", "p%d.pb.gz"],
                                     ["report"])):
                cmd = [c.replace("%d", str(len(procs))) for c in cmd]
                full = [self.heaptrail] + cmd[:1] + [target] + cmd[1:]
                procs.append(("%s %s" % (cmd[0], target), subprocess.Popen(
                    full, cwd=w, env=run_tests.RUN_ENV,
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True)))
        deadline = time.time() + 3
        for what, p in procs:
            try:
                rc = p.wait(timeout=max(0.01, deadline - time.time()))
                if rc == 0:
                    problems.append("%s: exit 0" % what)
            except subprocess.TimeoutExpired:
                problems.append("%s: still reading after 3s" % what)
                kill_group(p)
        return problems, []


def collect(suite):
    """[(name, thunk)] for run_tests.py."""
    h = Hostile(suite)
    tests = []
    for prog in h.progs.values():
        for case in prog.cases:
            tag = prog.name + ("[%s]" % case[0] if case[0] else "")
            for mode in prog.modes + (["ci"] if prog.ci else []):
                tests.append(("hostile:%s:%s" % (tag, mode),
                              lambda p=prog, c=case, m=mode:
                              h.test_mode(p, c, m)))
            if prog.vg:
                tests.append(("hostile:%s:vg" % tag,
                              lambda p=prog, c=case: h.test_vg(p, c)))
    for lib, short in ((JEMALLOC, "jemalloc"), (TCMALLOC, "tcmalloc")):
        for order in ("cli", "before", "after"):
            tests.append(("hostile:run:preload-%s[%s]" % (short, order),
                          lambda l=lib, o=order: h.case_preload(l, o)))
    for name, fn in (("full-disk", h.case_full_disk),
                     ("readonly-dir", h.case_readonly_dir),
                     ("removed-dir", h.case_removed_dir),
                     ("file-modes", h.case_file_modes),
                     ("symlinks", h.case_symlinks),
                     ("sigkill-dump", h.case_sigkill_dump),
                     ("timeout-term", h.case_timeout_term),
                     ("pipeline-sigpipe", h.case_pipeline_sigpipe),
                     ("bad-options", h.case_bad_options),
                     ("default-dir", h.case_default_dir),
                     ("signal-11", h.case_signal_11),
                     ("long-values", h.case_long_values),
                     ("stale-dir", h.case_stale_dir),
                     ("exit-race-loop", h.case_exit_race_loop),
                     ("relative-output", h.case_relative_output),
                     ("shared-dir", h.case_shared_dir),
                     ("analyzers-devzero", h.case_analyzers)):
        tests.append(("hostile:run:" + name, fn))
    return tests


def main():
    import argparse
    import concurrent.futures
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("-k", action="append", default=[], metavar="SUBSTR")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args()
    args.no_cache = False
    lock = run_tests.lock_build(os.path.abspath(args.build))  # noqa: F841
    run_tests.start_fresh(os.path.abspath(args.build))
    suite = run_tests.Suite(args)
    reporter = run_tests.Reporter(args.verbose)
    tests = collect(suite)
    if args.k:
        tests = [t for t in tests if any(k in t[0] for k in args.k)]

    def one(name, thunk):
        try:
            problems, details = thunk()
        except Skip as e:
            reporter.skip(name, str(e))
            return
        except Failure as e:
            problems, details = [str(e).split("\n")[0]], [str(e)]
        except Exception as e:
            problems, details = ["%s: %s" % (type(e).__name__, e)], []
        reporter.result(name, problems, details)

    with concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, min(2, args.jobs))) as pool:
        for f in [pool.submit(one, n, t) for n, t in tests]:
            f.result()
    print("%d passed, %d failed, %d skipped" % (
        reporter.passed, reporter.failed, reporter.skipped))
    return 1 if reporter.failed else 0


if __name__ == "__main__":
    sys.exit(main())
