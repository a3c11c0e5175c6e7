"""Heap errors (issue 31): blocks given back by the wrong family, found
by heaptrail in exact mode, with valgrind memcheck as the oracle.

    errors:mismatched  tests/progs/heap_errors.cc (malloc then delete,
                       new[] then delete, new then free, new then
                       delete[], malloc then delete[] three times at one
                       line, new then realloc; blocks given back rightly
                       in between): `valgrind -s` and `heaptrail run`
                       (then `heaptrail report --json`) must find the same
                       contexts: the same kind, count, size, allocator and
                       deallocator, and the same allocation and free sites
                       (function and line of the program's frame); the
                       same "N errors from M contexts"; the program's
                       stdout and status as bare and under valgrind; the
                       text report says "Mismatched free() / delete /
                       delete []" once per context and "ERROR SUMMARY: 8
                       errors from 6 contexts"; with --error-exitcode=42
                       the run exits 42, as valgrind's does
    errors:invalid     tests/progs/heap_invalid.c (free of a pointer 4
                       bytes into a block of 10, free of a global twice at
                       one line, free of an array on main's stack, realloc
                       of a global): the same contexts as `valgrind -s`
                       (kind, count, free site, and where the address is:
                       in a block, at what offset, of what size, allocated
                       where; in a global; on the stack; given back before,
                       where first, allocated where: a block freed twice),
                       and no error for blocks freed, allocated again
                       (perhaps at the same address) and freed: "6 errors
                       from 5 contexts"; bare, glibc aborts the program (status
                       134); under valgrind and heaptrail it prints "done
                       null" and exits 0
    errors:sampled     `heap_errors many 2000` (2,000 blocks of 4 KiB from
                       malloc, each given back by delete) under
                       `--sample 64k`: each block is sampled with
                       probability 1 - exp(-4096/65536) = 6.1 %, so about
                       121 errors are seen (the 99.99 % range of the
                       binomial, 80 to 163, is asked), from 1 context, and
                       the summary says only sampled blocks are checked;
                       valgrind sees all 2,000
    errors:sampled-double  tests/progs/sampled_double.c (64 KiB blocks,
                       each sampled at --sample 4096 with probability
                       1 - exp(-16): three freed by release, then by
                       free_again at one line; one freed by release,
                       then given to realloc_freed's realloc) under
                       `heaptrail run --sample 4096`: the quarantine
                       holds them, so their second free is known: the
                       contexts of `valgrind -s` (kind, where, free
                       site, size, first free site, allocation site),
                       "4 errors from 2 contexts"; bare, glibc aborts
                       (134); under valgrind and heaptrail the program's
                       stdout (the churn of 2,000 blocks after them
                       included) and status 0 are the same
    errors:guard-double  the same with blocks of 1,000 bytes (`sampled_double
                       small`), too small for the quarantine, under
                       `--sample 16 --guard 1`: every one guarded, its
                       page inaccessible after its free and its slot
                       not yet reused, so the second free and the
                       realloc are known there (guard.c), with the
                       first free's whole stack: valgrind's contexts
    errors:sampled-churn  `sampled_double churn 20000 4`: four threads
                       allocate and free 64 KiB blocks (all sampled)
                       fast, addresses coming back once the quarantine
                       lets them go (the program counts allocations
                       handed an address seen before: there must be
                       some): "0 errors from 0 contexts", as valgrind's
                       run of `churn 3000 4` (no invalid free), and the
                       bare run's stdout and status
    errors:sampled-e2e every e2e program of the vg/ht matrix
                       (tests/e2e/progs, with frame pointers) under `heaptrail run --sample 4096`:
                       the bare run's stdout and status, and no error
                       in any process where valgrind's run (the e2e
                       tests' own, cached) printed no invalid or
                       mismatched free
    errors:abort       heap_invalid under `heaptrail run --errors=abort`:
                       the program is stopped at its first error by its
                       own abort (status 134, "done null" never printed)
                       and the report written at the signal holds that
                       one error alone: valgrind's first error (under
                       --exit-on-first-error=yes: kind, free site, where
                       the address is, block size, offset, allocation
                       site), "1 error from 1 context"
    errors:supp-mismatched  heap_errors with suppressions (issue 31:
                       one file, a type per error kind): the file
                       `alloc_dealloc_mismatch:malloc_then_delete_array`,
                       with lines of the other types naming the other
                       contexts' functions (bad_free:, double_free:) and a
                       leak: line, hides that context alone: the contexts
                       left are valgrind's (`valgrind -s`, no suppression)
                       less that one, the summary valgrind's less its
                       count, and valgrind's own run with the same
                       suppression (Memcheck:Free, fun:*malloc_then_...*)
                       prints the ERROR SUMMARY heaptrail's text prints,
                       "(suppressed: N from M)" included, and the JSON's
                       error_summary.suppressed; with --error-exitcode=42
                       the run exits 42 while any error is left, and with
                       every error suppressed it exits as the program
                       does, as valgrind's run with a suppression of every
                       Free error does
    errors:supp-invalid heap_invalid, one suppression at a time, against
                       `valgrind -s`'s contexts less the one it names:
                       double_free:main hides the double free alone
                       (main is on every error's stacks), invalid_free:
                       free_global the global's two errors, and bad_free:
                       release (the double free's first free) and
                       alloc_dealloc_mismatch:main hide nothing; a line of
                       an unknown type, or max_bytes on an error type, is
                       refused with one line naming FILE:LINE; ASan's and
                       LSan's other types load and hide nothing
    errors:supp-gen    `heaptrail run --gen-suppressions` of heap_errors
                       prints one ready line after each error context; fed
                       back alone, each hides exactly its context: what is
                       left is valgrind's contexts less the one whose free
                       site is that context's; heap_invalid's through
                       `report --json --gen-suppressions` ("suppression" of
                       each error): each hides its context and what else
                       the documented matching asks, no more: valgrind's
                       contexts of the same type with the function the line
                       names on one of their stacks (bad_free:^main$ hides
                       all four bad frees, double_free:^main$ the one
                       double free)
    errors:supp-guard  --guard's faults (tests/progs/guard_faults.c, one
                       byte written past a block, one read after its
                       free) under --guard 1 --guard-continue: valgrind's
                       ERROR SUMMARY with a Memcheck:Addr1 suppression of
                       the faulting function is heaptrail's with
                       heap_buffer_overflow:^overflow$ (heap_use_after_free:
                       ^use_after$), "(suppressed: 1 from 1)", and its
                       ERROR SUMMARY without one is heaptrail's with the
                       other type's line (it hides nothing); the line
                       --gen-suppressions prints hides the error
    errors:new-delete  tests/progs/new_delete.cc (deletes of the right
                       family that disagree with their new: sized deletes
                       of the wrong size, one of them three times at one
                       line; aligned news given back by an unaligned
                       delete or one of another alignment, and a plain
                       new by an aligned delete), built -std=c++17 (sized
                       deallocation on): valgrind 3.19 has no such check,
                       so the oracle is AddressSanitizer, the same source
                       built with -fsanitize=address and run with
                       halt_on_error=0: each of its new-delete-type-
                       mismatch reports (an alignment mismatch when the
                       two alignments it prints differ, else a size
                       mismatch) is one of heaptrail's errors: the same
                       kind, count, block size, size or alignments the new
                       and the delete gave, allocator and deallocator, and
                       allocation and free sites (function and line),
                       "9 errors from 7 contexts"; stdout and status as
                       bare and under ASan; the text report says
                       "Mismatched new/delete size value" and "... alignment
                       alloc value" once per context; a suppression
                       new_delete_type_mismatch:^base_delete_thrice$ hides
                       that context alone ("(suppressed: 3 from 1)"), and
                       --gen-suppressions' lines are of that type
    errors:new-delete-right  `new_delete right` (its rightful half alone:
                       sized deletes of the right size from a virtual
                       destructor, new[] of a class with a destructor and
                       libstdc++'s containers of strings; aligned news and
                       deletes that agree, vectors and lists of an
                       over-aligned type, make_shared): no error, as ASan
                       finds none
    errors:none        the same program's rightful half alone (a run of
                       tests/e2e/progs/leak_one, which gives back nothing
                       wrongly): "ERROR SUMMARY: 0 errors from 0 contexts"
                       and no error record in the JSON
"""
import json
import os
import re

import run_tests as rt
from run_tests import Failure

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "progs", "heap_errors.cc")
INVALID_SRC = os.path.join(os.path.dirname(HERE), "progs", "heap_invalid.c")
DOUBLE_SRC = os.path.join(os.path.dirname(HERE), "progs", "sampled_double.c")
GUARD_SRC = os.path.join(os.path.dirname(HERE), "progs", "guard_faults.c")
NEW_DELETE_SRC = os.path.join(os.path.dirname(HERE), "progs", "new_delete.cc")

# valgrind's words for the allocators and deallocators it names
VG_FN = {"malloc": "malloc", "free": "free", "realloc": "realloc",
         "operator new(unsigned long)": "operator new",
         "operator new[](unsigned long)": "operator new[]",
         "operator delete(void*)": "operator delete",
         "operator delete(void*, unsigned long)": "operator delete",
         "operator delete[](void*)": "operator delete[]",
         "operator delete[](void*, unsigned long)": "operator delete[]"}


def compiled(suite, name, exe, compiler, flags, src):
    """(work directory, program): src built by compiler into a fresh
    build/e2e/errors-NAME/EXE."""
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "errors-" + name))
    prog = os.path.join(work, exe)
    rc, _, err = rt.run([compiler, "-g", "-O1"] + flags + ["-o", prog, src])
    if rc != 0:
        raise Failure("%s %s: %s" % (os.path.basename(compiler), os.path.basename(src),
                                     rt.short(err)))
    return work, prog


def build(suite, name):
    return compiled(suite, name, "heap_errors", suite.cxx, ["-Wno-mismatched-new-delete"], SRC)


def build_invalid(suite, name):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "errors-" + name))
    prog = os.path.join(work, "heap_invalid")
    rc, _, err = rt.run([suite.cc, "-g", "-O1", "-Wno-free-nonheap-object", "-o", prog,
                         INVALID_SRC])
    if rc != 0:
        raise Failure("cc heap_invalid.c: %s" % rt.short(err))
    return work, prog


def site(frame_text):
    """(function without its arguments, line) of "fn(...) (file.cc:12)"."""
    m = re.match(r"(.*?)(?:\(.*\))? \((?:.*/)?[^/:()]+:(\d+)\)$", frame_text.strip())
    return (m.group(1), int(m.group(2))) if m else (frame_text.strip(), None)


def valgrind_contexts(text, funcs=None):
    """{(kind, alloc fn, free fn, size, alloc site, free site): count}
    from `valgrind -s`'s "N errors in context K of M:" list, and its
    ERROR SUMMARY (errors, contexts). funcs, when given, is filled with
    each context's functions: those of every stack valgrind shows."""
    out = {}
    blocks = re.split(r"^==\d+== (\d+) errors in context \d+ of \d+:\n", text, flags=re.M)
    for count, body in zip(blocks[1::2], blocks[2::2]):
        lines = [re.sub(r"^==\d+== ?", "", l) for l in body.split("\n")]
        if lines and lines[0] in ("Invalid free() / delete / delete[] / realloc()",
                                  "Mismatched free() / delete / delete []") and \
                funcs is not None:
            lines = lines[:lines.index("") if "" in lines else len(lines)]
        if lines and lines[0] == "Invalid free() / delete / delete[] / realloc()":
            key = invalid_key(lines)
            out[key] = out.get(key, 0) + int(count)
            if funcs is not None:
                funcs[key] = stack_functions(lines)
            continue
        if not lines or lines[0] != "Mismatched free() / delete / delete []":
            continue
        addr = next(i for i, l in enumerate(lines) if "alloc'd" in l)
        size = int(re.search(r"block of size (\d+)", lines[addr]).group(1))
        free_frames = [l for l in lines[1:addr] if re.match(r"\s+(at|by) 0x", l)]
        alloc_frames = [l for l in lines[addr + 1:] if re.match(r"\s+(at|by) 0x", l)]

        def fn(l):
            return VG_FN.get(re.sub(r"^\s*(at|by) 0x[0-9A-F]+: ", "", l).split(" (in ")[0],
                             "?")

        def prog_site(ls):
            return site(re.sub(r"^\s*(at|by) 0x[0-9A-F]+: ", "", ls[1]))
        key = ("mismatched", fn(alloc_frames[0]), fn(free_frames[0]), size,
               prog_site(alloc_frames), prog_site(free_frames))
        out[key] = out.get(key, 0) + int(count)
        if funcs is not None:
            funcs[key] = stack_functions(lines)
    m = re.search(r"ERROR SUMMARY: (\d+) errors from (\d+) contexts", text)
    return out, (int(m.group(1)), int(m.group(2))) if m else None


def stack_functions(lines):
    """The functions of every frame of an error's lines."""
    return {frame_site(l)[0] for l in lines if re.match(r"\s+(at|by) 0x", l)}


def frame_site(l):
    return site(re.sub(r"^\s*(at|by) 0x[0-9A-F]+: ", "", l))


def invalid_key(lines):
    """An invalid free's context from valgrind's lines: (kind, where, free
    fn, free site, size, offset, alloc site) (None where it has none)."""
    frames = [l for l in lines[1:] if re.match(r"\s+(at|by) 0x", l)]
    fn = re.sub(r"^\s*at 0x[0-9A-F]+: ", "", frames[0]).split(" (in ")[0]
    addr = next(l for l in lines if l.strip().startswith("Address "))
    m = re.search(r"is 0 bytes inside a block of size ([\d,]+) free'd", addr)
    if m:
        after = lines[lines.index(addr) + 1:]
        was = next(i for i, l in enumerate(after) if "Block was alloc'd at" in l)
        first = [l for l in after[:was] if re.match(r"\s+(at|by) 0x", l)]
        alloc = [l for l in after[was:] if re.match(r"\s+(at|by) 0x", l)]
        return ("invalid", "freed", VG_FN.get(fn, fn), frame_site(frames[1]),
                int(m.group(1).replace(",", "")),
                frame_site(first[1]), frame_site(alloc[1]))
    m = re.search(r"is (\d+) bytes inside a block of size (\d+) alloc'd", addr)
    if m:
        alloc = [l for l in lines[lines.index(addr) + 1:] if re.match(r"\s+(at|by) 0x", l)]
        return ("invalid", "block", VG_FN.get(fn, fn), frame_site(frames[1]), int(m.group(2)),
                int(m.group(1)), frame_site(alloc[1]))
    where = "data" if re.search(r"inside data symbol|in the Data segment|in the BSS", addr) \
        else "stack" if "stack" in addr else addr
    return ("invalid", where, VG_FN.get(fn, fn), frame_site(frames[1]), None, None, None)


def context_key(e):
    """The key of valgrind_contexts for a context of heaptrail's JSON."""
    def prog_site(stack):
        f = stack[0] if stack else {}
        return (f.get("function"), f.get("line"))
    if e["kind"] == "invalid" and e["where"] == "freed":
        return ("invalid", "freed", e["deallocator"], prog_site(e["free_stack"]), e["size"],
                prog_site(e.get("first_free_stack", [])), prog_site(e["alloc_stack"]))
    if e["kind"] == "invalid":
        block = e["where"] == "block"
        return ("invalid", e["where"], e["deallocator"], prog_site(e["free_stack"]),
                e["size"] if block else None, e["offset"] if block else None,
                prog_site(e["alloc_stack"]) if block else None)
    return (e["kind"], e["allocator"], e["deallocator"], e["size"],
            prog_site(e["alloc_stack"]), prog_site(e["free_stack"]))


def heaptrail_contexts(report):
    out = {}
    for e in report.get("errors", []):
        key = context_key(e)
        out[key] = out.get(key, 0) + e["count"]
    s = report.get("error_summary", {})
    return out, (s.get("errors"), s.get("contexts"))


def against_valgrind(suite, problems, prog, out, stdout, vg, vg_summary):
    """`heaptrail run` of prog into out: its stdout and status 0, and its
    contexts and summary those valgrind found (vg, vg_summary). Returns
    heaptrail's stderr."""
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--", prog])
    if (rc, hout) != (0, stdout):
        problems.append("heaptrail run: status %d, stdout %r: %s" % (rc, hout, rt.short(herr)))
    rc, jout, jerr = rt.run([suite.heaptrail, "report", "--json", out])
    if rc != 0:
        raise Failure("heaptrail report --json: status %d: %s" % (rc, rt.short(jerr)))
    ht, ht_summary = heaptrail_contexts(json.loads(jout))
    if ht != vg:
        problems.append("contexts differ:\n  valgrind  %s\n  heaptrail %s" % (
            sorted(vg.items(), key=str), sorted(ht.items(), key=str)))
    if ht_summary != vg_summary:
        problems.append("error summary: heaptrail %s, valgrind %s" % (ht_summary, vg_summary))
    return herr.decode(errors="replace")


def test_mismatched(suite):
    work, prog = build(suite, "mismatched")
    problems, details = [], []
    rc0, out0, _ = rt.run([prog])
    if rc0 != 0 or out0 != b"done\n":
        raise Failure("bare run: status %d, stdout %r" % (rc0, out0))
    rc, vout, verr = rt.run(["valgrind", "-s", "--error-exitcode=42", prog],
                            timeout=rt.VG_TIMEOUT)
    vg, vg_summary = valgrind_contexts(verr.decode(errors="replace"))
    if (rc, vout) != (42, out0):
        problems.append("valgrind: status %d, stdout %r" % (rc, vout))
    if vg_summary != (8, 6) or len(vg) != 6:
        problems.append("valgrind: %s errors/contexts, %d read: the program means 8 "
                        "errors from 6 contexts" % (vg_summary, len(vg)))
    out = rt.fresh_dir(os.path.join(work, "run"))
    text = against_valgrind(suite, problems, prog, out, out0, vg, vg_summary)
    rc, tout, _ = rt.run([suite.heaptrail, "report", out])
    t = tout.decode(errors="replace")
    if t.count("Mismatched free() / delete / delete []") != 6 or \
            "ERROR SUMMARY: 8 errors from 6 contexts" not in t:
        problems.append("the text report:\n%s" % t[:3000])
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "--error-exitcode=42", "-o",
                             rt.fresh_dir(os.path.join(work, "ci")), "--", prog])
    if rc != 42:
        problems.append("--error-exitcode=42: status %d (valgrind's: 42)" % rc)
    details.append(text)
    return problems, details


def test_invalid(suite):
    work, prog = build_invalid(suite, "invalid")
    problems, details = [], []
    rc0, out0, err0 = rt.run([prog])
    if rc0 not in (134, -6) or b"free(): invalid pointer" not in err0:
        problems.append("bare run: status %d, stderr %r: glibc should abort it" % (
            rc0, err0[:200]))
    rc, vout, verr = rt.run(["valgrind", "-s", prog], timeout=rt.VG_TIMEOUT)
    vg, vg_summary = valgrind_contexts(verr.decode(errors="replace"))
    if (rc, vout) != (0, b"done null\n"):
        problems.append("valgrind: status %d, stdout %r" % (rc, vout))
    if vg_summary != (6, 5) or len(vg) != 5:
        problems.append("valgrind: %s errors/contexts, %d read: the program means 6 "
                        "errors from 5 contexts" % (vg_summary, len(vg)))
    out = rt.fresh_dir(os.path.join(work, "run"))
    against_valgrind(suite, problems, prog, out, b"done null\n", vg, vg_summary)
    rc, tout, _ = rt.run([suite.heaptrail, "report", out])
    details.append(tout.decode(errors="replace")[:3000])
    return problems, details


def test_sampled(suite):
    work, prog = build(suite, "sampled")
    out = rt.fresh_dir(os.path.join(work, "sampled"))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "--sample", "64k", "-o", out, "--",
                             prog, "many", "2000"])
    if (rc, hout) != (0, b"done\n"):
        raise Failure("heaptrail run: status %d, stdout %r: %s" % (rc, hout, rt.short(herr)))
    rc, jout, jerr = rt.run([suite.heaptrail, "report", "--json", out])
    if rc != 0:
        raise Failure("heaptrail report --json: status %d: %s" % (rc, rt.short(jerr)))
    report = json.loads(jout)
    problems = []
    s = report.get("error_summary", {})
    if not (80 <= s.get("errors", 0) <= 163 and s.get("contexts") == 1):
        problems.append("sampled at 64k: %s, want 80 to 163 errors from 1 context" % s)
    rc, tout, _ = rt.run([suite.heaptrail, "report", out])
    if "only the sampled blocks are checked" not in tout.decode(errors="replace"):
        problems.append("the summary does not say the check was sampled")
    rc, _, verr = rt.run(["valgrind", prog, "many", "2000"], timeout=rt.VG_TIMEOUT)
    if not re.search(rb"ERROR SUMMARY: 2000 errors from 1 contexts", verr):
        problems.append("valgrind: %s" % rt.short(verr[-300:]))
    return problems, ["%s" % s]


def build_double(suite, name):
    return compiled(suite, name, "sampled_double", suite.cc, ["-pthread"], DOUBLE_SRC)


def test_sampled_double(suite, name="sampled-double", args=(),
                        flags=("--sample", "4096")):
    work, prog = build_double(suite, name)
    problems, details = [], []
    rc0, out0, err0 = rt.run([prog] + list(args))
    if rc0 not in (134, -6) or b"free" not in err0:
        problems.append("bare run: status %d, stderr %r: glibc should abort it" % (
            rc0, err0[:200]))
    rc, vout, verr = rt.run(["valgrind", "-s", prog] + list(args), timeout=rt.VG_TIMEOUT)
    vg, vg_summary = valgrind_contexts(verr.decode(errors="replace"))
    if rc != 0 or not vout.endswith(b"done null\n"):
        problems.append("valgrind: status %d, stdout %r" % (rc, vout))
    if vg_summary != (4, 2) or len(vg) != 2:
        raise Failure("valgrind: %s errors/contexts, %d read: the program means 4 errors "
                      "from 2 contexts" % (vg_summary, len(vg)))
    out = rt.fresh_dir(os.path.join(work, "run"))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q"] + list(flags) + ["-o", out,
                             "--", prog] + list(args))
    if (rc, hout) != (0, vout):
        problems.append("heaptrail run: status %d, stdout %r (valgrind's %r): %s" % (
            rc, hout, vout, rt.short(herr)))
    rc, jout, jerr = rt.run([suite.heaptrail, "report", "--json", out])
    if rc != 0:
        raise Failure("heaptrail report --json: status %d: %s" % (rc, rt.short(jerr)))
    ht, ht_summary = heaptrail_contexts(json.loads(jout))
    if ht != vg or ht_summary != vg_summary:
        problems.append("contexts differ:\n  valgrind  %s %s\n  heaptrail %s %s" % (
            sorted(vg.items(), key=str), vg_summary, sorted(ht.items(), key=str), ht_summary))
    details.append("%s" % sorted(ht.items(), key=str))
    return problems, details


def ht_errors(suite, out):
    """error_summary of heaptrail report --json out."""
    rc, jout, jerr = rt.run([suite.heaptrail, "report", "--json", out])
    if rc != 0:
        raise Failure("heaptrail report --json: status %d: %s" % (rc, rt.short(jerr)))
    return json.loads(jout).get("error_summary", {})


def test_sampled_churn(suite):
    work, prog = build_double(suite, "sampled-churn")
    problems, details = [], []
    rc, vout, verr = rt.run(["valgrind", prog, "churn", "3000", "4"], timeout=rt.VG_TIMEOUT)
    v = re.search(rb"ERROR SUMMARY: (\d+) errors", verr)
    if rc != 0 or not v or v.group(1) != b"0" or b"Invalid free" in verr:
        problems.append("valgrind churn 3000 4: status %d, %s" % (rc, rt.short(verr[-300:])))
    cmd = [prog, "churn", "20000", "4"]
    rc0, out0, _ = rt.run(cmd)
    out = rt.fresh_dir(os.path.join(work, "run"))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "--sample", "4096", "-o", out,
                             "--"] + cmd)
    if (rc, hout) != (rc0, out0) or rc0 != 0:
        problems.append("heaptrail run: status %d, stdout %r; bare %d, %r" % (
            rc, hout[:200], rc0, out0[:200]))
    m = re.search(rb"^reused (\d+)$", herr, re.M)
    if not m or int(m.group(1)) == 0:
        problems.append("no address came back under heaptrail: %s" % rt.short(herr[-300:]))
    s = ht_errors(suite, out)
    if (s.get("errors"), s.get("contexts")) != (0, 0):
        problems.append("errors in a churn without any: %s" % s)
    details.append("%s; %s" % (m and m.group(0).decode(), s))
    return problems, details


def test_sampled_e2e(suite):
    problems, details = [], []
    for name in sorted(suite.specs):
        spec = suite.specs[name]
        if spec.cli_only:   # not in the vg/ht matrix
            continue
        bare_rc, bare_out = suite.bare(spec, "fp")
        vg = suite.valgrind(spec, "fp")
        vg_free = sum(p.get("free_errors", 0) for p in vg["procs"])
        rc, out, err, outdir, jpath = suite.heaptrail_run(spec, "fp", "-sampled4096",
                                                          ["--sample", "4096", "-q"])
        if (rc, out) != (bare_rc, bare_out):
            problems.append("%s: status %d, stdout %r; bare %d, %r" % (
                name, rc, out[:120], bare_rc, bare_out[:120]))
        errors = [(o.get("pid"), o.get("error_summary", {}).get("errors", 0))
                  for o in rt.load_json_objects(jpath) if isinstance(o, dict)]
        found = sum(e for _, e in errors)
        if found and not vg_free:
            problems.append("%s: %d errors under --sample 4096 %s, none under valgrind" % (
                name, found, errors))
        details.append("%s: %d errors (valgrind: %d invalid or mismatched frees)" % (
            name, found, vg_free))
    return problems, details


def test_abort(suite):
    work, prog = build_invalid(suite, "abort")
    problems = []
    rc, vout, verr = rt.run(["valgrind", "--exit-on-first-error=yes", "--error-exitcode=1",
                             prog], timeout=rt.VG_TIMEOUT)
    lines = [re.sub(r"^==\d+== ?", "", l) for l in verr.decode(errors="replace").split("\n")]
    try:
        first = lines.index("Invalid free() / delete / delete[] / realloc()")
        end = lines.index("", first)
        vg = {invalid_key(lines[first:end]): 1}
    except (ValueError, StopIteration, AttributeError, IndexError):
        raise Failure("valgrind --exit-on-first-error: no invalid free read: %s" %
                      rt.short(verr[-400:]))
    if rc != 1 or vout:
        problems.append("valgrind: status %d, stdout %r: it should stop at the first "
                        "error" % (rc, vout))
    out = rt.fresh_dir(os.path.join(work, "run"))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "--errors=abort", "-o", out, "--",
                             prog])
    if rc not in (134, -6) or hout:
        problems.append("heaptrail run --errors=abort: status %d, stdout %r: want 134 "
                        "(SIGABRT) before any output" % (rc, hout))
    rc, jout, jerr = rt.run([suite.heaptrail, "report", "--json", out])
    if rc != 0:
        raise Failure("heaptrail report --json: status %d: %s" % (rc, rt.short(jerr)))
    ht, ht_summary = heaptrail_contexts(json.loads(jout))
    if ht != vg:
        problems.append("first error differs:\n  valgrind  %s\n  heaptrail %s" % (vg, ht))
    if ht_summary != (1, 1):
        problems.append("error summary %s, want 1 error from 1 context" % (ht_summary,))
    rc, _, _ = rt.run([suite.heaptrail, "run", "-q", "--errors=maybe", "-o", out, "--", prog])
    if rc != 2:
        problems.append("--errors=maybe accepted")
    return problems, ["%s" % ht]


def test_none(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "errors-none"))
    prog = suite.build_prog(suite.specs["leak_one"], "fp")
    out = os.path.join(work, "run")
    rc, _, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--", prog])
    rc, jout, jerr = rt.run([suite.heaptrail, "report", "--json", out])
    if rc != 0:
        raise Failure("heaptrail report --json: status %d: %s" % (rc, rt.short(jerr)))
    report = json.loads(jout)
    problems = []
    if report.get("error_summary") != {"errors": 0, "contexts": 0,
                                       "suppressed": {"errors": 0, "contexts": 0}} or \
            "errors" in report:
        problems.append("errors in a run with none: %r" % {k: report.get(k) for k in (
            "error_summary", "errors")})
    rc, tout, _ = rt.run([suite.heaptrail, "report", out])
    if "ERROR SUMMARY: 0 errors from 0 contexts" not in tout.decode(errors="replace"):
        problems.append("the text report lacks 'ERROR SUMMARY: 0 errors from 0 contexts'")
    return problems, []


VG_SUMMARY = r"ERROR SUMMARY: (\d+) errors? from (\d+) contexts? \(suppressed: (\d+) from (\d+)\)"


def write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def vg_free_supp(path, fun):
    """A valgrind suppression of the Free errors (mismatched and invalid
    frees) whose stack has a function matching fun (valgrind's glob)."""
    return write(path, ["{", "   free-" + re.sub(r"\W", "", fun), "   Memcheck:Free",
                        "   ...", "   fun:" + fun, "}"])


def valgrind_oracle(prog, means, funcs=None):
    """valgrind_contexts of `valgrind -s prog`, which must find the
    (errors, contexts) the program means to make."""
    rc, _, verr = rt.run(["valgrind", "-s", prog], timeout=rt.VG_TIMEOUT)
    vg, summary = valgrind_contexts(verr.decode(errors="replace"), funcs)
    if summary != means or len(vg) != means[1]:
        raise Failure("valgrind: %s errors/contexts, %d read: %s means %d errors from %d "
                      "contexts" % ((summary, len(vg), os.path.basename(prog)) + means))
    return vg


def ht_report(suite, out, supp):
    """heaptrail report --json of out with the suppressions file supp:
    (contexts, (errors, contexts), (suppressed errors, contexts))."""
    rc, jout, jerr = rt.run([suite.heaptrail, "report", "--json", "--suppressions", supp, out])
    if rc != 0:
        raise Failure("heaptrail report --json --suppressions %s: status %d: %s" % (
            os.path.basename(supp), rc, rt.short(jerr)))
    report = json.loads(jout)
    ht, summary = heaptrail_contexts(report)
    s = report.get("error_summary", {}).get("suppressed", {})
    return ht, summary, (s.get("errors"), s.get("contexts"))


def without(vg, keys):
    """valgrind's contexts less keys, its summary less theirs, and the
    suppressed counts those make."""
    left = {k: v for k, v in vg.items() if k not in keys}
    gone = sum(vg[k] for k in keys)
    return left, (sum(left.values()), len(left)), (gone, len(keys))


def check_suppressed(problems, what, got, want):
    if got != want:
        problems.append("%s:\n  want (valgrind less the context) %s\n  heaptrail %s" % (
            what, sorted(want[0].items(), key=str) + [want[1:]],
            sorted(got[0].items(), key=str) + [got[1:]]))


def free_fn(key):
    """The function that gave the block back, of a context key."""
    return key[5][0] if key[0] == "mismatched" else key[3][0]


def supp_type(key):
    """The suppression type of a context key (docs/usage/suppressions.md)."""
    return "alloc_dealloc_mismatch" if key[0] == "mismatched" else \
        "double_free" if key[1] == "freed" else "bad_free"


def test_supp_mismatched(suite):
    work, prog = build(suite, "supp-mismatched")
    problems, details = [], []
    vg = valgrind_oracle(prog, (8, 6))
    target = [k for k in vg if free_fn(k) == "malloc_then_delete_array"]
    if len(target) != 1 or vg[target[0]] != 3:
        raise Failure("valgrind: %s: 3 errors of the program's are from "
                      "malloc_then_delete_array" % vg)
    others = sorted({free_fn(k) for k in vg} - {"malloc_then_delete_array"})
    supp = write(os.path.join(work, "one.supp"),
                 ["# one file for leaks and heap errors",
                  "leak:malloc_then_delete",     # no leak there: nothing to hide
                  "alloc_dealloc_mismatch:malloc_then_delete_array"] +
                 ["bad_free:" + f for f in others] + ["double_free:" + f for f in others])
    out = rt.fresh_dir(os.path.join(work, "run"))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "--error-exitcode=42", "--suppressions",
                             supp, "-o", out, "--", prog])
    text = herr.decode(errors="replace")
    if rc != 42 or hout != b"done\n":
        problems.append("run --error-exitcode=42, errors left: status %d, stdout %r "
                        "(valgrind's: 42)" % (rc, hout))
    want = without(vg, target)
    check_suppressed(problems, "alloc_dealloc_mismatch:malloc_then_delete_array",
                     ht_report(suite, out, supp), want)
    # valgrind itself, suppressing the same context: its ERROR SUMMARY line
    vsupp = vg_free_supp(os.path.join(work, "one.vg.supp"), "*malloc_then_delete_array*")
    rc, _, verr = rt.run(["valgrind", "--suppressions=" + vsupp, "--error-exitcode=42", prog],
                         timeout=rt.VG_TIMEOUT)
    vline = re.search(VG_SUMMARY, verr.decode(errors="replace"))
    hline = re.search(VG_SUMMARY, text)
    if not vline or not hline or vline.groups() != hline.groups() or rc != 42:
        problems.append("ERROR SUMMARY: valgrind (status %d) %s, heaptrail %s" % (
            rc, vline and vline.group(0), hline and hline.group(0)))
    elif tuple(map(int, vline.groups())) != want[1] + want[2]:
        problems.append("valgrind's ERROR SUMMARY %s is not its contexts less the one "
                        "suppressed %s" % (vline.group(0), want[1:]))
    if text.count("Mismatched free() / delete / delete []") != 5 or \
            "malloc_then_delete_array" in text:
        problems.append("the text report with the suppressed context:\n%s" % text[:3000])
    # every error suppressed: the program's status, as under valgrind
    every = write(os.path.join(work, "every.supp"),
                  ["alloc_dealloc_mismatch:" + os.path.basename(SRC)])
    vevery = vg_free_supp(os.path.join(work, "every.vg.supp"), "*")
    rc_vg, _, verr = rt.run(["valgrind", "--suppressions=" + vevery, "--error-exitcode=42",
                             prog], timeout=rt.VG_TIMEOUT)
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "--error-exitcode=42",
                             "--suppressions", every, "-o",
                             rt.fresh_dir(os.path.join(work, "every")), "--", prog])
    hline = re.search(VG_SUMMARY, herr.decode(errors="replace"))
    vline = re.search(VG_SUMMARY, verr.decode(errors="replace"))
    if rc_vg != 0 or not vline or vline.group(1) != "0":
        problems.append("valgrind, every error suppressed: status %d, %s" % (
            rc_vg, vline and vline.group(0)))
    if rc != rc_vg or not hline or not vline or hline.groups() != vline.groups():
        problems.append("every error suppressed: heaptrail status %d, %s; valgrind "
                        "status %d, %s" % (rc, hline and hline.group(0), rc_vg,
                                           vline and vline.group(0)))
    details.append(text)
    return problems, details


def test_supp_invalid(suite):
    work, prog = build_invalid(suite, "supp-invalid")
    problems, details = [], []
    vg = valgrind_oracle(prog, (6, 5))
    out = rt.fresh_dir(os.path.join(work, "run"))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--", prog])
    if (rc, hout) != (0, b"done null\n"):
        raise Failure("heaptrail run: status %d, stdout %r: %s" % (rc, hout, rt.short(herr)))
    cases = [("double_free:main", lambda k: k[1] == "freed"),
             ("invalid_free:free_global", lambda k: k[3][0] == "free_global"),
             ("bad_free:release", lambda k: False),
             ("alloc_dealloc_mismatch:main", lambda k: False)]
    for i, (line, hidden) in enumerate(cases):
        keys = [k for k in vg if hidden(k)]
        supp = write(os.path.join(work, "case%d.supp" % i), [line])
        got = ht_report(suite, out, supp)
        check_suppressed(problems, line, got, without(vg, keys))
        details.append("%s: %s" % (line, got[1:]))
    asan = write(os.path.join(work, "asan.supp"),
                 ["interceptor_via_fun:main", "interceptor_name:free", "odr_violation:glob",
                  "interceptor_via_lib:libc.so", "called_from_lib:libc.so"])
    check_suppressed(problems, "ASan's and LSan's types", ht_report(suite, out, asan),
                     without(vg, []))
    for lines, bad in ((["# fine", "leak:x", "mismatch:main"], 3),
                       (["double_free:main:max_bytes=10"], 1),
                       (["invalid_free:"], 1)):
        f = write(os.path.join(work, "bad.supp"), lines)
        rc, rout, rerr = rt.run([suite.heaptrail, "report", "--suppressions", f, out])
        e = rerr.decode(errors="replace").strip()
        if rc == 0 or rout or "\n" in e or "bad.supp:%d:" % bad not in e:
            problems.append("%r: status %d, stdout %r, stderr %r: want one line naming "
                            "bad.supp:%d" % (lines, rc, rout[:100], e, bad))
        details.append(e)
    return problems, details


def test_supp_gen(suite):
    work, prog = build(suite, "supp-gen")
    problems, details = [], []
    vg = valgrind_oracle(prog, (8, 6))
    out = rt.fresh_dir(os.path.join(work, "run"))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "--gen-suppressions", "-o", out, "--",
                             prog])
    text = herr.decode(errors="replace")
    # each context: its free site's function (#1 of "given back at"), and
    # the suppression printed after it
    gen = re.findall(r"\[context \d+ of \d+\], given back at:\n    #0  .*\n    #1  (\w+) "
                     r"[^\n]*\n(?:.*\n)*?  suppression: (\S+)\n\n", text)
    if len(gen) != len(vg) or sorted(f for f, _ in gen) != sorted(free_fn(k) for k in vg):
        problems.append("--gen-suppressions: %d suppressions after %d contexts: %s" % (
            len(gen), len(vg), gen))
    for i, (fn, line) in enumerate(gen):
        supp = write(os.path.join(work, "gen%d.supp" % i), [line])
        keys = [k for k in vg if free_fn(k) == fn]
        check_suppressed(problems, "generated %s" % line, ht_report(suite, out, supp),
                         without(vg, keys))
        details.append(line)
    # heap_invalid, through `report --json --gen-suppressions`: each
    # context's line names the function that gave the block back, and
    # hides the errors of its type with that function on a stack; main,
    # on every stack, is named by three contexts (two bad frees and the
    # double free)
    iwork, iprog = build_invalid(suite, "supp-gen-invalid")
    funcs = {}
    ivg = valgrind_oracle(iprog, (6, 5), funcs)
    iout = rt.fresh_dir(os.path.join(iwork, "run"))
    rt.run([suite.heaptrail, "run", "-q", "-o", iout, "--", iprog])
    rc, jout, jerr = rt.run([suite.heaptrail, "report", "--json", "--gen-suppressions", iout])
    errors = json.loads(jout).get("errors", []) if rc == 0 else []
    if len(errors) != len(ivg):
        problems.append("heap_invalid: %d contexts in the JSON, valgrind %d: %s" % (
            len(errors), len(ivg), rt.short(jerr)))
    for i, e in enumerate(errors):
        key, line = context_key(e), e.get("suppression")
        if key not in ivg or not line:
            problems.append("heap_invalid: context %s (valgrind has it: %s), suppression %r" % (
                key, key in ivg, line))
            continue
        keys = [k for k in ivg if free_fn(key) in funcs[k] and supp_type(k) == supp_type(key)]
        supp = write(os.path.join(iwork, "gen%d.supp" % i), [line])
        check_suppressed(problems, "generated %s" % line, ht_report(suite, iout, supp),
                         without(ivg, keys))
        details.append("%s: %d of valgrind's contexts" % (line, len(keys)))
    return problems, details


def test_supp_guard(suite):
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "errors-supp-guard"))
    prog = os.path.join(work, "guard_faults")
    rc, _, err = rt.run([suite.cc, "-g", "-O0", "-Wno-use-after-free", "-o", prog, GUARD_SRC])
    if rc != 0:
        raise Failure("cc guard_faults.c: %s" % rt.short(err))
    problems, details = [], []
    modes = (("overflow", "heap_buffer_overflow", "overflow", "heap_use_after_free"),
             ("uaf", "heap_use_after_free", "use_after", "heap_buffer_overflow"))
    for mode, kind, fn, other in modes:
        # valgrind, without and with a suppression of the faulting function
        rc, _, verr = rt.run(["valgrind", prog, mode], timeout=rt.VG_TIMEOUT)
        vnone = re.search(VG_SUMMARY, verr.decode(errors="replace"))
        vsupp = write(os.path.join(work, mode + ".vg.supp"),
                      ["{", "   " + mode, "   Memcheck:Addr1", "   ...", "   fun:" + fn, "}"])
        rc, _, verr = rt.run(["valgrind", "--suppressions=" + vsupp, prog, mode],
                             timeout=rt.VG_TIMEOUT)
        vhid = re.search(VG_SUMMARY, verr.decode(errors="replace"))
        if not vnone or not vhid or vnone.groups() != ("1", "1", "0", "0") or \
                vhid.groups() != ("0", "0", "1", "1"):
            raise Failure("%s: valgrind %s, with the suppression %s: want 1 error, then "
                          "1 suppressed" % (mode, vnone and vnone.group(0),
                                            vhid and vhid.group(0)))
        # a guarded page catches the fault nearly always, not always
        for attempt in range(5):
            out = rt.fresh_dir(os.path.join(work, "%s%d" % (mode, attempt)))
            rc, _, herr = rt.run([suite.heaptrail, "run", "--guard", "1", "--guard-continue",
                                  "--gen-suppressions", "-o", out, "--", prog, mode])
            text = herr.decode(errors="replace")
            m = re.search(VG_SUMMARY, text)
            if m and m.group(1) == "1":
                break
        else:
            raise Failure("%s: no fault caught in 5 runs under --guard 1" % mode)
        gen = [g for g in re.findall(r"^  suppression: (\S+)$", text, re.M)
               if not g.startswith("leak:")]   # overflow's block is never freed
        cases = [(kind + ":^" + fn + "$", vhid), (other + ":^" + fn + "$", vnone)] + \
            [(g, vhid) for g in gen[:1]]
        if len(gen) != 1:
            problems.append("%s: --gen-suppressions printed %r" % (mode, gen))
        for i, (line, want) in enumerate(cases):
            supp = write(os.path.join(work, "%s%d.supp" % (mode, i)), [line])
            rc, tout, terr = rt.run([suite.heaptrail, "report", "--suppressions", supp, out])
            got = re.search(VG_SUMMARY, tout.decode(errors="replace"))
            if not got or got.groups() != want.groups():
                problems.append("%s, %s: heaptrail %s, valgrind %s" % (
                    mode, line, got and got.group(0), want.group(0)))
            details.append("%s %s: %s" % (mode, line, got and got.group(0)))
    return problems, details


def build_new_delete(suite, name):
    """new_delete.cc built plain and with ASan: (work, prog, asan_prog)."""
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "errors-" + name))
    prog, asan = os.path.join(work, "new_delete"), os.path.join(work, "new_delete_asan")
    flags = ["-g", "-O1", "-std=c++17", "-fsized-deallocation"]
    rc, _, err = rt.run([suite.cxx] + flags + ["-o", prog, NEW_DELETE_SRC])
    if rc != 0:
        raise Failure("g++ new_delete.cc: %s" % rt.short(err))
    rc, _, err = rt.run([suite.cxx] + flags + ["-fsanitize=address", "-o", asan,
                                               NEW_DELETE_SRC])
    if rc != 0:
        raise rt.Skip("g++ -fsanitize=address cannot build (libasan?): %s" % rt.short(err))
    return work, prog, asan


ASAN_ENV = dict(rt.RUN_ENV, ASAN_OPTIONS="halt_on_error=0:detect_leaks=0")


def asan_fn(frame):
    """heaptrail's name of ASan's "#0 0x... in operator delete(void*,
    unsigned long) ..." frame: "operator delete"."""
    m = re.search(r" in (operator (?:new|delete)(?:\[\])?)\(", frame)
    return m.group(1) if m else frame


def asan_site(frame):
    """(function, line) of ASan's "#1 0x... in fn(args) /path/file.cc:12"."""
    m = re.search(r" in (.+?)(?:\(.*\))? \S+:(\d+)(?::\d+)?$", frame.strip())
    return (m.group(1), int(m.group(2))) if m else (frame.strip(), None)


def asan_new_delete(text):
    """{key: count} of ASan's new-delete-type-mismatch reports, the key as
    new_delete_key's: an alignment mismatch when the two alignments ASan
    prints differ (0 for "default-aligned"), else a size mismatch."""
    def value(what, body):
        m = re.search(r"%s type:\s+(\d+) bytes|%s type:\s+(default-aligned)" % (what, what),
                      body)
        return None if not m else int(m.group(1)) if m.group(1) else 0
    out = {}
    for body in re.split(r"^==\d+==ERROR: AddressSanitizer: ", text, flags=re.M)[1:]:
        if not body.startswith("new-delete-type-mismatch"):
            continue
        free_part, _, alloc_part = body.partition("allocated by thread")
        ff = re.findall(r"^\s+#\d+ .*$", free_part, flags=re.M)
        af = re.findall(r"^\s+#\d+ .*$", alloc_part, flags=re.M)
        align_a = value("alignment of the allocated", body)
        align_d = value("alignment of the deallocated", body)
        if align_a != align_d:
            key = ("align_mismatch", asan_fn(af[0]), asan_fn(ff[0]), None, align_a, align_d,
                   asan_site(af[1]), asan_site(ff[1]))
        else:
            key = ("size_mismatch", asan_fn(af[0]), asan_fn(ff[0]),
                   value("size of the allocated", body), None,
                   value("size of the deallocated", body), asan_site(af[1]), asan_site(ff[1]))
        out[key] = out.get(key, 0) + 1
    return out


def new_delete_key(e):
    """The key of a size_mismatch or align_mismatch of heaptrail's JSON:
    (kind, allocator, deallocator, block size (size_mismatch; ASan prints
    it only there), the new's alignment, what the delete gave, sites)."""
    def prog_site(stack):
        f = stack[0] if stack else {}
        return (f.get("function"), f.get("line"))
    if e["kind"] == "align_mismatch":
        return (e["kind"], e["allocator"], e["deallocator"], None, e["alloc_align"] or 0,
                e["dealloc_align"] or 0, prog_site(e["alloc_stack"]),
                prog_site(e["free_stack"]))
    return (e["kind"], e["allocator"], e["deallocator"], e["size"], None, e["dealloc_size"],
            prog_site(e["alloc_stack"]), prog_site(e["free_stack"]))


def ht_new_delete(suite, out, *extra):
    """heaptrail's JSON of run out: ({key: count}, (errors, contexts),
    the report)."""
    rc, jout, jerr = rt.run([suite.heaptrail, "report", "--json"] + list(extra) + [out])
    if rc != 0:
        raise Failure("heaptrail report --json: status %d: %s" % (rc, rt.short(jerr)))
    report = json.loads(jout)
    got = {}
    for e in report.get("errors", []):
        k = new_delete_key(e) if e["kind"] in ("size_mismatch", "align_mismatch") else e["kind"]
        got[k] = got.get(k, 0) + e["count"]
    s = report.get("error_summary", {})
    return got, (s.get("errors"), s.get("contexts")), report


def test_new_delete(suite):
    work, prog, asan = build_new_delete(suite, "new-delete")
    problems, details = [], []
    rc0, out0, _ = rt.run([prog])
    if (rc0, out0) != (0, b"done\n"):
        raise Failure("bare run: status %d, stdout %r" % (rc0, out0))
    rc, aout, aerr = rt.run([asan], env=ASAN_ENV)
    want = asan_new_delete(aerr.decode(errors="replace"))
    if (rc, aout) != (0, out0):
        problems.append("ASan: status %d, stdout %r" % (rc, aout))
    if sum(want.values()) != 9 or len(want) != 7:
        problems.append("ASan: %d errors from %d contexts read, the program means 9 from 7: %s"
                        % (sum(want.values()), len(want), rt.short(aerr[-600:], 600)))
    out = rt.fresh_dir(os.path.join(work, "run"))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--", prog])
    if (rc, hout) != (0, out0):
        problems.append("heaptrail run: status %d, stdout %r: %s" % (rc, hout, rt.short(herr)))
    got, summary, _ = ht_new_delete(suite, out)
    if got != want:
        problems.append("contexts differ:\n  ASan      %s\n  heaptrail %s" % (
            sorted(want.items(), key=str), sorted(got.items(), key=str)))
    if summary != (9, 7):
        problems.append("error summary %s, want (9, 7) as ASan's" % (summary,))
    rc, tout, _ = rt.run([suite.heaptrail, "report", out])
    t = tout.decode(errors="replace")
    nsize = sum(1 for k in want if k[0] == "size_mismatch")
    if t.count("Mismatched new/delete size value: ") != nsize or \
            t.count("Mismatched new/delete alignment alloc value: ") != len(want) - nsize:
        problems.append("the text report:\n%s" % t[:3000])
    # a suppression of the type hides the one context it names
    supp = write(os.path.join(work, "nd.supp"),
                 ["new_delete_type_mismatch:^base_delete_thrice$",
                  "alloc_dealloc_mismatch:^base_delete$"])
    rc, tout, _ = rt.run([suite.heaptrail, "report", "--suppressions", supp, out])
    if "ERROR SUMMARY: 6 errors from 6 contexts (suppressed: 3 from 1)" not in \
            tout.decode(errors="replace"):
        problems.append("with %s: %s" % (supp, rt.short(tout[-400:], 400)))
    rc, jout, _ = rt.run([suite.heaptrail, "report", "--json", "--gen-suppressions", out])
    lines = [e.get("suppression", "") for e in json.loads(jout).get("errors", [])]
    if len(lines) != 7 or not all(l.startswith("new_delete_type_mismatch:") for l in lines):
        problems.append("--gen-suppressions: %s" % lines)
    details.append(t[:2000])
    return problems, details


def test_new_delete_right(suite):
    work, prog, asan = build_new_delete(suite, "new-delete-right")
    problems = []
    rc, aout, aerr = rt.run([asan, "right"], env=ASAN_ENV)
    if (rc, aout) != (0, b"done\n") or b"ERROR: AddressSanitizer" in aerr:
        problems.append("ASan: status %d, stdout %r: %s" % (rc, aout, rt.short(aerr[-400:])))
    out = rt.fresh_dir(os.path.join(work, "run"))
    rc, hout, herr = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--", prog, "right"])
    if (rc, hout) != (0, b"done\n"):
        problems.append("heaptrail run: status %d, stdout %r: %s" % (rc, hout, rt.short(herr)))
    got, summary, _ = ht_new_delete(suite, out)
    if got or summary != (0, 0):
        problems.append("errors where ASan finds none: %s %s" % (summary, got))
    return problems, []


def collect(suite):
    return [("errors:mismatched", lambda: test_mismatched(suite)),
            ("errors:invalid", lambda: test_invalid(suite)),
            ("errors:sampled", lambda: test_sampled(suite)),
            ("errors:sampled-double", lambda: test_sampled_double(suite)),
            ("errors:sampled-churn", lambda: test_sampled_churn(suite)),
            ("errors:guard-double", lambda: test_sampled_double(
                suite, "guard-double", ["small"], ["--sample", "16", "--guard", "1"])),
            ("errors:sampled-e2e", lambda: test_sampled_e2e(suite)),
            ("errors:abort", lambda: test_abort(suite)),
            ("errors:none", lambda: test_none(suite)),
            ("errors:new-delete", lambda: test_new_delete(suite)),
            ("errors:new-delete-right", lambda: test_new_delete_right(suite)),
            ("errors:supp-mismatched", lambda: test_supp_mismatched(suite)),
            ("errors:supp-invalid", lambda: test_supp_invalid(suite)),
            ("errors:supp-gen", lambda: test_supp_gen(suite)),
            ("errors:supp-guard", lambda: test_supp_guard(suite))]
