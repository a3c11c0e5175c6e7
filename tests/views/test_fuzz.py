"""Fuzz targets of the readers (tests/fuzz): each runs for a bounded time
through tests/fuzz/run, from its seed corpus.

    fuzz:heapdump   the heap dump reader and the unbiasing maths
    fuzz:profile    loading a profile, subtracting it from itself,
                    filtering, summing into top's table
    fuzz:leakfile   the leak file reader
    fuzz:cfi        the agent's DWARF CFI parser (src/agent/cfi.c)

Skipped when clang or its libFuzzer runtime (libclang-rt-14-dev) is
missing. HEAPTRAIL_FUZZ_SECONDS changes the time per target (default 15);
HEAPTRAIL_FUZZ_SEED the random seed (default 1, so every clone explores
the same inputs and a CI failure replays here; "random" for a new one).
"""
import os
import shutil
import subprocess
import threading

import run_tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ("heapdump", "profile", "leakfile", "cfi")
_lock = threading.Lock()
_built = {}


def build(suite):
    """Builds the fuzz targets once; raises Skip when the toolchain cannot."""
    with _lock:
        if "result" not in _built:
            _built["result"] = _build(suite)
    kind, msg = _built["result"]
    if kind == "skip":
        raise run_tests.Skip(msg)
    if kind == "fail":
        raise run_tests.Failure(msg)


def _build(suite):
    clang = os.environ.get("FUZZ_CC", "clang")
    if not shutil.which(clang):
        return "skip", "no clang (apt-get install clang libclang-rt-14-dev)"
    probe_dir = os.path.join(suite.build, "fuzz")
    os.makedirs(probe_dir, exist_ok=True)
    probe = os.path.join(probe_dir, "probe.c")
    with open(probe, "w") as f:
        f.write("#include <stddef.h>\n#include <stdint.h>\n"
                "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)"
                "{ (void)d; (void)n; return 0; }\n")
    p = subprocess.run([clang, "-fsanitize=fuzzer,address,undefined", "-o",
                        probe[:-2], probe], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        return "skip", "clang cannot link libFuzzer (libclang-rt-14-dev?): %s" % \
            run_tests.short(p.stderr, 120)
    p = subprocess.run(["make", "-s", "-j2", "B=" + suite.build, "fuzz"], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        return "fail", "make fuzz failed:\n" + p.stdout.decode("utf-8", "replace")
    return "ok", None


def test_target(suite, target):
    build(suite)
    secs = int(os.environ.get("HEAPTRAIL_FUZZ_SECONDS", "15"))
    # -n: built once above; a make per target could relink one target
    # while another test runs it
    seed = os.environ.get("HEAPTRAIL_FUZZ_SEED", "1")
    args = [os.path.join(ROOT, "tests", "fuzz", "run"), "-n", "-t", str(secs),
            "-b", suite.build]
    if seed != "random":
        args += ["-s", seed]
    rc, out, err = run_tests.run(args + [target],
                                 cwd=ROOT, timeout=secs + 300, env=os.environ)
    text = out.decode("utf-8", "replace")
    if rc != 0:
        return ([text.strip().split("\n")[0]],
                [text, err.decode("utf-8", "replace")])
    return [], [text]


def collect(suite):
    return [("fuzz:" + t, lambda t=t: test_target(suite, t)) for t in TARGETS]
