"""`heaptrail attach` on a program that calls the allocator through
pointers taken before the attach (issue 28;
tests/progs/attach_ptrs.c, started bare). The attach puts the
real allocator's entry points behind trampolines, besides the slots.

    attach-ptrs:leak, attach-ptrs:leak-exact   4 KiB every ms leaked
                    through a saved malloc pointer (leak_ptr) and 1 KiB
                    through the PLT (leak_plt), watched for 3 s and
                    until 12 MiB went through leak_ptr, default sampling and
                    --sample 1: `growth` ranks leak_ptr first and leak_plt
                    second, both growing, each at the rate the program
                    counted between two of its answers (within 25 %) and
                    about 4 to 1; exact: with the program paused, a leak
                    check holds at each site exactly the bytes the program
                    leaked there since the attach. Before: leak_ptr was
                    not there at all
    attach-ptrs:swap, attach-ptrs:swap-exact   a ring of blocks
                    allocated through the PLT and freed through a saved
                    free pointer (some grown through a saved realloc,
                    some from a saved aligned_alloc, which glibc serves
                    from its own malloc): `growth` calls no swap_ site
                    growing; exact: with the program paused, the blocks
                    live at its sites are exactly the blocks in its ring
                    (once the ring has turned over since the attach: no
                    free missed, no block counted twice). Before: every
                    block allocated since the attach stayed "live"
    attach-ptrs:loop  attach and detach 50 times (HEAPTRAIL_PTRS_LOOPS),
                    exact and sampled by turns, while the swap program
                    runs: while attached, glibc's malloc, free, realloc
                    and aligned_alloc begin with a jump; after each
                    detach their first 16 bytes are those read before
                    the first attach, the process has the threads and
                    fds it had before, and the mappings it had after the
                    first detach (the agent, its libm, Zydis and one page
                    of trampolines stay, inert; nothing more per cycle); its
                    checks all pass and its output, checksum included,
                    is the bare run's
    attach-ptrs:slots-only  --slots-only: the entry points are left as
                    they are (the test of the test: leak_ptr unseen);
                    growth says the allocator's own count grew far more
                    than the heap it sees, and `top` on the last dump
                    says how much of the allocator's count it does not
                    see (neither says so in attach-ptrs:leak, where the
                    trampolines see every call)
    attach-ptrs:guard  --guard 1 (issue 31), three attaches (exact,
                    sampled, exact) to the swap program: while attached
                    a leak check finds blocks guarded and no error (and
                    exact, with the program paused, the ring's blocks
                    live at the swap_ sites, no more: the third attach
                    sees every free through the jumps kept before); each
                    detach says how many guarded blocks were still live
                    and leaves glibc's free and realloc jumping (to give
                    those back when the program frees or grows them
                    through its saved pointers) while malloc and
                    aligned_alloc get their first bytes back, and SIGSEGV
                    is the program's again (not caught); two rounds of
                    the ring after each detach (every guarded block freed
                    or grown by then), the next attach guards again; the
                    program's checks all pass and its output, checksum
                    included, is the bare run's
    attach-ptrs:jemalloc-leak, attach-ptrs:jemalloc-swap-exact,
    attach-ptrs:tcmalloc-swap-exact  the same program linked with
                    libjemalloc.so.2 (as Debian's redis-server is) or
                    libtcmalloc_minimal.so.4 as its malloc: those
                    allocators' entry points are hooked the same way
"""
import collections
import json
import os
import re
import subprocess
import threading
import time

import run_tests
import test_attach as ta

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "progs", "attach_ptrs.c")
ENTRIES = ("malloc", "free", "realloc", "aligned_alloc")

_lock = threading.Lock()
_built = {}


ALLOCATORS = {"jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
              "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"}


def build(suite, alloc=None):
    """The program, linked with glibc's malloc, or with jemalloc's or
    tcmalloc's as its malloc (skipped where the library is missing)."""
    work = os.path.join(suite.build, "e2e", "attach_ptrs")
    prog = os.path.join(work, "attach_ptrs" + ("-" + alloc if alloc else ""))
    lib = [ALLOCATORS[alloc]] if alloc else []
    if lib and not os.path.exists(lib[0]):
        raise run_tests.Skip("%s is not installed (%s)" % (alloc, lib[0]))
    with _lock:
        if prog not in _built:
            os.makedirs(work, exist_ok=True)
            rc, _, err = run_tests.run([suite.cc, "-g", "-O1", "-pthread", "-o", prog + ".tmp",
                                        SRC] + lib, env=os.environ)
            if rc:
                raise run_tests.Failure("build failed: %s" % run_tests.short(err))
            os.rename(prog + ".tmp", prog)
            _built[prog] = True
    return work, prog


def bare_sum(suite):
    """The swap program's checksum line, bare (the same whatever the
    allocator)."""
    work, prog = build(suite)
    with _lock:
        if "sum" not in _built:
            t = ta.Target(None, work, argv=[prog, "swap"])
            rc, err = t.finish()
            if rc != 3 or err or not t.out[-1].startswith("done errors=0 sum="):
                raise run_tests.Failure("the swap program, bare: exit %d, %s %s"
                                        % (rc, t.out, err[:200]))
            _built["sum"] = t.out[-1]
    return _built["sum"]


def finish_swap(problems, t, want_end):
    """Ends the swap program: its checks all passed and its last line
    (the checksum) is the bare run's."""
    rc, err = t.finish()
    if rc != 3 or err or t.out[-1] != want_end:
        problems.append("target: exit %d, last line %r (bare: %r), stderr %r"
                        % (rc, t.out[-1], want_end, err[:200]))


def counts(t, cmd="count"):
    return [int(x) for x in t.ask(cmd).split()[1:]]


def lead_bytes(pid, addrs):
    """The first 16 bytes at each address of process pid."""
    out = {}
    with open("/proc/%d/mem" % pid, "rb") as f:
        for name, a in addrs.items():
            f.seek(a)
            out[name] = f.read(16)
    return out


def libc_entries(pid):
    """{name: address} of glibc's entry points in process pid."""
    path, base = None, None
    with open("/proc/%d/maps" % pid) as f:
        for l in f:
            w = l.split()
            if len(w) >= 6 and re.search(r"/libc\.so\.6$", w[5]) and w[2] == "00000000":
                path, base = w[5], int(w[0].split("-")[0], 16)
                break
    if not path:
        raise run_tests.Failure("no libc.so.6 in the target's maps")
    rc, out, err = run_tests.run(["readelf", "-Ws", "--dyn-syms", path])
    if rc:
        raise run_tests.Failure("readelf: %s" % run_tests.short(err))
    found = {}
    for l in out.decode().splitlines():
        w = l.split()
        if len(w) >= 8 and w[3] == "FUNC":
            name = w[7].split("@")[0]
            if name in ENTRIES and "@@" in w[7]:
                found[name] = base + int(w[1], 16)
    if set(found) != set(ENTRIES):
        raise run_tests.Failure("libc's %s not found in %s" % (ENTRIES, path))
    return found


def sites(problems, suite, out, prefix):
    """{site: (bytes, blocks)} over every record of the one leak check in
    out, by the first function of its stack starting with prefix."""
    records = ta.check_records(problems, suite, out)
    if records is None:
        return None
    got = collections.defaultdict(lambda: [0, 0])
    for r in records:
        fns = [f.get("function") for f in r["stack"]]
        site = next((f for f in fns if f and f.startswith(prefix)), str(fns[:3]))
        got[site][0] += r["bytes"]
        got[site][1] += r["blocks"]
    return {k: tuple(v) for k, v in got.items()}


def test_leak(suite, exact, slots_only=False, alloc=None):
    work, prog = build(suite, alloc)
    name = ("leak-exact" if exact else ("slots-only" if slots_only else "leak")) + (alloc or "")
    out = ta.new_dir(os.path.join(work, name))
    problems, rates = [], {}
    t = ta.Target(None, work, argv=[prog, "leak"])
    try:
        time.sleep(0.3)
        args = ["attach", "--every", "200ms", "-o", out]
        args += ["--sample", "1"] if exact else []
        args += ["--slots-only"] if slots_only else []
        c0 = counts(t, "pause")
        rc, _, err = ta.heaptrail(suite, *(args + [str(t.p.pid)]))
        if not ta.expect_ok(problems, "attach", rc, err):
            return problems, []
        if err.count(b"\n") > 2:
            problems.append("the attach said more than usual: %s" % err.decode()[:500])
        t.ask("resume")
        t0 = time.monotonic()
        # 3 s, and at least 12 MiB through the saved pointer by the
        # program's own count (growth's unseen line wants 8 MiB more than
        # it sees), however slowly a loaded machine runs it
        time.sleep(3)
        while counts(t)[0] - c0[0] < 12 << 20 and time.monotonic() < t0 + 30:
            time.sleep(0.2)
        wall1 = time.time()
        c1 = counts(t, "pause")
        t1 = time.monotonic()
        if exact:
            rc, _, err = ta.heaptrail(suite, "leaks", str(t.p.pid))
            if ta.expect_ok(problems, "leaks", rc, err):
                got = sites(problems, suite, out, "leak_")
                want = {"leak_ptr": (c1[0] - c0[0], (c1[0] - c0[0]) // 4096),
                        "leak_plt": (c1[1] - c0[1], (c1[1] - c0[1]) // 1024)}
                if got is not None and {k: v for k, v in got.items()
                                        if k.startswith("leak_")} != want:
                    problems.append("since the attach, by site: %s, want %s" % (got, want))
        t.ask("resume")
        rc, _, err = ta.heaptrail(suite, "detach", str(t.p.pid))
        ta.expect_ok(problems, "detach", rc, err)
        rates = {"leak_ptr": (c1[0] - c0[0]) / (t1 - t0), "leak_plt": (c1[1] - c0[1]) / (t1 - t0)}
        # the dumps written while it ran (not those of the pause)
        dumps = sorted(os.path.join(out, f) for f in os.listdir(out)
                       if f.endswith(".every.heap") and
                       os.path.getmtime(os.path.join(out, f)) < wall1)
        rc, gout, err = ta.heaptrail(suite, "growth", "--bytes", *dumps)
        if ta.expect_ok(problems, "growth", rc, err):
            rows = ta.growth_rows(gout.decode())
            growing = [r for r in rows if r[0] != "-" and r[3] != "(all)"]
            names = [r[3] for r in growing]
            unseen = re.search(r"^the allocator's own count of the heap grew by .* memory it "
                               r"does not see is growing", gout.decode(), re.M)
            rc, _, terr = ta.heaptrail(suite, "top", dumps[-1])
            top_note = re.search(rb"note: the allocator counts .* heaptrail does not see", terr)
            if slots_only and not (unseen and top_note):
                problems.append("--slots-only: growth's unseen line %s, top's note %s:\n%s%s"
                                % (bool(unseen), bool(top_note), gout.decode(), terr.decode()))
            if not slots_only and alloc is None and (unseen or top_note):
                problems.append("all seen, yet growth's unseen line %s, top's note %s:\n%s%s"
                                % (bool(unseen), bool(top_note), gout.decode(), terr.decode()))
            if slots_only:
                if "leak_ptr" in [r[3] for r in rows]:
                    problems.append("--slots-only: leak_ptr seen:\n%s" % gout.decode())
                if names != ["leak_plt"]:
                    problems.append("--slots-only: growing %s, want leak_plt alone" % names)
            elif names != ["leak_ptr", "leak_plt"]:
                problems.append("growing sites %s, want leak_ptr then leak_plt:\n%s"
                                % (names, gout.decode()))
            else:
                for r in growing:
                    if not 0.75 * rates[r[3]] <= r[2] <= 1.25 * rates[r[3]]:
                        problems.append("%s grows at %d B/s, the program leaked %.0f B/s there"
                                        % (r[3], r[2], rates[r[3]]))
                if not 3 <= growing[0][2] / max(growing[1][2], 1) <= 5.3:
                    problems.append("leak_ptr / leak_plt = %.2f, want about 4"
                                    % (growing[0][2] / max(growing[1][2], 1)))
        rc, err = t.finish()
        if rc != 3 or err or t.out[-1] != "done":
            problems.append("target: exit %d, output %s, stderr %r" % (rc, t.out[-2:], err[:200]))
    finally:
        t.kill()
    return problems, ["leak_ptr %.0f B/s, leak_plt %.0f B/s by the program's count"
                      % (rates["leak_ptr"], rates["leak_plt"])] if rates else []


def test_swap(suite, exact, alloc=None):
    work, prog = build(suite, alloc)
    want_end = bare_sum(suite)
    out = ta.new_dir(os.path.join(work, ("swap-exact" if exact else "swap") + (alloc or "")))
    problems = []
    t = ta.Target(None, work, argv=[prog, "swap"])
    try:
        time.sleep(0.3)
        args = ["attach", "--every", "200ms", "-o", out] + (["--sample", "1"] if exact else [])
        rc, _, err = ta.heaptrail(suite, *(args + [str(t.p.pid)]))
        if not ta.expect_ok(problems, "attach", rc, err):
            return problems, []
        r0 = counts(t)[2]
        deadline = time.monotonic() + 20
        # two round ends: the ring emptied and refilled since the attach
        while counts(t)[2] < r0 + 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        if exact:
            live = counts(t, "pause")[0]
            rc, _, err = ta.heaptrail(suite, "leaks", str(t.p.pid))
            if ta.expect_ok(problems, "leaks", rc, err):
                got = sites(problems, suite, out, "swap_")
                blocks = sum(v[1] for k, v in (got or {}).items() if k.startswith("swap_"))
                if got is not None and blocks != live:
                    problems.append("%d blocks live at the swap_ sites, the ring holds %d: %s"
                                    % (blocks, live, got))
            t.ask("resume")
        time.sleep(0.5)
        rc, _, err = ta.heaptrail(suite, "detach", str(t.p.pid))
        ta.expect_ok(problems, "detach", rc, err)
        rc, gout, err = ta.heaptrail(suite, "growth", "--bytes", out)
        if ta.expect_ok(problems, "growth", rc, err):
            rows = ta.growth_rows(gout.decode())
            bad = [r for r in rows if r[0] != "-" and r[3].startswith("swap_")]
            if bad or not any(r[3] == "swap_plt" for r in rows):
                problems.append("want swap_plt listed and not growing:\n%s" % gout.decode())
        finish_swap(problems, t, want_end)
    finally:
        t.kill()
    return problems, []


def snapshot(pid):
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read().splitlines()
    files = sorted({l.split(None, 5)[5] for l in maps if len(l.split(None, 5)) == 6 and
                    l.split(None, 5)[5].startswith("/")})
    anon_exec = sum(1 for l in maps if len(l.split()) == 5 and l.split()[1][2] == "x")
    fds = sorted(os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%d/fd" % pid))
    tasks = sorted(os.listdir("/proc/%d/task" % pid))
    return files, anon_exec, fds, tasks


def test_loop(suite):
    work, prog = build(suite)
    want_end = bare_sum(suite)
    loops = int(os.environ.get("HEAPTRAIL_PTRS_LOOPS", "50"))
    base = run_tests.fresh_dir(os.path.join(work, "loop"))
    problems = []
    t = ta.Target(None, work, argv=[prog, "swap"])
    stopped = []
    try:
        time.sleep(0.2)
        pid = t.p.pid
        addrs = libc_entries(pid)
        orig = lead_bytes(pid, addrs)
        files0, anon0, fds0, tasks0 = snapshot(pid)
        after1 = None
        for i in range(loops):
            out = os.path.join(base, "a%d" % i)
            args = ["attach", "-o", out] + (["--sample", "1"] if i % 2 else [])
            rc, _, err = ta.heaptrail(suite, *(args + [str(pid)]))
            if not ta.expect_ok(problems, "attach %d" % i, rc, err):
                break
            m = re.search(rb"one thread stopped ([\d.]+) ms", err)
            if m:
                stopped.append(float(m.group(1)))
            now = lead_bytes(pid, addrs)
            unjumped = [n for n in ENTRIES if now[n][0] != 0xe9]
            if unjumped:
                problems.append("attach %d: %s do not begin with a jump" % (i, unjumped))
            counts(t)
            rc, _, err = ta.heaptrail(suite, "detach", str(pid))
            if not ta.expect_ok(problems, "detach %d" % i, rc, err):
                break
            now = lead_bytes(pid, addrs)
            changed = [n for n in ENTRIES if now[n] != orig[n]]
            if changed:
                problems.append("detach %d: the first bytes of %s are not put back" % (i, changed))
            files, anon, fds, tasks = snapshot(pid)
            if fds != fds0:
                problems.append("detach %d: fds %s, before the attach %s" % (i, fds, fds0))
            if tasks != tasks0:
                problems.append("detach %d: threads %s, before %s" % (i, tasks, tasks0))
            if after1 is None:
                after1 = (files, anon)
                new = [f for f in files if f not in files0]
                if any(not re.search(r"/(libheaptrail\.so|libZy\w+\.so[.\d]*|libm\.so\.6)$", f)
                       for f in new):
                    problems.append("the first detach left mapped %s" % new)
                if anon - anon0 > 1:
                    problems.append("the first detach left %d executable anonymous mappings "
                                    "more, want 1 (the trampolines' page)" % (anon - anon0))
            elif (files, anon) != after1:
                problems.append("detach %d: mappings %s (%d anonymous executable), after the "
                                "first %s (%d)" % (i, sorted(set(files) ^ set(after1[0])),
                                                   anon, "", after1[1]))
            if problems:
                break
        finish_swap(problems, t, want_end)
    finally:
        t.kill()
    info = []
    if stopped:
        stopped.sort()
        info.append("%d cycles; attach held one thread median %.1f ms, max %.1f ms"
                    % (len(stopped), stopped[len(stopped) // 2], stopped[-1]))
    return problems, info


def wait_rounds(problems, t, n, what):
    """Until the swap program has ended n more rounds (20 s at most)."""
    r0 = counts(t)[2]
    deadline = time.monotonic() + 20
    while counts(t)[2] < r0 + n and time.monotonic() < deadline:
        time.sleep(0.1)
    if counts(t)[2] < r0 + n:
        problems.append("%s: the program did not end %d rounds in 20 s" % (what, n))


def test_guard(suite):
    work, prog = build(suite)
    want_end = bare_sum(suite)
    base = run_tests.fresh_dir(os.path.join(work, "guard"))
    problems, details = [], []
    t = ta.Target(None, work, argv=[prog, "swap"])
    try:
        time.sleep(0.2)
        pid = t.p.pid
        addrs = libc_entries(pid)
        orig = lead_bytes(pid, addrs)
        guarded_before = 0
        for i in range(3):
            out = os.path.join(base, "a%d" % i)
            what = "attach %d" % i
            args = ["attach", "--guard", "1", "-o", out] + (["--sample", "1"] if i != 1 else [])
            rc, _, err = ta.heaptrail(suite, *(args + [str(pid)]))
            if not ta.expect_ok(problems, what, rc, err):
                break
            wait_rounds(problems, t, 2, what)
            exact = i != 1
            live = counts(t, "pause")[0] if exact else None
            rc, _, err = ta.heaptrail(suite, "leaks", str(pid))
            if exact:
                t.ask("resume")
            if ta.expect_ok(problems, "leaks after " + what, rc, err):
                if exact:
                    # every free seen, also through the jumps a detach kept
                    got = sites(problems, suite, out, "swap_")
                    blocks = sum(v[1] for k, v in (got or {}).items() if k.startswith("swap_"))
                    if got is not None and blocks != live:
                        problems.append("%s: %d blocks live at the swap_ sites, the ring holds "
                                        "%d: %s" % (what, blocks, live, got))
                leaks = [f for f in os.listdir(out) if f.endswith(".leaks")]
                rc, js, err = ta.heaptrail(suite, "report", "--json",
                                           os.path.join(out, sorted(leaks)[-1]))
                r = json.loads(js) if rc == 0 else {}
                # the count is the process's since the first attach: it
                # must have grown during this one
                guarded = r.get("guard", {}).get("guarded", 0)
                if guarded <= guarded_before or \
                        r.get("error_summary", {}).get("errors") != 0:
                    problems.append("%s: guard %s (before it %d), errors %s" % (
                        what, r.get("guard"), guarded_before, r.get("error_summary")))
                guarded_before = guarded
            rc, _, err = ta.heaptrail(suite, "detach", str(pid))
            if not ta.expect_ok(problems, "detach %d" % i, rc, err):
                break
            m = re.search(rb"guard: guarded blocks still live at the detach: (\d+);", err)
            if not m or int(m.group(1)) == 0:
                problems.append("detach %d: no word of the guarded blocks still live: %s"
                                % (i, run_tests.short(err)))
            else:
                details.append("detach %d: %s guarded blocks live" % (i, m.group(1).decode()))
            now = lead_bytes(pid, addrs)
            kept = sorted(n for n in ENTRIES if now[n] != orig[n])
            if kept != ["free", "realloc"] or any(now[n][0] != 0xe9 for n in kept):
                problems.append("detach %d: changed first bytes %s, want free and realloc's "
                                "(jumps)" % (i, kept))
            if ta.catches(pid, 11):
                problems.append("detach %d: the program catches SIGSEGV after it" % i)
            wait_rounds(problems, t, 2, "after detach %d" % i)
            if problems:
                break
        finish_swap(problems, t, want_end)
    finally:
        t.kill()
    return problems, details


def collect(suite):
    return [("attach-ptrs:leak", lambda: test_leak(suite, False)),
            ("attach-ptrs:leak-exact", lambda: test_leak(suite, True)),
            ("attach-ptrs:swap", lambda: test_swap(suite, False)),
            ("attach-ptrs:swap-exact", lambda: test_swap(suite, True)),
            ("attach-ptrs:loop", lambda: test_loop(suite)),
            ("attach-ptrs:guard", lambda: test_guard(suite)),
            ("attach-ptrs:slots-only", lambda: test_leak(suite, False, slots_only=True)),
            ("attach-ptrs:jemalloc-leak", lambda: test_leak(suite, False, alloc="jemalloc")),
            ("attach-ptrs:jemalloc-swap-exact", lambda: test_swap(suite, True, "jemalloc")),
            ("attach-ptrs:tcmalloc-swap-exact", lambda: test_swap(suite, True, "tcmalloc"))]
