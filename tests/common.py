"""Shared fixtures of the plugin tests (tests/{agent,control,views}/test_*.py).

    dumps(suite)   a run of tests/e2e/progs/prof_cache under heaptrail,
                   sampling at 64 KiB with a dump every 100 ms: returns
                   (dir, [dump paths in time order], prog path); built once
                   per test session.
    after_startup(heaps)  the first of those dumps taken after start-up
    analyze_prog(suite, name, *flags)  tests/progs/NAME.c built
                   (-g -O1 and flags) into a fresh BUILD/e2e/analyze/NAME:
                   returns (that directory, the binary)
    built_once(suite, src, binary, flags)  src built with flags into
                   binary unless it is newer than src, once at a time
                   across the session's threads; returns binary
"""
import os
import re
import subprocess
import threading

_lock = threading.Lock()
_cache = {}

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGS = os.path.join(ROOT, "tests", "e2e", "progs")


def analyze_prog(suite, name, *flags):
    import run_tests as rt
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", name))
    binary = os.path.join(work, name)
    rc, _, err = rt.run([suite.cc, "-g", "-O1"] + list(flags) +
                        ["-o", binary, os.path.join(HERE, "progs", name + ".c")])
    if rc != 0:
        raise rt.Failure("cc %s.c: %s" % (name, rt.short(err)))
    return work, binary


def built_once(suite, src, binary, flags):
    import run_tests as rt
    with _lock:
        os.makedirs(os.path.dirname(binary), exist_ok=True)
        if not os.path.exists(binary) or os.path.getmtime(binary) < os.path.getmtime(src):
            rc, _, err = rt.run([suite.cc] + list(flags) + ["-o", binary + ".tmp", src],
                                env=os.environ)
            if rc:
                raise rt.Failure("cc %s: %s" % (os.path.basename(src), rt.short(err)))
            os.rename(binary + ".tmp", binary)
    return binary


def after_startup(heaps):
    """The first of prof_cache's dumps taken after its start-up
    (load_config) was over: the first in which something was freed (a
    request's scratch). A loaded machine can delay start-up past the
    first tick, and a dump in the middle of it has load_config growing."""
    for h in heaps:
        with open(h) as f:
            m = re.match(r"heap profile: *(\d+): *(\d+) *\[ *(\d+): *(\d+)", f.readline())
        if m and (int(m.group(1)), int(m.group(2))) != (int(m.group(3)), int(m.group(4))):
            return h
    return heaps[0]


def dumps(suite):
    with _lock:
        if "dumps" in _cache:
            return _cache["dumps"]
        work = os.path.join(suite.build, "e2e", "analyze")
        os.makedirs(work, exist_ok=True)
        prog = os.path.join(work, "prof_cache")
        subprocess.run([suite.cc, "-g", "-O1", "-fno-omit-frame-pointer",
                        "-I", PROGS, "-o", prog,
                        os.path.join(PROGS, "prof_cache.c")], check=True)
        out = os.path.join(work, "run")
        if os.path.isdir(out):
            for f in os.listdir(out):
                os.unlink(os.path.join(out, f))
        subprocess.run([suite.heaptrail, "run", "--sample", "65536",
                        "--every", "100ms", "-o", out, "--", prog],
                       check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        heaps = sorted(os.path.join(out, f) for f in os.listdir(out)
                       if f.endswith(".heap"))
        # prof_cache dumps through the API right before it frees everything:
        # an `every` dump after that one caught the teardown (a loaded
        # machine stretches it past a tick), not the grown heap.
        api = [i for i, h in enumerate(heaps) if h.endswith(".api.heap")]
        if api:
            heaps = heaps[:api[-1] + 1]
        _cache["dumps"] = (out, heaps, prog)
        return _cache["dumps"]
