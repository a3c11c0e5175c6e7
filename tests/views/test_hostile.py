"""Hostile input to `heaptrail top`: each must end with exactly one line
on stderr starting "heaptrail: ", nothing on stdout, a non-zero exit and
no crash (an exit code below 128, not killed by a signal), within the
time limit.

    hostile:NAME       one malformed or absurd dump (see CASES)
    hostile:timeline-NAME  `heaptrail timeline` on a malformed timeline
                       file (see TIMELINE_CASES): it drew an empty chart
                       and exited 0 for an empty file or a header
                       followed by binary garbage
    hostile:maps-fifo  a well-formed dump whose maps name a FIFO: read
                       without waiting for a writer that never comes
"""
import os
import random
import shutil

import run_tests

HEADER = b"heap profile: 1: 64 [1: 64] @ heap_v2/1\n"
SAMPLE = b"1: 64 [1: 64] @ 0x401136 0x401200\n"
MAPS = (b"MAPPED_LIBRARIES:\n"
        b"00400000-00402000 r-xp 00000000 08:01 1 /nonexistent/prog\n")


def deep(n):
    return (HEADER + b"1: 64 [1: 64] @ " +
            b" ".join(b"0x%x" % (0x401000 + i) for i in range(n)) + b"\n" + MAPS)


def garbage(seed, n, nul):
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(n))
    return data if nul else data.replace(b"\0", b"x")


# name -> file content (bytes), or None for a directory
CASES = {
    "empty": b"",
    "newlines-only": b"\n\n\n",
    "truncated-header": HEADER[:20],
    "truncated-sample": HEADER + SAMPLE[:12],
    "truncated-address": HEADER + b"1: 64 [1: 64] @ 0x40113",
    "no-maps": HEADER + SAMPLE,
    "truncated-maps": HEADER + SAMPLE + MAPS[:40],
    "truncated-build-id": HEADER + SAMPLE + MAPS + b"# build-id 4f2a",
    # a heaptrail dump that says it ends with an end line, cut just before it
    "truncated-before-end-line": HEADER + b"# heaptrail-dump ms=5 unix_ms=9 pid=7 agent_bytes=4096 "
                                 b"end=1\n" + SAMPLE + MAPS,
    "truncated-jemalloc-maps": b"heap_v2/1\n  t*: 1: 64 [1: 64]\n@ 0x401136\n"
                               b"  t*: 1: 64 [1: 64]\n" + MAPS[:-10],
    "no-maps-jemalloc": b"heap_v2/1\n  t*: 1: 64 [1: 64]\n@ 0x401136\n  t*: 1: 64 [1: 64]\n",
    "jemalloc-stack-without-counts": b"heap_v2/1\n  t*: 1: 64 [1: 64]\n@ 0x401136\n" + MAPS,
    "garbage": garbage(1, 4096, True),
    "garbage-text": garbage(2, 4096, False),
    "nul-byte": HEADER + b"1: 64 [1\0: 64] @ 0x401136\n" + MAPS,
    "huge-count": HEADER + b"99999999999999999999999: 64 [1: 64] @ 0x401136\n" + MAPS,
    "count-wraps-2^64": HEADER + b"1: 18446744073709551620 [1: 64] @ 0x401136\n" + MAPS,
    "counts-sum-over-2^61": HEADER + b"".join(
        b"1: 4611686018427387904 [1: 64] @ 0x%x\n" % (0x401000 + i) for i in range(4)) + MAPS,
    "huge-sampling-rate": b"heap profile: 1: 64 [1: 64] @ heap_v2/99999999999999999999\n" + SAMPLE + MAPS,
    "zero-sampling-rate-jemalloc": b"heap_v2/0\n  t*: 1: 64 [1: 64]\n" + MAPS,
    "address-over-64-bits": HEADER + b"1: 64 [1: 64] @ 0x10000000000000000\n" + MAPS,
    "address-not-hex": HEADER + b"1: 64 [1: 64] @ 0x40zz36\n" + MAPS,
    "depth-1025": deep(1025),
    "depth-100000": deep(100000),
    "line-over-1MiB": HEADER + b"1: 64 [1: 64] @" + b" 0x1" * 300000 + b"\n" + MAPS,
    "not-a-profile": b"--- heapz 1 ---\nsomething else\n",
    "directory": None,
}


TL_HEADER = (b"# heaptrail timeline 1: ms live_bytes live_blocks allocated_bytes "
             b"rss_bytes; sample=1\n")
TL_ROWS = b"0 1000 1 1000 2121728\n5 5096 2 5096 2342912\n"

# `heaptrail timeline FILE`: name -> file content. A last line cut short
# (a run killed mid-write) is dropped only when it is the start of a row.
TIMELINE_CASES = {
    "empty": b"",
    "garbage": garbage(3, 4096, True),
    "header-then-garbage": TL_HEADER + garbage(4, 4096, True).replace(b"\n", b"x"),
    "rows-then-garbage": TL_HEADER + TL_ROWS + garbage(5, 300, True).replace(b"\n", b"x"),
    "header-only-garbage": TL_HEADER[:22] + garbage(6, 100, False).replace(b"\n", b"x"),
    "version-12": TL_HEADER.replace(b"timeline 1:", b"timeline 12:") + TL_ROWS,
    "nul-in-row": TL_HEADER + b"0 1000 1\0 1000 2121728\n",
}


def check(suite, path, name, command="top"):
    cmd = [suite.heaptrail, command, path]
    rc, out, err = run_tests.run(cmd, timeout=60)
    problems = []
    lines = err.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if rc < 0 or rc >= 128:
        problems.append("crashed: exit %d" % rc)
    elif rc == 0:
        problems.append("exit 0 on hostile input")
    if len(lines) != 1 or not lines[0].startswith("heaptrail: "):
        problems.append("stderr is not one 'heaptrail: ' line: %r" % run_tests.short(err, 300))
    if out:
        problems.append("stdout not empty: %r" % run_tests.short(out))
    return problems, ["exit %d" % rc, err.decode("utf-8", "replace")]


def test_case(suite, name):
    work = os.path.join(suite.build, "e2e", "hostile")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, name + (".dir" if CASES[name] is None else ".heap"))
    if CASES[name] is None:
        if os.path.isfile(path):
            os.unlink(path)
        os.makedirs(path, exist_ok=True)
    else:
        if os.path.isdir(path):
            shutil.rmtree(path)
        with open(path, "wb") as f:
            f.write(CASES[name])
    return check(suite, path, name)


def test_maps_fifo(suite):
    work = os.path.join(suite.build, "e2e", "hostile")
    os.makedirs(work, exist_ok=True)
    fifo = os.path.join(work, "fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    path = os.path.join(work, "maps-fifo.heap")
    with open(path, "wb") as f:
        f.write(HEADER + SAMPLE + b"MAPPED_LIBRARIES:\n00400000-00402000 r-xp 00000000 08:01 1 " +
                fifo.encode() + b"\n")
    rc, out, err = run_tests.run([suite.heaptrail, "top", "--bytes", path], timeout=30)
    if rc != 0 or b" 64 " not in out:
        return ["exit %d, stdout %r, stderr %r" % (rc, run_tests.short(out), run_tests.short(err))], []
    return [], []


def test_timeline_case(suite, name):
    work = os.path.join(suite.build, "e2e", "hostile-timeline")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "heaptrail.1.%s.timeline" % name)
    with open(path, "wb") as f:
        f.write(TIMELINE_CASES[name])
    return check(suite, path, name, "timeline")


def collect(suite):
    tests = [("hostile:" + n, lambda n=n: test_case(suite, n)) for n in CASES]
    tests += [("hostile:timeline-" + n, lambda n=n: test_timeline_case(suite, n))
              for n in TIMELINE_CASES]
    tests.append(("hostile:maps-fifo", lambda: test_maps_fifo(suite)))
    return tests
