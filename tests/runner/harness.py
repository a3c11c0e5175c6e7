"""The runner's harness: the environment every program runs in, test
results (Failure, Skip, Reporter), running commands, and a run's fresh
directories.  See tests/run_tests.py for the suite as a whole."""

import glob  # noqa: F401  (the modules that import * use these)
import hashlib
import json
import os
import re  # noqa: F401
import shutil
import signal
import subprocess
import sys
import threading
import time  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PROGS = os.path.join(ROOT, "tests", "e2e", "progs")
TOOLS = os.path.join(ROOT, "tests", "tools")

sys.path.insert(0, TOOLS)
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import heapprof  # noqa: E402  (tests/tools: the runner's heap dump reader)

# The programs are started with the dispositions a shell gives a
# foreground job: a runner started in the background (`make test &`, a CI
# step without a terminal) inherits SIGINT and SIGQUIT ignored, and
# exec passes SIG_IGN on, so hostile:fatal's programs, which check that
# every signal that ends a process reads SIG_DFL, would fail bare.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)

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


class Failure(Exception):
    """A test's check failed; the message is the reason."""


class Skip(Exception):
    """A tool the test needs is missing on this machine; the message says
    which.  Never for a heaptrail feature that is missing or broken: that
    is a failure.  Under CI=true a skip counts as a failure."""


# CI=true: every skip is a failure (a CI machine must have every tool).
CI = os.environ.get("CI") == "true"

# RUN_TESTS_FAKE=unclassified: the runner reads heaptrail's JSON reports
# as if heaptrail did not classify leaks (tests/runner/test_meta.py
# shows that the kinds: tests then fail, not skip).
FAKE = [w for w in os.environ.get("RUN_TESTS_FAKE", "").split(",") if w]


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
        if CI:
            self.result(name, ["skipped, and CI=true: %s" % reason])
            return
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


def compiler_id(cmd):
    """What identifies the compiler cmd[0] runs: its resolved path, size
    and time (a build stamp from another compiler is not valid)."""
    path = shutil.which(cmd[0])
    if not path:
        return cmd[0]
    st = os.stat(os.path.realpath(path))
    return "%s %d %d" % (os.path.realpath(path), st.st_size, st.st_mtime_ns)


def sha256_files(paths, extra=""):
    h = hashlib.sha256(extra.encode())
    for p in paths:
        with open(p, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


# What a valgrind result depends on besides the binary and its own
# libraries: the C and C++ runtimes the program loads (an upgraded glibc
# allocates differently at start-up and exit), found by their sonames.
SYSTEM_LIBS = ("ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6",
               "libstdc++.so.6", "libgcc_s.so.1")


def system_libs():
    found = []
    for name in SYSTEM_LIBS:
        for d in ("/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                  "/lib", "/usr/lib"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                found.append(os.path.realpath(p))
                break
    return found


# Directories a run of the suite writes in BUILD, emptied when it starts:
# a run must not read what an earlier one left (a stale fixture, another
# run's dumps, a directory named after a pid that is now reused).  Kept:
# the valgrind caches (vgcache, see vg_cache_key) and, in the directories
# of built programs (BINS), each file that has its build stamp (Suite.
# compile rebuilds it unless the same command made it from the same
# sources); anything else there, such as what a program wrote in its
# working directory, goes.
RUN_DIRS = ("e2e", "hostile", "fuzz/work", "fuzz/artifacts")
BINS = ("e2e/fp", "e2e/nofp", "e2e/static", "hostile/bin")


def lock_build(build):
    """Takes BUILD/.run_tests.lock for this process's life: a second run
    on the same build directory would empty the directories the first is
    using (start_fresh), so it waits until the first ends."""
    import fcntl
    os.makedirs(build, exist_ok=True)
    fd = os.open(os.path.join(build, ".run_tests.lock"),
                 os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("run_tests: another run of the suite uses %s; waiting for it "
              "to end" % build, file=sys.stderr, flush=True)
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def start_fresh(build):
    for d in RUN_DIRS + BINS:
        top = os.path.join(build, d)
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        for entry in os.listdir(top):
            path = os.path.join(top, entry)
            if os.path.join(d, entry) in BINS or entry == "vgcache":
                continue
            if d in BINS and os.path.isfile(path) and not \
                    os.path.islink(path) and (
                        os.path.exists(path + ".stamp") or
                        (entry.endswith(".stamp") and
                         os.path.exists(path[:-len(".stamp")]))):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, onerror=_writable_retry)
            else:
                os.unlink(path)


def _writable_retry(fn, path, exc_info):
    """rmtree's error handler: a test left a directory without write or
    search permission; give it back and try once more."""
    for p in (os.path.dirname(path), path):
        try:
            os.chmod(p, 0o700)
        except OSError:
            pass
    fn(path)


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


def wait_until(cond, timeout=10.0, step=0.02):
    """Polls cond() until it is true (returns True) or timeout seconds
    have passed (returns False): a test that waits for a state waits for
    the state, not for a guess at how long it takes."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


def proc_field(path, key):
    """The value of "key:" in a /proc status file, or None (gone)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split(None, 1)[1].strip()
    except OSError:
        pass
    return None


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
