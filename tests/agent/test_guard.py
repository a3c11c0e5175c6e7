"""--guard (issue 31): allocations on guarded pages, GWP-ASan's idea,
with valgrind memcheck as the oracle for what each fault is.
tests/progs/guard_faults.c, built -O0.

    guard:overflow   `guard_faults overflow` (one byte written past a
                     block of 32) under `heaptrail run --guard 1`, 100
                     times: in at least 95 the program dies of SIGSEGV
                     (bare and under valgrind it goes on) and the report
                     holds one overflow whose access (write), access
                     site, offset ("0 bytes after a block of size 32")
                     and allocation site are valgrind's
    guard:uaf        `guard_faults uaf` (a byte read after the block's
                     free), 100 times: the same, with the free site
                     (bare, the byte read is whatever glibc left there)
    guard:sampled    `guard_faults overflow 4096` under `--sample 512 --guard
                     1`, 20 times: the block is sampled with probability
                     1 - e^-8 (99.97 %), and every sampled block is guarded
                     (a rate finer than S): at least 19 caught, as valgrind
                     reports it (a block of 4096: 0 bytes after)
    guard:slack      `guard_faults slack 13` (one byte written past a block
                     of 13, then the block freed in release()) under
                     --guard 1, 100 times: the byte lands in the 3 bytes
                     between the block's end and its guarded page, so
                     nothing faults; in at least 95 runs the program goes
                     on as bare and under valgrind (status 0, "slack
                     done") and the report holds one overflow, found at
                     the free: the access (write), offset ("0 bytes after
                     a block of size 13") and allocation site valgrind
                     reports, no access stack (the write was not seen),
                     and the free site release's free() (its line read
                     from the source); and `guard_faults overflow 13`
                     (never freed), 20 times: at least 19 hold the same
                     overflow found at the exit's report, no free site
    guard:continue   --guard-continue: the program goes on as bare and
                     under valgrind (same stdout, status 0), the one
                     error is in the report and counts for
                     --error-exitcode
    guard:handler    the program's own SIGSEGV handler: it still runs
                     (says "caught", exits 3) after heaptrail has counted
                     the overflow, which the report holds
    guard:clean      `guard_faults clean` (blocks of 1 to 5,000 bytes from
                     malloc, calloc, aligned_alloc, posix_memalign and
                     realloc, their contents and alignment checked), and a
                     python3 script, under --guard 1: stdout and status
                     as bare, no error, and the report says how many
                     blocks were guarded (of clean's, every one of 32
                     bytes or more that fits a page, and no more than
                     it allocated)
    guard:options    --guard 0, --guard x and --guard-continue alone are
                     refused with one line and status 2 (by run and
                     attach), and attach's --guard with --slots-only
    guard:attach     `guard_faults wait MODE` started bare, attached with
                     `--sample 1 --guard 1`, then told to go, 10 times
                     each: uaf and overflow die of SIGSEGV with the one
                     error valgrind reports (its sites, access, offset)
                     in the report written at the death; overflow with
                     --guard-continue goes on as under valgrind (status
                     and stdout) and its exit report holds the error;
                     `late_handler` (its own SIGSEGV handler set after the
                     attach, which the guard cannot hook there, then a
                     block overflowed): the guard turns itself off with
                     one line at the next block it would place, and the
                     program runs as bare (before: its handler caught the
                     guard's fault and it exited 3); `usable` (libc's own
                     malloc_usable_size, looked up before the attach, on
                     page-aligned blocks and blocks of 4,090 bytes): each
                     at least its size, no fault (a block at its page's
                     start would have had its size word on the guard page)
"""
import concurrent.futures
import json
import os
import re
import subprocess

import run_tests as rt
from run_tests import Failure
import common
import test_attach as ta

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "progs", "guard_faults.c")
RUNS = 100
NONE_SUPPRESSED = {"errors": 0, "contexts": 0}   # error_summary's "suppressed"


def build(suite):
    work = os.path.join(suite.build, "e2e", "guard")
    return work, common.built_once(suite, SRC, os.path.join(work, "guard_faults"),
                                   ["-g", "-O0", "-Wno-use-after-free"])


def frames(lines):
    """(function, line) of valgrind's "at/by 0x...: fn (file:N)" lines."""
    out = []
    for l in lines:
        m = re.match(r"\s*(?:at|by) 0x[0-9A-F]+: (\S+) \((?:.*/)?[^/:()]+:(\d+)\)", l)
        if m:
            out.append((m.group(1), int(m.group(2))))
    return out


def valgrind_fault(prog, mode, *args):
    """valgrind's one error for `prog mode`: (access, access site, what,
    offset, size, free site, alloc site), and the run's stdout."""
    rc, vout, verr = rt.run(["valgrind", prog, mode] + list(args), timeout=rt.VG_TIMEOUT)
    lines = [re.sub(r"^==\d+== ?", "", l) for l in verr.decode(errors="replace").split("\n")]
    try:
        at = next(i for i, l in enumerate(lines) if l.startswith("Invalid "))
        addr = next(i for i in range(at, len(lines)) if lines[i].startswith(" Address "))
    except StopIteration:
        raise Failure("valgrind found no invalid access: %s" % rt.short(verr[-400:]))
    access = "write" if lines[at].startswith("Invalid write") else "read"
    m = re.search(r"is ([\d,]+) bytes (after|inside) a block of size ([\d,]+) "
                  r"(alloc'd|free'd)", lines[addr].replace(",", ""))
    if not m:
        raise Failure("valgrind's address line not understood: %r" % lines[addr])
    size = int(m.group(3))
    offset = int(m.group(1)) + (size if m.group(2) == "after" else 0)
    rest = lines[addr + 1:]
    end = rest.index("") if "" in rest else len(rest)
    rest = rest[:end]
    free_site = None
    if m.group(4) == "free'd":
        was = next(i for i, l in enumerate(rest) if "Block was alloc'd at" in l)
        free_site = frames(rest[:was])[0]
        alloc = frames(rest[was:])
    else:
        alloc = frames(rest)
    # frames() keeps the program's: the allocator's own ("(in vgpreload...)") go
    return ((access, frames(lines[at + 1:addr])[0], offset, size, free_site, alloc[0]),
            rc, vout)


def heaptrail_fault(e):
    def site(stack, k=0):
        return (stack[k]["function"], stack[k]["line"]) if len(stack) > k else None
    return (e["access"], site(e.get("access_stack", [])), e["offset"], e["size"],
            site(e["free_stack"]) if e.get("free_stack") else None, site(e["alloc_stack"]))


def one_run(suite, work, prog, mode, k, extra=(), args=()):
    out = os.path.join(work, "%s-%d%s" % (mode, k, "-".join(("",) + tuple(args))))
    rt.fresh_dir(out)
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "--guard", "1", "-o", out] +
                            list(extra) + ["--", prog, mode] + list(args))
    jrc, jout, jerr = rt.run([suite.heaptrail, "report", "--json", out])
    report = json.loads(jout) if jrc == 0 else {}
    return rc, hout, report


def many(suite, mode, runs=RUNS, want=95, extra=(), args=()):
    work, prog = build(suite)
    vg, vrc, vout = valgrind_fault(prog, mode, *args)
    rc0, out0, _ = rt.run([prog, mode] + list(args))
    problems = []
    # the byte read after the free is the allocator's business bare
    # (glibc's tcache writes into a freed block): only the status is asked
    if rc0 != 0 or vrc != 0 or (mode == "overflow" and out0 != vout):
        problems.append("bare: status %d, stdout %r; valgrind: status %d, stdout %r" % (
            rc0, out0, vrc, vout))
    caught, wrong = 0, []
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        done = list(ex.map(lambda k: one_run(suite, work, prog, mode, k, extra, args),
                           range(runs)))
    for rc, hout, report in done:
        errs = report.get("errors", [])
        got = [heaptrail_fault(e) for e in errs]
        if rc == -11 or rc == 139:
            if got == [vg] and report.get("error_summary") == {"errors": 1, "contexts": 1,
                                                             "suppressed": NONE_SUPPRESSED}:
                caught += 1
            elif len(wrong) < 3:
                wrong.append(got)
        elif len(wrong) < 3:
            wrong.append("status %d, stdout %r, errors %s" % (rc, hout, got))
    if caught < want:
        problems.append("caught as valgrind reports it in %d of %d runs (want %d): "
                        "valgrind %s; others: %s" % (caught, runs, want, vg, wrong))
    return problems, ["valgrind: %s" % (vg,), "%d of %d caught" % (caught, runs)]


def source_line(marker):
    """The line of guard_faults.c that holds marker."""
    with open(SRC) as f:
        for i, l in enumerate(f, 1):
            if marker in l:
                return i
    raise Failure("no %r in %s" % (marker, SRC))


def test_slack(suite):
    work, prog = build(suite)
    problems, details = [], []
    for mode, runs, want, found_at in (("slack", RUNS, 95, "free"),
                                       ("overflow", 20, 19, "report")):
        vg, vrc, vout = valgrind_fault(prog, mode, "13")
        rc0, out0, _ = rt.run([prog, mode, "13"])
        if (rc0, out0) != (vrc, vout) or rc0 != 0:
            problems.append("%s: bare status %d, stdout %r; valgrind %d, %r" % (
                mode, rc0, out0, vrc, vout))
        access, _, offset, size, _, alloc = vg
        free_site = ("release", source_line("release's free")) if found_at == "free" else None
        expect = (access, None, offset, size, free_site, alloc)
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            done = list(ex.map(lambda k: one_run(suite, work, prog, mode, k, (), ("13",)),
                               range(runs)))
        caught, wrong = 0, []
        for rc, hout, report in done:
            errs = report.get("errors", [])
            got = [heaptrail_fault(e) for e in errs]
            if (rc, hout) == (rc0, out0) and got == [expect] and \
                    errs[0].get("found_at") == found_at and \
                    report.get("error_summary") == {"errors": 1, "contexts": 1,
                                                    "suppressed": NONE_SUPPRESSED}:
                caught += 1
            elif len(wrong) < 3:
                wrong.append("status %d, stdout %r, errors %s" % (
                    rc, hout, [(g, e.get("found_at")) for g, e in zip(got, errs)]))
        if caught < want:
            problems.append("%s 13: caught as valgrind reports it in %d of %d runs (want %d): "
                            "want %s; others: %s" % (mode, caught, runs, want, expect, wrong))
        details.append("%s 13: %d of %d caught, valgrind %s" % (mode, caught, runs, vg))
    return problems, details


def test_continue(suite):
    work, prog = build(suite)
    problems = []
    for mode in ("overflow", "uaf"):
        vg, vrc, vout = valgrind_fault(prog, mode)
        rc, hout, report = one_run(suite, work, prog, mode, 0, ["--guard-continue"])
        got = [heaptrail_fault(e) for e in report.get("errors", [])]
        if (rc, hout) != (vrc, vout):
            problems.append("%s: status %d, stdout %r; valgrind's: %d, %r" % (
                mode, rc, hout, vrc, vout))
        if got != [vg]:
            problems.append("%s: errors %s, valgrind %s" % (mode, got, vg))
        out = os.path.join(work, "exitcode-" + mode)
        rt.fresh_dir(out)
        rc, _, _ = rt.run([suite.heaptrail, "run", "-q", "--guard", "1", "--guard-continue",
                           "--error-exitcode=42", "-o", out, "--", prog, mode])
        if rc != 42:
            problems.append("%s: --error-exitcode=42: status %d" % (mode, rc))
    return problems, []


def test_handler(suite):
    work, prog = build(suite)
    vg, _, _ = valgrind_fault(prog, "overflow")
    rc, hout, report = one_run(suite, work, prog, "handler", 0)
    problems = []
    if (rc, hout) != (3, b"caught\n"):
        problems.append("status %d, stdout %r: the program's handler should say 'caught' "
                        "and exit 3" % (rc, hout))
    got = [heaptrail_fault(e) for e in report.get("errors", [])]
    if got != [vg]:
        problems.append("errors %s, valgrind (of overflow) %s" % (got, vg))
    return problems, []


def test_clean(suite):
    work, prog = build(suite)
    problems = []
    script = ("import json, re\n"
              "d = {str(i): [i] * (i % 50) for i in range(20000)}\n"
              "s = json.dumps(d)\n"
              "print(len(s), len(re.findall(r'[0-9]+', s)), len(json.loads(s)))\n")
    for name, cmd in (("clean", [prog, "clean"]), ("python3", ["python3", "-c", script])):
        rc0, out0, _ = rt.run(cmd)
        out = os.path.join(work, "clean-" + name)
        rt.fresh_dir(out)
        rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "--no-follow-children",
                                 "--guard", "1", "-o", out, "--"] + cmd)
        if (rc, hout) != (rc0, out0):
            problems.append("%s: status %d, stdout %r; bare %d, %r" % (name, rc, hout, rc0, out0))
        jrc, jout, _ = rt.run([suite.heaptrail, "report", "--json", out])
        report = json.loads(jout) if jrc == 0 else {}
        if report.get("error_summary") != {"errors": 0, "contexts": 0,
                                           "suppressed": NONE_SUPPRESSED}:
            problems.append("%s: %s" % (name, report.get("error_summary")))
        guard = report.get("guard", {})
        if not guard.get("guarded"):
            problems.append("%s: no block guarded: %s" % (name, guard))
        if name == "clean":
            # its blocks of a page or less: 3 of each size (malloc,
            # calloc, posix_memalign) and aligned_alloc's (rounded up to
            # 64); at --guard 1 each of 32 bytes or more is picked but
            # with a chance of e^-32, the smaller ones mostly; and stdout's
            # buffer may be one more
            sizes, n = [], 1
            while n <= 5000:
                sizes.append(n)
                n = n * 3 // 2 + 1
            blocks = [k for k in sizes if k <= 4096] * 3 + \
                [(k + 63) & ~63 for k in sizes if ((k + 63) & ~63) <= 4096]
            low = sum(k >= 32 for k in blocks)
            got = guard.get("guarded", 0)
            if not low <= got <= len(blocks) + 1:
                problems.append("clean: %s blocks guarded, want %d to %d" % (
                    got, low, len(blocks) + 1))
    return problems, []


def test_options(suite):
    work, prog = build(suite)
    problems = []
    for args in (["--guard", "0"], ["--guard", "x"], ["--guard-continue"]):
        rc, out, err = rt.run([suite.heaptrail, "run", "-o", os.path.join(work, "opt")] + args +
                              ["--", prog, "clean"])
        lines = err.decode(errors="replace").strip().split("\n")
        if rc != 2 or len(lines) != 1 or "guard" not in lines[0] or out:
            problems.append("%s: status %d, stderr %r" % (" ".join(args), rc, err[:300]))
    # refused before any process is looked at: pid 1 is never touched
    for args in (["--guard", "0"], ["--guard", "x"], ["--guard-continue"],
                 ["--guard", "1m", "--slots-only"]):
        rc, out, err = rt.run([suite.heaptrail, "attach"] + args + ["1"])
        lines = err.decode(errors="replace").strip().split("\n")
        if rc != 2 or len(lines) != 1 or "guard" not in lines[0] or out:
            problems.append("attach %s: status %d, stderr %r" % (" ".join(args), rc, err[:300]))
    return problems, []


def attach_once(suite, work, prog, mode, k, extra=()):
    """`prog wait mode` attached with --guard 1 and told to go: its
    status, stdout after "ready", and the report's JSON ({} if none)."""
    out = ta.new_dir(os.path.join(work, "attach-%s-%d%s" % (mode, k, "".join(extra))))
    t = ta.Target(None, work, argv=[prog, "wait", mode])
    try:
        rc, _, err = ta.heaptrail(suite, "attach", "--sample", "1", "--guard", "1", "-o", out,
                                  *(list(extra) + [str(t.p.pid)]))
        if rc:
            raise Failure("attach: status %d, %s" % (rc, rt.short(err)))
        try:
            hout, herr = t.p.communicate(b"go\n", timeout=30)
        except subprocess.TimeoutExpired:
            raise Failure("%s: the target did not end" % mode)
    finally:
        t.kill()
    jrc, jout, _ = rt.run([suite.heaptrail, "report", "--json", out])
    return t.p.returncode, hout, json.loads(jout) if jrc == 0 else {}, herr


def test_attach(suite):
    work, prog = build(suite)
    problems, details = [], []
    for mode, extra, runs in (("uaf", (), 10), ("overflow", (), 10),
                              ("overflow", ("--guard-continue",), 3)):
        vg, vrc, vout = valgrind_fault(prog, mode)
        want_rc, want_out = (vrc, vout) if extra else (-11, b"")
        caught, wrong = 0, []
        for k in range(runs):
            rc, hout, report, _ = attach_once(suite, work, prog, mode, k, extra)
            got = [heaptrail_fault(e) for e in report.get("errors", [])]
            if (rc, hout) == (want_rc, want_out) and got == [vg] and \
                    report.get("error_summary") == {"errors": 1, "contexts": 1,
                                                    "suppressed": NONE_SUPPRESSED}:
                caught += 1
            elif len(wrong) < 3:
                wrong.append("status %d, stdout %r, errors %s" % (rc, hout, got))
        if caught < runs:
            problems.append("%s %s: caught as valgrind reports it in %d of %d attaches (want "
                            "all: valgrind %s, status %d, stdout %r); others: %s" % (
                                mode, " ".join(extra), caught, runs, vg, want_rc, want_out,
                                wrong))
        details.append("%s %s: %d of %d" % (mode, " ".join(extra), caught, runs))
    # its own handler set after the attach: the guard steps aside, and the
    # program runs as bare (before: its handler got the guard's fault)
    rc0, out0, _ = rt.run([prog, "late_handler"])
    rc, hout, report, herr = attach_once(suite, work, prog, "late_handler", 0)
    if (rc, hout) != (rc0, out0) or b"--guard is off from here" not in herr or \
            report.get("errors"):
        problems.append("late_handler: status %d, stdout %r (bare %d, %r), stderr %r, errors %s"
                        % (rc, hout, rc0, out0, herr[-300:], report.get("errors")))
    # libc's own malloc_usable_size through a saved pointer reads the
    # word before a block: never a guard page (a block at its page's
    # start is not guarded at an attach), never a size into the slack
    rc, hout, report, herr = attach_once(suite, work, prog, "usable", 0)
    if (rc, hout) != (0, b"usable ok\n") or report.get("errors"):
        problems.append("usable: status %d, stdout %r, stderr %r, errors %s (want 0, "
                        "'usable ok')" % (rc, hout, herr[-300:], report.get("errors")))
    return problems, details


def collect(suite):
    return [("guard:overflow", lambda: many(suite, "overflow")),
            ("guard:uaf", lambda: many(suite, "uaf")),
            ("guard:sampled", lambda: many(suite, "overflow", 20, 19, ["--sample", "512"],
                                           ["4096"])),
            ("guard:slack", lambda: test_slack(suite)),
            ("guard:continue", lambda: test_continue(suite)),
            ("guard:handler", lambda: test_handler(suite)),
            ("guard:clean", lambda: test_clean(suite)),
            ("guard:options", lambda: test_options(suite)),
            ("guard:attach", lambda: test_attach(suite))]
