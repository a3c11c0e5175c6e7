"""Allocations through allocator addresses taken with dlsym.

    host:dlsym-handle  dlsym_alloc (tests/progs) allocates through
                       dlsym(dlopen("libc.so.6"), "malloc"/"calloc"/"free")
                       and a library of its own wraps puts with
                       dlsym(RTLD_NEXT): the same stdout and status bare
                       and under heaptrail run, and heaptrail's leak
                       summary equal to valgrind memcheck's (203,000 bytes
                       in 60 blocks definitely lost, which the program
                       knows), with the leaking functions named
    host:dlsym-ctypes  python3 leaking through ctypes (CDLL("libc.so.6")
                       .malloc): the 30 blocks of 4,000 bytes it drops are
                       lost, in records allocated through ffi_call:
                       definitely lost, or one of them possibly lost when
                       a stale pointer into it stays in Python's memory
                       (valgrind memcheck says the same of the same run:
                       116,000 bytes in 29 blocks definitely, 4,000 in 1
                       possibly, seen 2026-11-28; the morning's runs had
                       all 30 definitely lost)
    host:canonical-plt a -no-pie program that takes malloc's address
                       (tests/progs/nopie_malloc_addr.c; Debian's
                       python3 is built so too): no warning about another
                       allocator, and its 7 leaked blocks of 1,000 bytes are
                       found, through the pointer and the direct calls alike
"""
import os
import re
import sys

import run_tests as rt
from run_tests import Failure
import common

HERE = os.path.dirname(os.path.abspath(__file__))


def build(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "dlsym"))
    lib = os.path.join(work, "libdlsym_wrap.so")
    prog = os.path.join(work, "dlsym_alloc")
    for cmd in ([suite.cc, "-g", "-O1", "-shared", "-fPIC", "-o", lib,
                 os.path.join(os.path.dirname(HERE), "progs", "dlsym_wrap.c")],
                [suite.cc, "-g", "-O1", "-I", common.PROGS, "-o", prog,
                 os.path.join(os.path.dirname(HERE), "progs", "dlsym_alloc.c"), "-L", work,
                 "-ldlsym_wrap", "-Wl,-rpath," + work, "-ldl"]):
        rc, _, err = rt.run(cmd)
        if rc != 0:
            raise Failure("%s: %s" % (" ".join(cmd[:6]), rt.short(err)))
    return work, prog


def summary(text, kind):
    m = re.search(r"%s: ([\d,]+) bytes in ([\d,]+) blocks?" % kind, text)
    return (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))) if m else None


def test_handle(suite):
    work, prog = build(suite)
    problems = []
    rc0, out0, err0 = rt.run([prog])
    if rc0 != 0 or out0 != b"wrapped: done\n":
        raise Failure("bare run: status %d, stdout %r" % (rc0, out0))
    rc, vout, verr = rt.run(["valgrind", "--leak-check=full", prog], timeout=rt.VG_TIMEOUT)
    vg = summary(verr.decode(errors="replace"), "definitely lost")
    if vg != (203000, 60):
        problems.append("valgrind: definitely lost %s, expected (203000, 60) as the "
                        "program knows" % (vg,))
    out = os.path.join(work, "run")
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-o", out, "--", prog])
    text = (hout + herr).decode(errors="replace")
    if not hout.startswith(out0):
        problems.append("stdout under heaptrail %r, bare %r" % (hout[:200], out0))
    if rc not in (0, 1):
        problems.append("heaptrail run: status %d: %s" % (rc, rt.short(herr)))
    ht = summary(text, "definitely lost")
    if ht != vg:
        problems.append("heaptrail: definitely lost %s, valgrind %s" % (ht, vg))
    for fn in ("leak_dlsym_malloc", "leak_dlsym_calloc"):
        if fn not in text:
            problems.append("the report does not name %s" % fn)
    return problems, [text[-1500:]]


CTYPES = r"""
import ctypes
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
for i in range(30):
    libc.malloc(4000)
print("done")
"""


def test_ctypes(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "dlsym-ctypes"))
    out = os.path.join(work, "run")
    env = dict(rt.RUN_ENV)
    env.pop("PYTHONPATH", None)
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-o", out, "--", sys.executable,
                             "-c", CTYPES], env=env, timeout=120)
    text = (hout + herr).decode(errors="replace")
    problems = []
    if not hout.startswith(b"done\n"):
        problems.append("stdout %r" % hout[:200])
    lost = {"definitely": [0, 0], "possibly": [0, 0]}
    for rec in re.split(r"\n(?=[\d,]+ bytes in [\d,]+ blocks? )", text):
        m = re.match(r"([\d,]+) bytes in ([\d,]+) blocks? (definitely|possibly) lost", rec)
        if m and "ffi_call" in rec:
            lost[m.group(3)][0] += int(m.group(1).replace(",", ""))
            lost[m.group(3)][1] += int(m.group(2).replace(",", ""))
    total = [lost["definitely"][i] + lost["possibly"][i] for i in (0, 1)]
    if total != [120000, 30] or lost["definitely"][1] < 29:
        problems.append("records through ffi_call: %s, want 120,000 bytes in 30 blocks lost, "
                        "29 of them definitely at least" % lost)
    return problems, [text[-1500:]]


def test_canonical_plt(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "nopie"))
    prog = os.path.join(work, "nopie_malloc_addr")
    rc, _, err = rt.run([suite.cc, "-g", "-O1", "-fno-pie", "-no-pie", "-o", prog,
                         os.path.join(os.path.dirname(HERE), "progs", "nopie_malloc_addr.c")], env=os.environ)
    if rc:
        raise Failure("build failed: %s" % rt.short(err))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-o", os.path.join(work, "run"), "--",
                             prog], env=rt.RUN_ENV, timeout=60)
    text = (hout + herr).decode(errors="replace")
    problems = []
    if rc != 0 or hout != b"done\n":
        problems.append("status %d, stdout %r" % (rc, hout[:200]))
    if "not heaptrail's" in text or "was that of" in text:
        problems.append("warned about another allocator")
    if not re.search(r"definitely lost: 7,000 bytes in 7 blocks", text):
        problems.append("the summary does not say 7,000 bytes in 7 blocks definitely lost")
    return problems, [text[-1200:]]


def collect(suite):
    return [("host:dlsym-handle", lambda: test_handle(suite)),
            ("host:dlsym-ctypes", lambda: test_ctypes(suite)),
            ("host:canonical-plt", lambda: test_canonical_plt(suite))]
