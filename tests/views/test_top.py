"""heaptrail top / diff / growth, checked against the real tools.

    top:pprof        `heaptrail top --bytes` and `pprof -top -unit=B` on the
                     same dumps of prof_cache (in-use and allocated space):
                     the same functions with the same flat and cum bytes
                     (both unbias each stack and truncate to an integer)
    top:jeprof       the same against `jeprof --text --show_bytes` (which
                     keeps fractions: within one byte per stack)
    top:jemalloc     a dump in jemalloc's own heap_v2 layout (prof_cache
                     run under Debian's libjemalloc2 with its profiler),
                     read by heaptrail top and by jeprof: same sites, same
                     bytes within rounding
    diff:pprof       `heaptrail diff OLD NEW` against `pprof -top -base OLD
                     NEW`: the same change per function; cache_grow first
    diff:first-dump  first_dump's two API dumps, the first taken before
                     anything was freed: pprof reads it with the four
                     sample types, so `pprof -base FIRST LATER` works, and
                     it, jeprof --base and `heaptrail diff` all say in use
                     +8000 (keep_late), allocated +23000 (with churn)
    growth:sites     growth_sites (a slow leak, a cache that fills then
                     stays flat, a churning site; tests/progs) run
                     exact and sampled (16 KiB): leak_slowly is the one
                     growing site, at the rate the program allocates
                     (within sampling noise); fill_cache is
                     "grew, then flat", churn is not growing
    growth:errors    fewer than three dumps, dumps of two processes, no
                     dumps in the directory: one-line errors
    top:hide         --hide '^cache_grow$': top's rows move its bytes to its
                     caller, and `pprof -top` on `heaptrail pprof --hide`'s
                     output shows the same rows (no cache_grow in either)
    top:data-maps    a dump whose maps list data mappings of files that are
                     gone (a SysV shared memory segment, a deleted file):
                     top shows the same rows and says nothing about them
    dump:metadata    the agent's '#' lines: every dump says when it was
                     taken (times increase with the sequence number, pid
                     as in the name), how much memory the agent maps
                     (agent_bytes), what the allocator counts in use
                     (heap_in_use, in some timed and API dumps), and names
                     the program's build-id as
                     readelf reads it from the file
    dump:fork-seq    fork_dumps: a forked child numbers its own dumps from
                     0000 (PARENT.0000, PARENT.0001, CHILD.0000), as the
                     parent does
    dump:exe-symlink a stripped program started through a symlink: the
                     dump names both files, `top` names its frames by the
                     link (without the line: by the file)
"""
import os
import re

import run_tests as rt
from run_tests import Failure, Skip
import common

# flat [±90% samples] flat% sum% cum [±90%] cum% function (the bracketed
# columns only for a sampled dump: the 90 % interval, "±N" or "+N/-M")
PM = r"(?:\s+(?:±\d+|\+\d+/-\d+))"
ROW = re.compile(r"^\s*(-?\d+)" + PM + r"?(?:\s+\d+)?\s+(-?[\d.]+)%\s+(-?[\d.]+)%\s+(-?\d+)" + PM +
                 r"?\s+(-?[\d.]+)%\s+(.+?)\s*$")


def heaptrail(suite, args, ok=True):
    rc, out, err = rt.run([suite.heaptrail] + args)
    if ok and rc != 0:
        raise Failure("heaptrail %s: status %d: %s" % (
            " ".join(args), rc, rt.short(err)))
    return rc, out.decode(), err.decode()


def ht_top(suite, dump, extra=()):
    """{"total", "rows": [(flat, cum, function)]} from heaptrail top."""
    _, out, _ = heaptrail(suite, ["top", "--bytes", "-n", "1000000"] + list(extra) + [dump])
    lines = out.split("\n")
    m = re.search(r" (-?\d+)(?: \(|$)", lines[0])
    if not m:
        raise Failure("heaptrail top: no total in %r" % lines[0])
    rows = [(int(r.group(1)), int(r.group(4)), r.group(6))
            for r in map(ROW.match, lines[2:]) if r]
    return {"total": int(m.group(1)), "rows": rows, "text": out}


# The same function under two names: libc6-dbg's DWARF names the
# function (what heaptrail and jeprof, through addr2line, print), pprof
# prints the exported symbol.
ALIASES = {"__libc_start_main_impl": "__libc_start_main"}
UNSYMBOLIZED = re.compile(r"\+0x[0-9a-f]+$")


def compare(label, ht, ref, tolerance, problems):
    ht = dict(ht, rows=[(a, b, ALIASES.get(f, f)) for a, b, f in ht["rows"]])
    ref = dict(ref, rows=[(a, b, ALIASES.get(f, f)) for a, b, f in ref["rows"]])
    # A pc in a library without debug info or a symbol around it: heaptrail
    # says "lib.so+0xOFFSET", jeprof the nearest exported symbol before it
    # (a wrong name). Such rows are paired by their numbers.
    for i, (flat, cum, f) in enumerate(ht["rows"]):
        if not UNSYMBOLIZED.search(f):
            continue
        for flat2, cum2, f2 in ref["rows"]:
            if abs(flat2 - flat) <= tolerance and abs(cum2 - cum) <= tolerance and \
                    f2 not in [x[2] for x in ht["rows"]]:
                ht["rows"][i] = (flat, cum, f2)
                break
    if abs(ht["total"] - ref["total"]) > tolerance:
        problems.append("%s: total %d, the tool says %d" % (label, ht["total"], ref["total"]))
    want = {f: (flat, cum) for flat, cum, f in ref["rows"] if flat or cum}
    got = {f: (flat, cum) for flat, cum, f in ht["rows"] if flat or cum}
    for f, (flat, cum) in want.items():
        if f not in got:
            problems.append("%s: %s (flat %d, cum %d) missing" % (label, f, flat, cum))
            continue
        gf, gc = got[f]
        if abs(gf - flat) > tolerance or abs(gc - cum) > tolerance:
            problems.append("%s: %s flat %d cum %d, the tool says %d %d" % (
                label, f, gf, gc, flat, cum))
    for f in got:
        if f not in want:
            problems.append("%s: %s shown, the tool does not show it" % (label, f))
    # the order of the significant rows
    top_ht = [f for flat, _, f in ht["rows"] if flat][:3]
    top_ref = [f for flat, _, f in ref["rows"] if flat][:3]
    if top_ht != top_ref:
        problems.append("%s: top sites %s, the tool says %s" % (label, top_ht, top_ref))


def test_pprof(suite):
    _, heaps, prog = common.dumps(suite)
    problems = []
    for dump in (heaps[1], heaps[-1]):
        for index, flag in (("inuse_space", "--inuse-space"), ("alloc_space", "--alloc-space")):
            ref = suite.pprof_top(prog, dump, index=index)
            compare("%s %s" % (os.path.basename(dump), index),
                    ht_top(suite, dump, [flag]), ref, 0, problems)
    return problems, []


def test_jeprof(suite):
    _, heaps, prog = common.dumps(suite)
    problems = []
    for dump in (heaps[1], heaps[-1]):
        ref = suite.jeprof_top(prog, dump)
        nstacks = sum(1 for l in open(dump) if " @ 0x" in l)
        compare(os.path.basename(dump), ht_top(suite, dump), ref, nstacks, problems)
    return problems, []


def test_jemalloc(suite):
    work = os.path.join(suite.build, "e2e", "analyze", "jemalloc")
    os.makedirs(work, exist_ok=True)
    for f in os.listdir(work):
        os.unlink(os.path.join(work, f))
    _, _, prog = common.dumps(suite)
    env = dict(rt.RUN_ENV, LD_PRELOAD=suite.tool("jemalloc"),
               MALLOC_CONF="prof:true,prof_accum:true,lg_prof_sample:16,"
               "prof_prefix:" + os.path.join(work, "je"))
    rc, _, err = rt.run([prog, "5"], env=env)
    if rc != 0:
        raise Failure("prof_cache under jemalloc: status %d: %s" % (rc, rt.short(err)))
    dumps = sorted(os.path.join(work, f) for f in os.listdir(work) if f.endswith(".heap"))
    if not dumps:
        raise Failure("jemalloc wrote no dump in %s" % work)
    first = open(dumps[0]).readline()
    if not first.startswith("heap_v2/"):
        raise Failure("%s is not in jemalloc's layout: %r" % (dumps[0], first))
    problems = []
    ref = suite.jeprof_top(prog, dumps[0])
    nstacks = sum(1 for l in open(dumps[0]) if l.startswith("@"))
    ht = ht_top(suite, dumps[0])
    compare(os.path.basename(dumps[0]), ht, ref, nstacks, problems)
    if not ht["rows"] or ht["rows"][0][2] != "load_config":
        problems.append("jemalloc dump: first site %r, expected load_config" % (
            ht["rows"][:1],))
    return problems, []


def test_diff_pprof(suite):
    _, heaps, prog = common.dumps(suite)
    old, new = common.after_startup(heaps), heaps[-2]
    ref = suite.pprof_top(prog, new, base=old)
    _, out, _ = heaptrail(suite, ["diff", "--bytes", "-n", "1000", old, new])
    problems = []
    m = re.search(r"in-use space ([+-]?\d+) ", out.split("\n")[0])
    # pprof's "total" with -base is the sum of the changes' sizes (a site
    # that shrank counts as much as one that grew); the net change is the
    # sum of its flat column (every node shown: -nodefraction=0)
    net = sum(flat for flat, _, _ in ref["rows"])
    if not m or int(m.group(1)) != net:
        problems.append("diff total %s, pprof -base's flat column sums to %d" % (
            m.group(1) if m else "?", net))
    got = {}
    for line in out.split("\n"):
        r = re.match(r"^\s+~?\s*([+-]?\d+)" + PM + r"?\s+(-?\d+)\s+(-?\d+)\s+(\S.*?)\s*$", line)
        if r:
            got[r.group(4)] = (int(r.group(1)), int(r.group(2)), int(r.group(3)))
    want = {f: flat for flat, _, f in ref["rows"] if flat}
    for f, flat in want.items():
        if f not in got or got[f][0] != flat:
            problems.append("%s: change %s, pprof -base says %d" % (
                f, got.get(f, ("missing",))[0], flat))
        elif got[f][2] - got[f][1] != flat:
            problems.append("%s: old %d new %d do not make the change %d" % (
                f, got[f][1], got[f][2], flat))
    for f in got:
        if f not in want:
            problems.append("%s in the diff, not in pprof -base" % f)
    first = re.search(r"^grew:\n.*\n\s+~?\s*\S+" + PM + r"?\s+\S+\s+\S+\s+(\S+)", out, re.M)
    if not first or first.group(1) != "cache_grow":
        problems.append("first growing site %s, expected cache_grow" % (
            first.group(1) if first else None))
    return problems, ["heaptrail diff:\n" + out, "pprof -base:\n" + ref["text"]]


def api_prog(suite, name, tag):
    """(a fresh work directory for tag, tests/progs/NAME.c built
    there against include/heaptrail.h)"""
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", tag))
    prog = os.path.join(work, name)
    rc, _, err = rt.run([suite.cc, "-g", "-O1", "-I", os.path.join(common.ROOT, "include"),
                         "-o", prog, os.path.join(common.HERE, "progs", name + ".c")])
    if rc != 0:
        raise Failure("cc %s.c: %s" % (name, rt.short(err)))
    return work, prog


def test_first_dump(suite):
    work, prog = api_prog(suite, "first_dump", "first-dump")
    first, later = os.path.join(work, "first.heap"), os.path.join(work, "later.heap")
    rc, _, err = rt.run([suite.heaptrail, "run", "--sample", "1", "-o", os.path.join(work, "out"),
                         "--", prog, first, later])
    if rc != 0:
        raise Failure("heaptrail run first_dump: status %d: %s" % (rc, rt.short(err)))
    problems, details = [], []
    head = open(first).readline()
    details.append(head)
    m = re.match(r"heap profile: (\d+): (\d+) \[(\d+): (\d+)\]", head)
    if not m or (int(m.group(1)), int(m.group(2))) != (int(m.group(3)), int(m.group(4))):
        problems.append("first dump's header %r: in use should equal allocated (nothing "
                        "freed yet)" % head.strip())
    for index, want in (("inuse_space", {"keep_late": 8000}),
                        ("alloc_space", {"keep_late": 8000, "churn": 15000})):
        try:
            ref = suite.pprof_top(prog, later, base=first, index=index)
        except Failure as e:
            problems.append(str(e))
            continue
        details.append(ref["text"])
        got = {f: flat for flat, _, f in ref["rows"] if flat}
        if got != want:
            problems.append("pprof -base -sample_index=%s: %s, expected %s" % (index, got, want))
    ref = suite.jeprof_top(prog, later, base=first)
    got = {f: flat for flat, _, f in ref["rows"] if flat}
    if got != {"keep_late": 8000}:
        problems.append("jeprof --base: %s, expected keep_late 8000" % got)
    _, out, _ = heaptrail(suite, ["diff", "--bytes", first, later])
    details.append(out)
    m = re.search(r"in-use space ([+-]?\d+) ", out.split("\n")[0])
    if not m or int(m.group(1)) != 8000:
        problems.append("heaptrail diff: in-use space %s, expected +8000" % (
            m.group(1) if m else "?"))
    return problems, details


def growth_run(suite, sample, tag=""):
    work = os.path.join(suite.build, "e2e", "analyze", "growth")
    os.makedirs(work, exist_ok=True)
    prog = os.path.join(work, "growth_sites")
    with common._lock:
        if not os.path.exists(prog):
            rc, _, err = rt.run([suite.cc, "-g", "-O1", "-o", prog,
                                 os.path.join(common.HERE, "progs", "growth_sites.c")])
            if rc != 0:
                raise Failure("cc growth_sites.c: %s" % rt.short(err))
    out = rt.fresh_dir(os.path.join(work, "s%d%s" % (sample, tag)))
    rc, _, err = rt.run([suite.heaptrail, "run", "--sample", str(sample), "--every", "100ms",
                         "-o", out, "--", prog])
    if rc != 0:
        raise Failure("heaptrail run growth_sites: status %d: %s" % (rc, rt.short(err)))
    return out


# rank trend slope [±90%, sampled only] later-half r2 first -> last site
GROWTH_ROW = re.compile(r"^\s*(\d+|-|all)\s+(growing|grew, then flat|fluctuating|flat|"
                        r"shrinking|too few samples)\s+([+-]?\d+)/s" + PM + r"?\s+([+-]?\d+)/s\s+"
                        r"([\d.]+)\s+(-?\d+)\s+->"
                        r"\s+(-?\d+)\s+(\S+)\s*$")


def test_growth(suite):
    problems, details = [], []
    # sampled at 16 KiB, the leak's 16 KiB blocks are each recorded with
    # probability 0.63: the estimates are noisy (about 10% on the final
    # total), so the sampled slope gets a wider bound
    for sample, lo, hi in ((1, 0.6, 1.1), (16384, 0.5, 1.4)):
        out = growth_run(suite, sample)
        _, text, _ = heaptrail(suite, ["growth", "--bytes", out])
        details.append(text)
        rows = {}
        ranked = []
        for line in text.split("\n"):
            m = GROWTH_ROW.match(line)
            if m:
                rows[m.group(8)] = m
                if m.group(1).isdigit():
                    ranked.append(m.group(8))
        label = "sample %d" % sample
        if ranked != ["leak_slowly"]:
            problems.append("%s: growing sites %s, expected only leak_slowly" % (label, ranked))
        if "leak_slowly" in rows:
            # 48 KiB every 25 ms of sleep (plus the loop's own time)
            slope = int(rows["leak_slowly"].group(3))
            if not lo * 1966080 <= slope <= hi * 1966080:
                problems.append("%s: leak_slowly grows %d B/s, the program allocates "
                                "1966080 B/s at most (bounds %.1fx to %.1fx)" % (
                                    label, slope, lo, hi))
        for site, want in (("fill_cache", ("grew, then flat",)),
                           ("churn", ("fluctuating", "flat"))):
            got = rows[site].group(2) if site in rows else None
            if got not in want:
                problems.append("%s: %s is %r, expected %s" % (label, site, got, " or ".join(want)))
    return problems, details


def test_hide(suite):
    _, heaps, prog = common.dumps(suite)
    dump = heaps[-1]
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "top-hide"))
    hide = ["--hide", "^cache_grow$"]
    ht, base = ht_top(suite, dump, hide), ht_top(suite, dump)
    pb = os.path.join(work, "hidden.pb.gz")
    heaptrail(suite, ["pprof"] + hide + ["-o", pb, dump])
    ref = suite.pprof_top(prog, pb)
    problems = []
    compare("pprof --hide", ht, ref, 0, problems)
    names = [r[2] for r in ht["rows"]] + [r[2] for r in ref["rows"]]
    grow = next((r for r in base["rows"] if r[2] == "cache_grow"), None)
    main = next((r for r in ht["rows"] if r[2] == "main"), None)
    if "cache_grow" in names or not grow or not main or main[0] < grow[0]:
        problems.append("hidden cache_grow: rows %s; without --hide %s"
                        % (ht["rows"][:4], base["rows"][:4]))
    return problems, []


def test_data_maps(suite):
    _, heaps, _ = common.dumps(suite)
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "top-data-maps"))
    dump = os.path.join(work, "with-shm.heap")
    with open(heaps[-1]) as f:
        text = f.read()
    if "MAPPED_LIBRARIES:" not in text:
        raise Failure("no MAPPED_LIBRARIES in %s" % heaps[-1])
    with open(dump, "w") as f:
        f.write(text.rstrip("\n") + "\n"
                "7f8083d6f000-7f8083d70000 rw-s 00000000 00:01 32    /SYSV00a9006e (deleted)\n"
                "7f8083d70000-7f8083d80000 rw-p 00000000 08:01 99    /tmp/gone.dat (deleted)\n")
    base, with_shm = ht_top(suite, heaps[-1]), ht_top(suite, dump)
    _, _, err = heaptrail(suite, ["top", dump])
    problems = []
    if with_shm["rows"] != base["rows"]:
        problems.append("rows differ: %s vs %s" % (with_shm["rows"][:3], base["rows"][:3]))
    if "SYSV" in err or "gone.dat" in err:
        problems.append("top said: %s" % err.strip())
    return problems, []


def test_growth_errors(suite):
    problems = []
    _, heaps, _ = common.dumps(suite)
    out = growth_run(suite, 65536, ".errors")
    other = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".heap"))
    empty = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "empty"))
    for args, want in ((heaps[:2], "need at least three"),
                       (heaps[:2] + other[:1], "different processes"),
                       ([empty], "no heap dumps"),
                       ([os.path.join(empty, "missing")], "No such file")):
        rc, out_, err = heaptrail(suite, ["growth"] + args, ok=False)
        lines = err.strip().split("\n")
        if rc == 0 or rc >= 128 or len(lines) != 1 or want not in err or \
                not lines[0].startswith("heaptrail: "):
            problems.append("growth %s: status %d, stderr %r (want one line with %r)" % (
                " ".join(os.path.basename(a) for a in args), rc, err, want))
    return problems, []


def test_dump_metadata(suite):
    _, heaps, prog = common.dumps(suite)
    from test_pprof import build_id
    want_id = build_id(prog)
    problems = []
    last = -1
    counted = 0
    for dump in heaps:
        name = os.path.basename(dump)
        text = open(dump).read()
        m = re.search(r"^# heaptrail-dump ms=(\d+) unix_ms=(\d+) pid=(\d+)"
                      r"(?: agent_bytes=(\d+))?(?: rss_anon=(\d+))?( end=1)?(?: run=([0-9a-f]{16}))?$"
                      .replace("( end=1)", r"(?: heap_in_use=(\d+))?( end=1)"),
                      text, re.M)
        if not m:
            problems.append("%s: no '# heaptrail-dump' line" % name)
            continue
        if int(m.group(1)) < last:
            problems.append("%s: ms=%s before the previous dump's %d" % (name, m.group(1), last))
        last = int(m.group(1))
        if m.group(3) != name.split(".")[1]:
            problems.append("%s: pid=%s" % (name, m.group(3)))
        # the agent's own mapped memory: its tables at least (a few MiB),
        # never more than the machine could map
        if not m.group(4) or not 4096 <= int(m.group(4)) < 1 << 40:
            problems.append("%s: agent_bytes=%s" % (name, m.group(4)))
        # the private resident memory: a process with the agent's tables
        # holds more than 100 KiB, and less than the machine could
        if not m.group(5) or not 100 << 10 <= int(m.group(5)) < 1 << 40:
            problems.append("%s: rss_anon=%s" % (name, m.group(5)))
        # the allocator's own count: dumps on a timer are written on the
        # program's way into the allocator, where it may be asked (at
        # most 1 % of the time: not in every dump)
        if m.group(6):
            counted += 1
            if not 1 <= int(m.group(6)) < 1 << 40:
                problems.append("%s: heap_in_use=%s" % (name, m.group(6)))
        if not m.group(8):
            problems.append("%s: no run=ID (heaptrail run names its run)" % name)
        # it says it ends with an end line, and does: a cut between two
        # lines is then seen
        if not m.group(7) or not text.endswith("\n# heaptrail-end\n"):
            problems.append("%s: end=1 %s, last line %r" % (
                name, "given" if m.group(7) else "missing", text.rstrip("\n").split("\n")[-1]))
        ids = dict((p, h) for h, p in re.findall(r"^# build-id ([0-9a-f]+) (\S+)$", text, re.M))
        if ids.get(prog) != want_id:
            problems.append("%s: build-id of %s is %s, readelf says %s" % (
                name, prog, ids.get(prog), want_id))
    if heaps and not counted:
        problems.append("no dump says heap_in_use")
    return problems, []


def test_exe_symlink(suite):
    """A program started through a symlink (Debian's redis-server is a
    link to redis-check-rdb): the dump says both names, and frames of the
    executable that have no symbol are named by the link, the name the
    user started ("redis-server+0x..."); with the line taken out (the
    dumps of before), by the file ("redis-check-rdb+0x...")."""
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "exe-symlink"))
    prog = os.path.join(work, "real-name")
    rc, _, err = rt.run([suite.cc, "-O1", "-s", "-o", prog,
                         os.path.join(common.HERE, "progs", "first_dump.c"),
                         "-I", os.path.join(common.ROOT, "include")])
    if rc != 0:
        raise Failure("cc first_dump.c: %s" % rt.short(err))
    link = os.path.join(work, "started-name")
    os.symlink("real-name", link)
    first, later = os.path.join(work, "first.heap"), os.path.join(work, "later.heap")
    rc, _, err = rt.run([suite.heaptrail, "run", "--sample", "1", "-o", os.path.join(work, "out"),
                         "--", link, first, later])
    if rc != 0:
        raise Failure("heaptrail run via a symlink: status %d: %s" % (rc, rt.short(err)))
    problems = []
    text = open(later).read()
    want = "# heaptrail-exe %s %s\n" % (prog, link)
    if want not in text:
        problems.append("no %r in the dump" % want)
    rc, out, err = rt.run([suite.heaptrail, "top", "-n", "50", later])
    if rc != 0 or b"started-name+0x" not in out or b"real-name+0x" in out:
        problems.append("top names the executable's frames: %s" % rt.short(out + err, 600))
    old = os.path.join(work, "old.heap")
    with open(old, "w") as f:
        f.write(text.replace(want, ""))
    rc, out, err = rt.run([suite.heaptrail, "top", "-n", "50", old])
    if rc != 0 or b"real-name+0x" not in out:
        problems.append("without the line, top: %s" % rt.short(out + err, 600))
    return problems, []


def test_fork_seq(suite):
    work, prog = api_prog(suite, "fork_dumps", "fork-seq")
    out = os.path.join(work, "out")
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--", prog])
    if rc != 0 or not stdout.strip().isdigit():
        raise Failure("heaptrail run fork_dumps: status %d, stdout %r: %s" % (
            rc, stdout, rt.short(err)))
    child = int(stdout)
    parent = [int(f.split(".")[1]) for f in os.listdir(out) if f.endswith(".leaks")
              and int(f.split(".")[1]) != child]
    got = sorted(f for f in os.listdir(out) if f.endswith(".heap"))
    want = sorted("heaptrail.%d.%s.api.heap" % (pid, seq) for pid, seq in (
        (parent[0] if parent else 0, "0000"), (parent[0] if parent else 0, "0001"),
        (child, "0000")))
    if len(parent) != 1 or got != want:
        return ["dumps %s, expected %s" % (got, want)], []
    return [], []


def collect(suite):
    return [("dump:metadata", lambda: test_dump_metadata(suite)),
            ("dump:fork-seq", lambda: test_fork_seq(suite)),
            ("dump:exe-symlink", lambda: test_exe_symlink(suite)),
            ("top:pprof", lambda: test_pprof(suite)),
            ("top:jeprof", lambda: test_jeprof(suite)),
            ("top:jemalloc", lambda: test_jemalloc(suite)),
            ("diff:pprof", lambda: test_diff_pprof(suite)),
            ("diff:first-dump", lambda: test_first_dump(suite)),
            ("growth:sites", lambda: test_growth(suite)),
            ("top:data-maps", lambda: test_data_maps(suite)),
            ("top:hide", lambda: test_hide(suite)),
            ("growth:errors", lambda: test_growth_errors(suite))]
