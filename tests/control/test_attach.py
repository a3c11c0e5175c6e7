"""`heaptrail attach PID` / `detach PID` / `dump PID` on a program started
bare (tests/progs/attach_target.c: four threads — a slow leak, a
cache filled then flat, churn, and one waiting in epoll_wait/read for
commands on stdin).

    attach:growth   attach while it runs; `heaptrail growth` names the slow
                    leak alone as growing, at the rate the program reports;
                    detach; a second attach (defaults: --sample auto, its
                    dumps at 8 KiB on this small heap) and dump work (the
                    dump's one line names the file it wrote); the program
                    ends with its own output and exit status
    attach:exact    --sample 1: a leak check after the attach reports as
                    definitely lost exactly the blocks leaked since the
                    attach, and none that a block allocated before the
                    attach still points to
    attach:plugin   --sample 1: a library the program loads with dlopen after
                    the attach (tests/progs/attach_plugin.c) and
                    reaches through dlsym allocates through its own GOT
                    slots: its leak is reported, at its function, exactly;
                    and the attach added no thread to the process
    attach:loop     attach, dump, detach, N times (HEAPTRAIL_ATTACH_LOOPS,
                    default 10): no hang, no crash, output unchanged
    attach:detach-forks  a shell that forks /bin/true every 50 ms,
                    attached then detached: after the detach its children
                    write nothing (each wrote a timeline file into the
                    output directory, for as long as the shell ran), and
                    `heaptrail dump PID` is refused (it wrote a frozen dump)
    attach:exit     a process that exits while attached writes its exit
                    report (with the blocks allocated since the attach only)
    attach:crash    a process killed by SIGSEGV while attached writes its
                    report (the blocks leaked since the attach) and dies of
                    the signal as bare; the handler is there only while
                    attached (SigCgt before, during, after a detach)
    attach:for      --for: heaptrail detaches by itself, final dump written;
                    `top` and `timeline` (text and SVG) say their figures are
                    "since attach at" the time in the attach record
    attach:preloaded  `heaptrail dump PID` on a process started under
                    `heaptrail run`: two dumps, each line names the file
                    written (a whole dump in the run's directory, a new
                    one each time); `attach` refuses it with one line
    attach:busy     a program whose threads never wait in a plain system
                    call (two allocate without a pause, main in pthread_join):
                    the attach borrows the joining thread (a futex that is no
                    lock of libc's); dump and detach; output unchanged
    attach:cpu      a program whose threads never enter the kernel while
                    they work (tests/progs/attach_cpu.c: CPU loops
                    that allocate, the clock read through the vDSO): the
                    attach borrows a thread stopped in the program's own
                    code; dump and detach; every round of its checksum
                    (integer and floating-point state) still agrees, its
                    output equals the bare run's, and the detach holds the
                    borrowed thread less than 1.5 s
    attach:errors   no such pid, a zombie, a static binary, a process of
                    another user (also under each Yama ptrace_scope, its file
                    faked in a mount namespace: this kernel has no Yama), a
                    seccomp filter refusing dlopen's executable mmap: one
                    line each (the failed system call named), exit 1,
                    target untouched; a filter refusing the futex wait
                    of the calls' park: attach, dump and detach work
                    (stepped), the target ends as bare. Under Yama, `leaks` and `dump` (which
                    trace too) say what each can do instead, never "start
                    the program under `heaptrail run`" (before: `leaks`
                    said "Permission denied", `dump` advised `run`)
    attach:reattach attach, detach, attach again: the same -o DIR is
                    refused with one line naming the earlier attach (a new
                    recording would replace its timeline and record), and
                    so is an attach while attached; without -o each
                    attach makes a fresh directory
    attach:kill     crash-only: heaptrail killed (SIGKILL) at every step of
                    an attach and of a detach (HEAPTRAIL_TEST_KILL_AT=N: it
                    kills itself before its Nth ptrace request or write,
                    for N = 1, 2, ... until one finishes), then after a
                    sweep of delays covering the attach and the detach as
                    measured here: the program
                    (tests/progs/attach_kill.c: four threads
                    allocate and free through the PLT and check every
                    block, others wait in epoll_wait and nanosleep, all
                    fatal on EINTR; the main thread, in read, takes a
                    queued signal every 2 ms) answers after each kill, is traced by
                    no one (but, for a moment, the agent's own stop, which the
                    attach's call, left to run to its end, makes to write the
                    jumps of the allocator's entry points), a later attach,
                    dump and detach work, and it
                    ends with its own check passed, with no mapping more
                    than after the first attach and detach (glibc's
                    arenas aside: a thread that meets another on its
                    arena gets a new one, bare too); three more
                    cycles lose none of its signals. And heaptrail held
                    up past the calls' park (HEAPTRAIL_TEST_STALL_PARK=1:
                    it sleeps 1.3 s once its first call waits there): the
                    attach borrows a thread again after its dlopen and
                    works; a dump and a detach say in one line that the
                    call ran but its result was lost (the detach did
                    detach); the program answers after each
    attach:timeout  a program whose main thread sleeps 2 s in nanosleep while
                    another waits in read (tests/progs/
                    attach_sleep.c), attached 0.8 s into the sleep: the
                    reader is borrowed, the sleep ends on time (under
                    2.5 s; a borrowed sleep starts its 2 s again whole)
    attach:exiting  a process that starts and exits during the attach
                    (`sleep 0.03`, attached after a sweep of delays): the
                    attach works or says one line, "no process N",
                    "process N is a zombie", "process N exited" or, caught
                    before its loader mapped libc, "cannot attach to
                    process N yet: ... try again", never the step that
                    failed with it (before: "cannot find dlopen...", and
                    "it is a static binary" for a dynamic one)
    attach:namespace  the agent's path hidden in the target's mount
                    namespace (a tmpfs over its directory there): the
                    agent is loaded from a memory file of the target's
                    (before: one line asking to copy it there), dump and
                    detach work, no descriptor is left, and the target's
                    output is unchanged
    attach:fnhook   allocator functions named at the attach
                    (tests/progs/attach_pools.c: three threads call
                    its pool_get/pool_put without a pause): the jumps are
                    written while they run (their first bytes change, then
                    are put back at the detach); a leak check sees exactly
                    the chunks kept (reachable) and lost since the attach,
                    at their sites; pool_get_zeroed, whose address + 2 a
                    thread keeps on its stack as a signal frame would, is
                    refused with one line, said by `heaptrail attach`
                    (the program's stderr untouched: the agent wrote it
                    there before); pools made before the attach
                    are named from their memory (name=*(ctx+8)); a second
                    attach (the functions named in an --options-file, the
                    names looked for at an unmapped address: a pool first
                    met then has no name, and no fault) reuses the
                    trampolines and sees only its own chunks; a thread
                    waiting in epoll_wait, stopped for the writes, never
                    sees EINTR; every chunk
                    the threads check is intact, the output is the bare
                    run's, no thread added
"""
import json
import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time

import run_tests

_lock = threading.Lock()

HERE = os.path.dirname(os.path.abspath(__file__))
PROG_SRC = os.path.join(os.path.dirname(HERE), "progs", "attach_target.c")
PLUGIN_SRC = os.path.join(os.path.dirname(HERE), "progs", "attach_plugin.c")
POOLS_SRC = os.path.join(os.path.dirname(HERE), "progs", "attach_pools.c")
KILL_SRC = os.path.join(os.path.dirname(HERE), "progs", "attach_kill.c")


_built = {}


def fd_targets(pid):
    """What pid's descriptors point at (those that vanish meanwhile left out)."""
    out = []
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return out
    for fd in fds:
        try:
            out.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
    return out

def build(suite):
    """The target, built once per session (the tests run in parallel)."""
    work = os.path.join(suite.build, "e2e", "attach")
    prog = os.path.join(work, "attach_target")
    with _lock:
        if "ok" not in _built:
            os.makedirs(work, exist_ok=True)
            for src, out, flags in ((PLUGIN_SRC, os.path.join(work, "attach_plugin.so"),
                                     ["-shared", "-fPIC"]),
                                    (PROG_SRC, prog, ["-pthread"])):
                tmp = out + ".tmp"
                rc, _, err = run_tests.run([suite.cc, "-g", "-O1"] + flags + ["-o", tmp, src],
                                           env=os.environ)
                if rc:
                    raise run_tests.Failure("build failed: %s" % run_tests.short(err))
                os.rename(tmp, out)
            _built["ok"] = True
    return work, prog


class Target:
    """The program, started bare (no LD_PRELOAD), driven through stdin."""

    def __init__(self, prog, cwd, argv=None, env=None):
        env = dict(env or os.environ)
        env.pop("LD_PRELOAD", None)
        env.pop("HEAPTRAIL_OPTIONS", None)
        self.p = subprocess.Popen(argv or [prog], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  cwd=cwd, env=env)
        self.out = []
        if self.line(10) != "ready":
            raise run_tests.Failure("the target did not start: %s" % self.out)

    def line(self, timeout=20):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            raise run_tests.Failure("the target did not answer within %ds (output so far: %s)"
                                    % (timeout, self.out))
        s = self.p.stdout.readline().decode().rstrip("\n")
        self.out.append(s)
        return s

    def ask(self, cmd):
        self.p.stdin.write((cmd + "\n").encode())
        self.p.stdin.flush()
        got = self.line()
        if not got.startswith("ok"):
            raise run_tests.Failure("target answered %r to %r" % (got, cmd))
        return got

    def finish(self):
        try:
            rest, err = self.p.communicate(b"quit\n", timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise run_tests.Failure("the target did not end after quit")
        self.out += rest.decode().splitlines()
        return self.p.returncode, err.decode()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def maps(self):
        with open("/proc/%d/maps" % self.p.pid) as f:
            return f.read()


def new_dir(path):
    """path, emptied of an earlier run and not made: attach makes it."""
    run_tests.fresh_dir(path)
    os.rmdir(path)
    return path


def heaptrail(suite, *args, timeout=60):
    return run_tests.run([suite.heaptrail] + list(args), timeout=timeout)


def expect_ok(problems, what, rc, err):
    if rc:
        problems.append("%s: exit %d: %s" % (what, rc, run_tests.short(err, 300)))
        return False
    return True


def expect_dump_named(problems, what, rc, err, out, pid):
    """`heaptrail dump PID` succeeded and said, in its one line, which
    file it wrote: a whole heap dump in out, of this process. Returns
    the path, or None."""
    if not expect_ok(problems, what, rc, err):
        return None
    lines = err.decode().splitlines()
    m = re.match(r"heaptrail: heap dump written to (\S+) by process %d \(thread stopped "
                 r"[\d.]+ ms\)$" % pid, lines[0]) if len(lines) == 1 else None
    if not m:
        problems.append("%s: stderr %r, want one line naming the dump written" % (what, lines))
        return None
    path = m.group(1)
    if os.path.dirname(os.path.realpath(path)) != os.path.realpath(out) or \
            not path.endswith(".api.heap"):
        problems.append("%s: named %s, not a dump in %s (%s)"
                        % (what, path, out, sorted(os.listdir(out))))
        return None
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        problems.append("%s: the dump it named: %s" % (what, e))
        return None
    if not text.startswith("heap profile: ") or "# heaptrail-end" not in text:
        problems.append("%s: %s is not a whole heap dump: %r" % (what, path, text[:200]))
        return None
    return path


def check_end(t, problems, want_lines):
    """The program's own output and exit status, as without heaptrail."""
    rc, err = t.finish()
    if rc != 3:
        problems.append("target exit status %d, want 3 (stderr: %s)" % (rc, err[:300]))
    if t.out != want_lines:
        problems.append("target output %s, want %s" % (t.out, want_lines))
    if err:
        problems.append("target wrote on stderr: %s" % err[:300])


def growth_rows(text):
    """(rank or '-', trend, slope bytes/s, site) for each row of growth."""
    rows = []
    for l in text.splitlines():
        m = re.match(r"^\s+(\d+|-)\s+(.+?)\s{2,}([+-]?\d+)(?: B)?/s\s.*\s(\S+)$", l)
        if m:
            rows.append((m.group(1), m.group(2).strip(), int(m.group(3)), m.group(4)))
    return rows


def test_growth(suite):
    work, prog = build(suite)
    out = run_tests.fresh_dir(os.path.join(work, "growth"))
    out2 = os.path.join(work, "growth2")
    run_tests.fresh_dir(out2)
    os.rmdir(out2)
    problems = []
    t = Target(prog, work)
    try:
        time.sleep(0.5)  # it has run a while: the cache is full
        rc, _, err = heaptrail(suite, "attach", "--sample", "2k", "--every", "200ms",
                               "-o", out, str(t.p.pid))
        if not expect_ok(problems, "attach", rc, err):
            return problems, []
        t0 = time.monotonic()
        c0 = int(t.ask("count").split()[1])
        if "libheaptrail.so" not in t.maps():
            problems.append("no agent in the target's memory map after the attach")
        time.sleep(3)
        c1 = int(t.ask("count").split()[1])
        t1 = time.monotonic()
        rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
        expect_ok(problems, "detach", rc, err)
        rate = 512.0 * (c1 - c0) / (t1 - t0)
        rc, gout, err = heaptrail(suite, "growth", "--bytes", out)
        if expect_ok(problems, "growth", rc, err):
            if b" since attach at " not in gout.split(b"\n")[0]:
                problems.append("growth does not say the figures run from the attach: %r"
                                % gout.split(b"\n")[0])
            rows = growth_rows(gout.decode())
            growing = [r for r in rows if r[0] != "-" and r[3] != "(all)"]
            if [r[3] for r in growing] != ["slow_leak_site"]:
                problems.append("growing sites %s, want only slow_leak_site:\n%s"
                                % ([r[3] for r in growing], gout.decode()))
            elif not 0.6 * rate <= growing[0][2] <= 1.5 * rate:
                problems.append("slow_leak_site grows at %d B/s, the program leaked %.0f B/s"
                                % (growing[0][2], rate))
        with open(os.path.join(out, "heaptrail.%d.attach" % t.p.pid)) as f:
            rec = f.read()
        for key in ("attached ", "detached ", "sample 2048"):
            if key not in rec:
                problems.append("the attach record lacks %r: %r" % (key, rec))
        # detached: the agent stays mapped, inert; no new dumps
        n = len(os.listdir(out))
        time.sleep(0.5)
        if len(os.listdir(out)) != n:
            problems.append("files still written after the detach: %s" % os.listdir(out))
        # a second attach works
        rc, _, err = heaptrail(suite, "attach", "-o", out2, str(t.p.pid))
        if expect_ok(problems, "second attach", rc, err):
            rc, _, err = heaptrail(suite, "dump", str(t.p.pid))
            expect_dump_named(problems, "dump", rc, err, out2, t.p.pid)
            rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
            expect_ok(problems, "second detach", rc, err)
            names = os.listdir(out2)
            if not any(n.endswith(".api.heap") for n in names) or \
               not any(n.endswith(".final.heap") for n in names):
                problems.append("second attach: want a dump and a final dump, got %s" % names)
            # no --sample: auto, which starts at 8 KiB, and this small heap
            # (far below auto's 8,000 samples) gives it no cause to rise
            dumps = [n for n in names if n.endswith(".heap")]
            for n in dumps:
                with open(os.path.join(out2, n)) as f:
                    if not f.readline().rstrip().endswith("@ heap_v2/8192"):
                        problems.append("second attach (default --sample auto): %s is not "
                                        "at S = 8192" % n)
        check_end(t, problems, ["ready", "ok %d" % c0, "ok %d" % c1, "done held=0 cached=256"])
    finally:
        t.kill()
    return problems, []


def test_exact(suite):
    work, prog = build(suite)
    out = new_dir(os.path.join(work, "exact"))
    problems = []
    t = Target(prog, work)
    try:
        t.ask("hold 3")    # blocks from before the attach, kept
        t.ask("leak 5")    # leaked before the attach: not the agent's to report
        t.ask("pause")     # the slow leak stops: the program knows what it leaks
        time.sleep(0.3)
        rc, _, err = heaptrail(suite, "attach", "--sample", "1", "-o", out, str(t.p.pid))
        if not expect_ok(problems, "attach", rc, err):
            return problems, []
        t.ask("leak 37")   # 37 blocks of 100 bytes, lost
        t.ask("hold 11")   # 11 blocks of 200 bytes, pointed to from a heap
                           # array allocated before the attach
        rc, _, err = heaptrail(suite, "leaks", str(t.p.pid))
        expect_ok(problems, "leaks", rc, err)
        lost = lost_by_site(problems, suite, out, "cmd_")
        want = {("definitely_lost", "cmd_leak"): (3700, 37)}
        if lost is not None and lost != want:
            problems.append("lost %s, want %s" % (lost, want))
        t.ask("drop")      # frees 3 blocks from before the attach, 11 from after
        rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
        expect_ok(problems, "detach", rc, err)
        with open(os.path.join(out, "heaptrail.%d.attach" % t.p.pid)) as f:
            rec = f.read()
        # the other threads are paused: those 3 are the only old blocks freed
        if "freed_before_attach 3\n" not in rec:
            problems.append("the attach record does not count the 3 blocks freed that were "
                            "allocated before the attach: %r" % rec)
        check_end(t, problems, ["ready", "ok 3", "ok 5", "ok", "ok 37", "ok 11", "ok 14",
                                "done held=0 cached=256"])
    finally:
        t.kill()
    return problems, []


def check_records(problems, suite, out):
    """The records of the one leak check file in out (report --json), or
    None after a problem saying why."""
    checks = [f for f in os.listdir(out) if ".check-" in f and f.endswith(".leaks")]
    if len(checks) != 1:
        problems.append("want one leak check file, got %s" % os.listdir(out))
        return None
    rc, js, err = heaptrail(suite, "report", "--json", os.path.join(out, checks[0]))
    if not expect_ok(problems, "report --json", rc, err):
        return None
    return json.loads(js)["records"]


def lost_by_site(problems, suite, out, prefix):
    """{(kind, first function of the stack starting with prefix): (bytes,
    blocks)} over the lost records of the one leak check file in out."""
    records = check_records(problems, suite, out)
    if records is None:
        return None
    lost = {}
    for r in records:
        if r["kind"] in ("definitely_lost", "indirectly_lost", "possibly_lost"):
            fns = [f.get("function") for f in r["stack"]]
            site = next((f for f in fns if f and f.startswith(prefix)), fns[:3])
            key = (r["kind"], str(site))
            b, n = lost.get(key, (0, 0))
            lost[key] = (b + r["bytes"], n + r["blocks"])
    return lost


def test_plugin(suite):
    work, prog = build(suite)
    out = new_dir(os.path.join(work, "plugin"))
    problems = []
    t = Target(prog, work)
    try:
        t.ask("pause")     # the slow leak stops: only the plugin leaks
        time.sleep(0.3)
        threads = len(os.listdir("/proc/%d/task" % t.p.pid))
        rc, _, err = heaptrail(suite, "attach", "--sample", "1", "-o", out, str(t.p.pid))
        if not expect_ok(problems, "attach", rc, err):
            return problems, []
        now = len(os.listdir("/proc/%d/task" % t.p.pid))
        if now != threads:
            problems.append("the attach changed the number of threads: %d -> %d"
                            % (threads, now))
        t.ask("plugin 23")  # 23 blocks of 300 bytes, lost
        rc, _, err = heaptrail(suite, "leaks", str(t.p.pid))
        expect_ok(problems, "leaks", rc, err)
        lost = lost_by_site(problems, suite, out, "plugin_")
        want = {("definitely_lost", "plugin_leak"): (23 * 300, 23)}
        if lost is not None and lost != want:
            problems.append("lost %s, want %s" % (lost, want))
        rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
        expect_ok(problems, "detach", rc, err)
        check_end(t, problems, ["ready", "ok", "ok 23", "done held=0 cached=256"])
    finally:
        t.kill()
    return problems, []


def test_loop(suite):
    work, prog = build(suite)
    loops = int(os.environ.get("HEAPTRAIL_ATTACH_LOOPS", "10"))
    base = run_tests.fresh_dir(os.path.join(work, "loop"))
    problems = []
    t = Target(prog, work)
    stopped = []
    done = 0
    try:
        for i in range(loops):
            out = os.path.join(base, str(i))
            rc, _, err = heaptrail(suite, "attach", "-o", out, str(t.p.pid))
            if not expect_ok(problems, "attach %d" % i, rc, err):
                break
            m = re.search(rb"one thread stopped ([\d.]+) ms", err)
            if m:
                stopped.append(float(m.group(1)))
            rc, _, err = heaptrail(suite, "dump", str(t.p.pid))
            if not expect_ok(problems, "dump %d" % i, rc, err):
                break
            rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
            if not expect_ok(problems, "detach %d" % i, rc, err):
                break
            t.ask("leak 1")
            if not any(f.endswith(".api.heap") for f in os.listdir(out)):
                problems.append("cycle %d wrote no dump: %s" % (i, os.listdir(out)))
                break
            done += 1
        check_end(t, problems, ["ready"] + ["ok 1"] * done + ["done held=0 cached=256"])
    finally:
        t.kill()
    details = ["%d cycles; thread stopped per attach: median %.1f ms, max %.1f ms"
               % (len(stopped), sorted(stopped)[len(stopped) // 2], max(stopped))] \
        if stopped else []
    return problems, details


def test_reattach(suite):
    """Attach, detach, attach again: with the same -o DIR, refused with one
    line that names the earlier attach (it said "another run's files");
    while attached, a second attach says so; without -o, each attach gets
    a fresh directory (the second failed with "File exists")."""
    work, prog = build(suite)
    base = run_tests.fresh_dir(os.path.join(work, "reattach"))
    out = os.path.join(base, "out")
    problems = []
    t = Target(prog, work)
    done = 0

    def one_line(what, rc, err, words):
        lines = err.decode(errors="replace").splitlines()
        if rc == 0 or len(lines) != 1 or not all(w in lines[0] for w in words):
            problems.append("%s: exit %d, stderr %r; want one line with %s" % (
                what, rc, run_tests.short(err, 300), words))
    try:
        rc, _, err = heaptrail(suite, "attach", "-o", out, str(t.p.pid))
        if not expect_ok(problems, "attach", rc, err):
            return problems, []
        rc, _, err = heaptrail(suite, "attach", "-o", out, str(t.p.pid))
        one_line("attach while attached", rc, err, ["attached already", "detach"])
        rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
        expect_ok(problems, "detach", rc, err)
        before = sorted(os.listdir(out))
        rc, _, err = heaptrail(suite, "attach", "-o", out, str(t.p.pid))
        one_line("attach -o DIR again", rc, err, ["earlier attach", "-o"])
        if sorted(os.listdir(out)) != before:
            problems.append("the refused attach changed %s" % out)
        t.ask("leak 1")
        done += 1
        dirs = []
        for i in range(2):
            rc, _, err = run_tests.run([suite.heaptrail, "attach", str(t.p.pid)], cwd=base)
            m = re.search(rb"files in (\S+)", err)
            if not expect_ok(problems, "attach %d without -o" % i, rc, err) or not m:
                break
            dirs.append(m.group(1).decode())
            rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
            expect_ok(problems, "detach %d" % i, rc, err)
            t.ask("leak 1")
            done += 1
        if len(dirs) == 2 and dirs[0] == dirs[1]:
            problems.append("both attaches without -o wrote into %s" % dirs[0])
        check_end(t, problems, ["ready"] + ["ok 1"] * done + ["done held=0 cached=256"])
    finally:
        t.kill()
    return problems, []


def test_detach_forks(suite):
    work, _ = build(suite)
    out = run_tests.fresh_dir(os.path.join(work, "detach-forks"))
    os.rmdir(out)
    sh = subprocess.Popen(["/bin/bash", "-c", "while sleep 0.05; do /bin/true; done"],
                          env=run_tests.RUN_ENV)
    problems = []
    try:
        time.sleep(0.3)
        rc, _, err = heaptrail(suite, "attach", "-o", out, str(sh.pid))
        if not expect_ok(problems, "attach", rc, err):
            return problems, []
        time.sleep(0.5)
        rc, _, err = heaptrail(suite, "detach", str(sh.pid))
        if not expect_ok(problems, "detach", rc, err):
            return problems, []
        time.sleep(0.3)  # a fork under way at the detach
        before = sorted(os.listdir(out))
        time.sleep(1.5)  # some 25 forks
        after = sorted(os.listdir(out))
        if after != before or sh.poll() is not None:
            problems.append("after the detach: %d files, then %d (new: %s); shell %s" % (
                len(before), len(after), sorted(set(after) - set(before))[:5],
                "running" if sh.poll() is None else "exited %s" % sh.returncode))
        # a dump of a detached process is refused, not a frozen snapshot
        rc, _, err = heaptrail(suite, "dump", str(sh.pid))
        one_line_error(problems, "dump after detach", rc, err, r"was detached from heaptrail")
        if sorted(os.listdir(out)) != after:
            problems.append("dump after detach wrote %s" % sorted(set(os.listdir(out)) - set(after)))
    finally:
        sh.kill()
        sh.wait()
    return problems, ["%d files" % len(os.listdir(out))]


def blocks_at(records, fn):
    """(bytes, blocks) of every kind with fn in the stack."""
    b = n = 0
    for r in records:
        if any(f.get("function") == fn for f in r["stack"]):
            b += r["bytes"]
            n += r["blocks"]
    return b, n


def test_exit(suite):
    work, prog = build(suite)
    out = new_dir(os.path.join(work, "exit"))
    problems = []
    t = Target(prog, work)
    try:
        t.ask("leak 2")    # before the attach: not reported
        rc, _, err = heaptrail(suite, "attach", "--sample", "1", "-o", out, str(t.p.pid))
        if not expect_ok(problems, "attach", rc, err):
            return problems, []
        t.ask("leak 4")
        check_end(t, problems, ["ready", "ok 2", "ok 4", "done held=0 cached=256"])
        path = os.path.join(out, "heaptrail.%d.leaks" % t.p.pid)
        if not os.path.exists(path):
            problems.append("no exit report %s: %s" % (path, os.listdir(out)))
            return problems, []
        rc, js, err = heaptrail(suite, "report", "--json", path)
        if expect_ok(problems, "report", rc, err):
            # every block from after the attach, none from before (the last
            # one's address may linger in the ended thread's cached stack:
            # which kind it gets is the leak scan's business, tested apart)
            got = blocks_at(json.loads(js)["records"], "cmd_leak")
            if got != (400, 4):
                problems.append("exit report: cmd_leak has %s, want (400, 4)" % (got,))
    finally:
        t.kill()
    return problems, []


def catches(pid, sig):
    """Does process pid have a handler for signal sig (SigCgt)?"""
    with open("/proc/%d/status" % pid) as f:
        for l in f:
            if l.startswith("SigCgt:"):
                return bool(int(l.split()[1], 16) >> (sig - 1) & 1)
    return False


def test_crash(suite):
    work, prog = build(suite)
    out = new_dir(os.path.join(work, "crash"))
    problems = []
    t = Target(prog, work)
    try:
        pid = t.p.pid
        if catches(pid, signal.SIGSEGV):
            problems.append("the bare target catches SIGSEGV")
        # attached, then detached: the disposition is the program's again
        for i, what in enumerate(("first", "second")):
            rc, _, err = heaptrail(suite, "attach", "--sample", "1", "-o", out + "-%d" % i,
                                   str(pid))
            if not expect_ok(problems, "attach", rc, err):
                return problems, []
            if not catches(pid, signal.SIGSEGV):
                problems.append("%s attach: no SIGSEGV handler" % what)
            if i == 0:
                rc, _, err = heaptrail(suite, "detach", str(pid))
                expect_ok(problems, "detach", rc, err)
                if catches(pid, signal.SIGSEGV):
                    problems.append("after the detach the target still catches SIGSEGV")
        t.ask("leak 4")
        t.p.stdin.write(b"crash\n")
        t.p.stdin.flush()
        try:
            t.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            problems.append("the target did not die after crash")
            return problems, []
        if t.p.returncode != -signal.SIGSEGV:
            problems.append("target exit status %d, want %d (SIGSEGV)"
                            % (t.p.returncode, -signal.SIGSEGV))
        path = os.path.join(out + "-1", "heaptrail.%d.leaks" % pid)
        if not os.path.exists(path):
            problems.append("no report %s: %s" % (path, os.listdir(out + "-1")))
            return problems, []
        rc, js, err = heaptrail(suite, "report", "--json", path)
        if expect_ok(problems, "report", rc, err):
            got = blocks_at(json.loads(js)["records"], "cmd_leak")
            if got != (400, 4):
                problems.append("crash report: cmd_leak has %s, want (400, 4)" % (got,))
    finally:
        t.kill()
    return problems, []


def check_since(suite, problems, out, pid):
    """top's and timeline's headings name the attach time of the record."""
    with open(os.path.join(out, "heaptrail.%d.attach" % pid)) as f:
        m = re.search(r"^attached (\d+)", f.read(), re.M)
    if not m:
        problems.append("no attach time in the attach record")
        return
    want = "since attach at " + time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                               time.gmtime(int(m.group(1))))
    final = [n for n in os.listdir(out) if n.endswith(".final.heap")]
    svg = os.path.join(out, "timeline.svg")
    for what, args in (("top", ["top"] + [os.path.join(out, n) for n in final[:1]]),
                       ("timeline", ["timeline", out]),
                       ("timeline --svg", ["timeline", "--svg", svg, out])):
        rc, text, err = heaptrail(suite, *args)
        head = text.decode().split("\n")[0]
        if what.endswith("--svg") and not rc:
            with open(svg) as f:
                head = re.search(r"Live heap over time:[^<]*", f.read()).group(0)
        if rc or want not in head:
            problems.append("%s: exit %d, heading %r, want %r" % (what, rc, head, want))


def test_for(suite):
    work, prog = build(suite)
    out = new_dir(os.path.join(work, "for"))
    problems = []
    t = Target(prog, work)
    try:
        t0 = time.monotonic()
        rc, _, err = heaptrail(suite, "attach", "--for", "1s", "-o", out, str(t.p.pid))
        took = time.monotonic() - t0
        if expect_ok(problems, "attach --for", rc, err):
            if took < 1.0:
                problems.append("attach --for 1s returned after %.2f s" % took)
            names = os.listdir(out)
            if not any(n.endswith(".final.heap") for n in names):
                problems.append("no final dump after --for: %s" % names)
            with open(os.path.join(out, "heaptrail.%d.attach" % t.p.pid)) as f:
                if "detached " not in f.read():
                    problems.append("not detached after --for")
            rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
            if rc != 1 or b"not attached" not in err:
                problems.append("detach after --for: exit %d, %s" % (rc, err[:200]))
            check_since(suite, problems, out, t.p.pid)
        check_end(t, problems, ["ready", "done held=0 cached=256"])
    finally:
        t.kill()
    return problems, []


def test_preloaded(suite):
    work, prog = build(suite)
    out = new_dir(os.path.join(work, "preloaded"))
    problems = []
    t = Target(prog, work, argv=[suite.heaptrail, "run", "-q", "--sample", "64k", "-o", out,
                                 "--", prog])
    try:
        pid = None
        for _ in range(100):  # the program is heaptrail's child
            kids = open("/proc/%d/task/%d/children" % (t.p.pid, t.p.pid)).read().split()
            if kids:
                pid = int(kids[0])
                break
            time.sleep(0.05)
        if pid is None:
            raise run_tests.Failure("no child under heaptrail run")
        # each dump names the file it wrote, a new one each time
        named = []
        for i in range(2):
            rc, _, err = heaptrail(suite, "dump", str(pid))
            named.append(expect_dump_named(problems, "dump %d" % i, rc, err, out, pid))
        if None not in named and named[0] == named[1]:
            problems.append("both dumps named %s" % named[0])
        rc, _, err = heaptrail(suite, "attach", "-o", os.path.join(work, "p2"), str(pid))
        one_line_error(problems, "attach to a preloaded process", rc, err,
                       r"already runs under heaptrail")
        rc, err = t.finish()
        if rc != 3 or t.out != ["ready", "done held=0 cached=256"]:
            problems.append("under heaptrail run: exit %d, output %s" % (rc, t.out))
    finally:
        t.kill()
    return problems, []


def build_prog(suite, name):
    """tests/progs/NAME.c, built once into the work directory."""
    work, _ = build(suite)
    src = os.path.join(os.path.dirname(HERE), "progs", name + ".c")
    prog = os.path.join(work, name)
    with _lock:
        if name not in _built:
            rc, _, err = run_tests.run([suite.cc, "-g", "-O1", "-pthread", "-o", prog + ".tmp",
                                        src], env=os.environ)
            if rc:
                raise run_tests.Failure("build failed: %s" % run_tests.short(err))
            os.rename(prog + ".tmp", prog)
            _built[name] = True
    return work, prog


def attach_dump_detach(suite, problems, t, out):
    """attach --sample 4k -o OUT, dump, detach on the running target t;
    the detach's stderr, or None when the attach failed."""
    new_dir(out)
    time.sleep(0.3)
    rc, _, err = heaptrail(suite, "attach", "--sample", "4k", "-o", out, str(t.p.pid))
    if not expect_ok(problems, "attach", rc, err):
        return None
    rc, _, err = heaptrail(suite, "dump", str(t.p.pid))
    expect_ok(problems, "dump", rc, err)
    rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
    expect_ok(problems, "detach", rc, err)
    return err


def check_bare_end(problems, t, want):
    """The target, left to end by itself: status 0, output want, no stderr."""
    rest, err = t.p.communicate(timeout=30)
    t.out += rest.decode().splitlines()
    if t.p.returncode != 0 or t.out != want or err:
        problems.append("%s: exit %d, output %s (want %s), stderr %r"
                        % (os.path.basename(t.p.args[0]), t.p.returncode, t.out, want,
                           err[:200]))


def test_busy(suite):
    work, prog = build_prog(suite, "attach_busy")
    problems = []
    out = os.path.join(work, "busy")
    t = Target(prog, work, argv=[prog, "8"])
    try:
        if attach_dump_detach(suite, problems, t, out) is not None:
            dumps = sorted(f for f in os.listdir(out) if f.endswith(".api.heap"))
            if dumps:
                # allocated since the attach: the in-use set (two workers'
                # 32 slots, about 17 KB) brings no sample at 4k in 2 % of runs
                rc, top, err = heaptrail(suite, "top", "--alloc-space",
                                         os.path.join(out, dumps[0]))
                if b"busy_site" not in top:
                    problems.append("the dump does not show busy_site:\n%s" % top.decode())
            else:
                problems.append("no dump: %s" % os.listdir(out))
        check_bare_end(problems, t, ["ready", "done"])
    finally:
        t.kill()
    return problems, []


def test_cpu(suite):
    work, prog = build_prog(suite, "attach_cpu")
    rc, bare, err = run_tests.run([prog, "0.2"], timeout=60)
    want = bare.decode().splitlines()
    if rc or len(want) != 2 or not want[1].startswith("done "):
        raise run_tests.Failure("bare run: exit %d, output %r, stderr %r" % (rc, bare, err))
    problems = []
    out = os.path.join(work, "cpu")
    t = Target(prog, work, argv=[prog, "8"])
    try:
        t0 = time.monotonic()
        err = attach_dump_detach(suite, problems, t, out)
        took = time.monotonic() - t0
        if err is not None:
            # a detach run on the agent's module watcher thread (gone
            # since) waited ~2.7 s for that thread to end
            m = re.search(rb"thread stopped ([0-9.]+) ms", err)
            if not m or float(m.group(1)) > 1500:
                problems.append("detach held the thread %s (attach to detach: %.1f s): %s"
                                % (m.group(1).decode() + " ms" if m else "?", took,
                                   run_tests.short(err, 200)))
            final = sorted(f for f in os.listdir(out) if f.endswith(".final.heap"))
            if final:
                rc, top, err = heaptrail(suite, "top", "--alloc-space",
                                         os.path.join(out, final[0]))
                if b"cpu_site" not in top:
                    problems.append("the final dump does not show cpu_site:\n%s" % top.decode())
            else:
                problems.append("no final dump: %s" % os.listdir(out))
        check_bare_end(problems, t, want)
    finally:
        t.kill()
    return problems, []


def one_line_error(problems, what, rc, err, want):
    lines = err.decode().splitlines()
    if rc != 1 or len(lines) != 1 or not re.search(want, lines[0]):
        problems.append("%s: exit %d, stderr %r; want exit 1 and one line matching %r"
                        % (what, rc, err.decode()[:300], want))


def test_errors(suite):
    work, prog = build(suite)
    problems, details = [], []
    with open("/proc/sys/kernel/pid_max") as f:
        free_pid = int(f.read()) + 1
    rc, _, err = heaptrail(suite, "attach", "-o", os.path.join(work, "e0"), str(free_pid))
    one_line_error(problems, "no such process", rc, err, r"no process %d" % free_pid)
    # the other commands that take a pid say it the same way
    for cmd in ("leaks", "dump", "detach"):
        rc, _, err = heaptrail(suite, cmd, str(free_pid))
        one_line_error(problems, "%s: no such process" % cmd, rc, err,
                       r"^heaptrail: no process %d$" % free_pid)
    z = subprocess.Popen(["true"])
    # exited, not reaped: a zombie
    if not run_tests.wait_until(lambda: (run_tests.proc_field(
            "/proc/%d/status" % z.pid, "State") or "").startswith("Z")):
        problems.append("true never became a zombie")
    rc, _, err = heaptrail(suite, "attach", "-o", os.path.join(work, "e1"), str(z.pid))
    one_line_error(problems, "zombie", rc, err, r"zombie")
    rc, _, err = heaptrail(suite, "leaks", str(z.pid))
    one_line_error(problems, "leaks: zombie", rc, err, r"is a zombie")
    z.wait()
    for d in ("e0", "e1"):
        if os.path.exists(os.path.join(work, d)):
            problems.append("a failed attach left its directory %s" % d)
    static = os.path.join(work, "static_sleeper")
    src = os.path.join(work, "static_sleeper.c")
    with open(src, "w") as f:
        f.write("#include <unistd.h>\nint main(void) { pause(); return 0; }\n")
    rc, _, err = run_tests.run([suite.cc, "-static", "-o", static, src], env=os.environ)
    if rc == 0:
        p = subprocess.Popen([static])
        try:
            time.sleep(0.2)
            rc, _, err = heaptrail(suite, "attach", "-o", os.path.join(work, "e2"), str(p.pid))
            one_line_error(problems, "static binary", rc, err, r"static binary")
            if p.poll() is not None:
                problems.append("the static binary died")
        finally:
            p.kill()
            p.wait()
    else:
        details.append("static binary not checked: cannot link -static (%s)"
                       % run_tests.short(err, 120))
    # a seccomp filter that refuses the executable mmap dlopen makes
    sec = os.path.join(work, "attach_seccomp")
    rc, _, err = run_tests.run([suite.cc, "-O1", "-o", sec,
                                os.path.join(os.path.dirname(HERE), "progs", "attach_seccomp.c")], env=os.environ)
    if rc:
        raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    t = Target(sec, work)
    try:
        rc, _, err = heaptrail(suite, "attach", "-o", os.path.join(work, "e3"), str(t.p.pid))
        one_line_error(problems, "seccomp", rc, err,
                       r"could not load the agent .* with dlopen \(its last failed system call: "
                       r"mmap: Operation not permitted\); its seccomp filter may refuse it")
        # glibc leaves the read-only reservation of a load that failed
        # half-way; none of the agent's code may be there
        if any("libheaptrail" in l and l.split()[1][2] == "x" for l in t.maps().splitlines()):
            problems.append("the agent got into the seccomp-filtered process")
        rest, err = t.p.communicate(b"", timeout=30)
        if t.p.returncode != 0 or rest != b"done\n":
            problems.append("seccomp target: exit %d, output %r" % (t.p.returncode, rest))
    finally:
        t.kill()
    # a filter that refuses the futex wait of heaptrail's park: the calls
    # are stepped instead, and attach, dump and detach work
    t = Target(sec, work, argv=[sec, "futex"])
    try:
        out = new_dir(os.path.join(work, "e3f"))
        for cmd in (["attach", "-o", out], ["dump"], ["detach"]):
            rc, _, err = heaptrail(suite, *(cmd + [str(t.p.pid)]))
            expect_ok(problems, "%s under a filter refusing the park's wait" % cmd[0], rc, err)
        rest, err = t.p.communicate(b"", timeout=30)
        if t.p.returncode != 0 or rest != b"done\n":
            problems.append("futex-filtered target: exit %d, output %r"
                            % (t.p.returncode, rest))
    finally:
        t.kill()
    # another user's process: heaptrail run as nobody against ours
    if os.geteuid() == 0:
        t = Target(prog, work)
        try:
            rc, _, err = run_tests.run(["setpriv", "--reuid=65534", "--regid=65534",
                                        "--clear-groups", suite.heaptrail, "attach", "-o",
                                        "/tmp/heaptrail-attach-test-%d" % t.p.pid,
                                        str(t.p.pid)], env=os.environ)
            one_line_error(problems, "another user's process", rc, err,
                           r"not permitted|CAP_SYS_PTRACE|cannot read /proc")
            # The same refusal under Yama: this kernel has none, so its
            # setting is a file over /proc/sys/kernel in a mount namespace
            # of the command's own; the error must say what each mode
            # allows.
            # `leaks` and `dump` trace too, and a `heaptrail run` beside
            # them is no cure: each says what it can do instead
            attach_args = ["attach", "-o", "/tmp/heaptrail-attach-test-%d" % t.p.pid]
            parent = r"ptrace_scope is 1: only a parent may trace its descendants: run " \
                     r"heaptrail as root or with CAP_SYS_PTRACE"
            for cmd, scope, says in (
                    (attach_args, 1, parent + r", or start the program under `heaptrail "
                                              r"run`$"),
                    (attach_args, 2, r"ptrace_scope is 2: only root or CAP_SYS_PTRACE"),
                    (attach_args, 3, r"ptrace_scope is 3: no process may be traced until "
                                     r"the next boot: start the program under `heaptrail "
                                     r"run` instead$"),
                    (["leaks"], 1, parent + r", or start the program under `heaptrail run "
                                            r"--http ADDR` and ask "
                                            r"ADDR/debug/heaptrail/leaks$"),
                    (["leaks"], 2, r"ptrace_scope is 2: only root or CAP_SYS_PTRACE"),
                    (["leaks"], 3, r"ptrace_scope is 3: no process may be traced until "
                                   r"the next boot: the leak report comes when the "
                                   r"program exits$"),
                    (["dump"], 1, parent + r", or start the program under `heaptrail run "
                                           r"--http ADDR` and ask ADDR/debug/pprof/heap$"),
                    (["dump"], 3, r"ptrace_scope is 3: no process may be traced until "
                                  r"the next boot: start the program under `heaptrail run "
                                  r"--every DURATION`")):
                rc, _, err = run_tests.run(
                    ["unshare", "-m", "sh", "-c",
                     "mount --make-rprivate / && mount -t tmpfs tmpfs /proc/sys/kernel && "
                     "mkdir /proc/sys/kernel/yama && echo %d >/proc/sys/kernel/yama/ptrace_scope"
                     " && exec setpriv --reuid=65534 --regid=65534 --clear-groups \"$@\"" % scope,
                     "sh", suite.heaptrail] + cmd + [str(t.p.pid)], env=os.environ)
                one_line_error(problems, "%s: Yama ptrace_scope %d" % (cmd[0], scope), rc, err,
                               says)
            if "libheaptrail" in t.maps():
                problems.append("another user's process got the agent")
            check_end(t, problems, ["ready", "done held=0 cached=256"])
        finally:
            t.kill()
    else:
        details.append("another user's process not checked: not running as root")
    return problems, details


def test_namespace(suite):
    """The agent where the target cannot see it (a tmpfs over its dir in
    the target's mount namespace): loaded from a memory file."""
    work, prog = build(suite)
    hidden = run_tests.fresh_dir(os.path.join(work, "hidden"))
    agent = os.path.join(hidden, "libheaptrail.so")
    with open(os.path.join(os.path.dirname(suite.heaptrail), "libheaptrail.so"), "rb") as f:
        data = f.read()
    with open(agent, "wb") as f:
        f.write(data)
    rc, _, err = run_tests.run(["unshare", "-m", "true"], env=os.environ)
    if rc:
        raise run_tests.Skip("unshare -m is not permitted here: %s" % run_tests.short(err))
    problems = []
    out = new_dir(os.path.join(work, "ns"))
    t = Target(prog, work, argv=["unshare", "-m", "--propagation", "private", "sh", "-c",
                                 "mount -t tmpfs none %s && exec %s" % (hidden, prog)])
    try:
        # its command thread has made its epoll descriptor
        run_tests.wait_until(lambda: "anon_inode:[eventpoll]" in fd_targets(t.p.pid))
        fds = sorted(os.listdir("/proc/%d/fd" % t.p.pid))
        env = dict(os.environ, HEAPTRAIL_AGENT=agent)
        rc, _, err = run_tests.run([suite.heaptrail, "attach", "-o", out, str(t.p.pid)],
                                   env=env)
        if expect_ok(problems, "attach, the agent hidden in the target's namespace", rc, err):
            if not re.search(r"/memfd:heaptrail-[0-9a-f]+/libheaptrail\.so", t.maps()):
                problems.append("the agent is not mapped from a memory file")
            rc, _, err = heaptrail(suite, "dump", str(t.p.pid))
            expect_ok(problems, "dump", rc, err)
            rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
            expect_ok(problems, "detach", rc, err)
            names = os.listdir(out)
            if not any(n.endswith(".api.heap") for n in names) or \
               not any(n.endswith(".final.heap") for n in names):
                problems.append("want a dump and a final dump in %s, got %s" % (out, names))
            if sorted(os.listdir("/proc/%d/fd" % t.p.pid)) != fds:
                problems.append("descriptors before the attach %s, after the detach %s"
                                % (fds, sorted(os.listdir("/proc/%d/fd" % t.p.pid))))
        check_end(t, problems, ["ready", "done held=0 cached=256"])
    finally:
        t.kill()
    return problems, []


def pool_records(problems, suite, out, sites):
    """{(kind, site, pool): (bytes, blocks)} of the pool chunks in the
    records of the leak check file in out whose stack holds one of sites
    (pool: its name, "pool#" for one without)."""
    records = check_records(problems, suite, out)
    if records is None:
        return None
    got = {}
    for r in records:
        fns = [f.get("function") for f in r["stack"]]
        site = next((f for f in fns if f in sites), None)
        if site and r.get("pool"):
            key = (r["kind"], site, "pool#" if r["pool"].startswith("pool#") else r["pool"])
            b, n = got.get(key, (0, 0))
            got[key] = (b + r["bytes"], n + r["blocks"])
    return got


REFUSED = ("heaptrail: cannot hook 'pool_get_zeroed': a thread of the program "
           "stayed inside its first bytes")


def test_fnhook(suite):
    work = os.path.join(build(suite)[0], "fnhook")
    run_tests.fresh_dir(work)
    prog = os.path.join(work, "attach_pools")
    rc, _, err = run_tests.run([suite.cc, "-g", "-O1", "-pthread", "-o", prog, POOLS_SRC])
    if rc:
        raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    fns = ["--alloc-fn", "pool_get(ctx=arg1,size=arg2,name=*(ctx+8))->ret",
           "--free-fn", "pool_put(ctx=arg1,ptr=arg2)",
           "--alloc-fn", "pool_get_zeroed(ctx=arg1,size=arg2)->ret"]
    # the second time, the names of pools first met are looked for where no
    # memory is mapped (1 MB below the program's .data, where `other` is):
    # read safely, the pool is nameless; `kept`, known since the first,
    # keeps its name
    fns2 = [f.replace("*(ctx+8)", "*(ctx-1048000)") for f in fns]
    sites = ("keep_site", "lose_site", "other_site")
    problems = []
    t = Target(prog, work)
    try:
        bare = t.ask("code")
        threads = len(os.listdir("/proc/%d/task" % t.p.pid))
        cycles = [(50, 20, {("still_reachable", "keep_site", "kept"): (50 * 777, 50),
                            ("definitely_lost", "lose_site", "kept"): (20 * 555, 20)}),
                  (10, 3, {("still_reachable", "keep_site", "kept"): (10 * 777, 10),
                           ("definitely_lost", "lose_site", "kept"): (3 * 555, 3),
                           ("still_reachable", "other_site", "pool#"): (4 * 333, 4)})]
        for i, (keep, lose, want) in enumerate(cycles):
            out = new_dir(os.path.join(work, "out%d" % i))
            given = fns
            if i:   # the second time from an options file
                given = ["--options-file", os.path.join(work, "pools.options")]
                with open(given[1], "w") as f:
                    f.write("# pool functions\n" + "".join("%s %s\n" % (fns2[k], fns2[k + 1])
                                                           for k in range(0, len(fns2), 2)))
            rc, _, err = heaptrail(suite, "attach", "--sample", "1", "-o", out, *given,
                                   str(t.p.pid))
            if not expect_ok(problems, "attach %d" % i, rc, err):
                return problems, []
            said = [l for l in err.decode(errors="replace").splitlines()
                    if l.startswith("heaptrail: cannot hook")]
            if said != [REFUSED]:
                problems.append("attach %d: the CLI said %r, want %r" % (i, said, REFUSED))
            hooked = t.ask("code")
            if not hooked.startswith("ok e9") or hooked == bare:
                problems.append("attach %d: pool_get starts with %s, want a jump (bare %s)"
                                % (i, hooked, bare))
            t.ask("keep %d" % keep)
            t.ask("lose %d" % lose)
            if i:
                t.ask("other 4")
            rc, _, err = heaptrail(suite, "leaks", "--show-leak-kinds=all", str(t.p.pid))
            expect_ok(problems, "leaks %d" % i, rc, err)
            got = pool_records(problems, suite, out, sites)
            if got is not None and got != want:
                problems.append("attach %d: %s, want %s" % (i, got, want))
            rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
            expect_ok(problems, "detach %d" % i, rc, err)
            back = t.ask("code")
            if back != bare:
                problems.append("after detach %d pool_get starts with %s, bare %s"
                                % (i, back, bare))
        now = len(os.listdir("/proc/%d/task" % t.p.pid))
        if now != threads:
            problems.append("threads: %d before, %d after" % (threads, now))
        rc, err = t.finish()
        if rc != 0 or t.out[-1] != "done ok kept=64":
            problems.append("target: exit %d, output %s" % (rc, t.out))
        if err:
            problems.append("the target's stderr: %r (the agent's refusals are the "
                            "CLI's to say)" % err[:600])
    finally:
        t.kill()
    return problems, []


ARENA = 64 << 20  # glibc's HEAP_MAX_SIZE on 64 bits


def not_arenas(maps):
    """The lines of a /proc/PID/maps text but glibc's arenas: an arena is
    an anonymous 64 MiB-aligned reservation (its used part rw-p from the
    aligned start, the rest ---p), made by glibc when threads contend for
    one, at any time: the program's own, not something an attach left."""
    lines = maps.splitlines()
    starts = set()
    for l in lines:
        f = l.split()
        lo = int(f[0].split("-")[0], 16)
        if len(f) == 5 and f[4] == "0" and f[1] == "rw-p" and lo % ARENA == 0:
            starts.add(lo)
    out = []
    for l in lines:
        f = l.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        if len(f) == 5 and f[4] == "0" and lo - lo % ARENA in starts and hi <= lo - lo % ARENA + ARENA:
            continue
        out.append(l)
    return out


def test_kill(suite):
    work = os.path.join(suite.build, "e2e", "attach-kill")
    os.makedirs(work, exist_ok=True)
    prog = os.path.join(work, "attach_kill")
    rc, _, err = run_tests.run([suite.cc, "-g", "-O1", "-pthread", "-o", prog, KILL_SRC],
                               env=os.environ)
    if rc:
        raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    problems, details = [], []
    t = Target(prog, work)
    pid = str(t.p.pid)
    out = os.path.join(work, "out")

    def cli(args, kill_at=None, stall=None):
        env = dict(os.environ)
        if kill_at:
            env["HEAPTRAIL_TEST_KILL_AT"] = str(kill_at)
        if stall:
            env["HEAPTRAIL_TEST_STALL_PARK"] = str(stall)
        t0 = time.monotonic()
        r = subprocess.run([suite.heaptrail] + args, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=60)
        return r.returncode, r.stderr.decode(), time.monotonic() - t0

    def attach(kill_at=None):
        run_tests.fresh_dir(out)
        return cli(["attach", "-o", out, pid], kill_at)

    def whole(what):
        """The program runs on, answers, and no one traces it."""
        if t.p.poll() is not None:
            problems.append("%s: the program died (status %d): %s"
                            % (what, t.p.returncode, t.p.stderr.read().decode()[:300]))
            return False
        try:
            t.ask("ping")
        except run_tests.Failure as e:
            problems.append("%s: %s" % (what, e))
            return False
        # The agent's own stop (its tracer task, a child of the program)
        # may be under way: the attach's call runs to its end after the
        # kill, and it stops every thread while it writes the jumps of
        # the allocator's entry points. That one goes by itself.
        deadline = time.monotonic() + 3
        while True:
            with open("/proc/%s/status" % pid) as f:
                status = f.read()
            tracer = re.search(r"\nTracerPid:\t(\d+)\n", status).group(1)
            if tracer == "0":
                return True
            try:
                with open("/proc/%s/status" % tracer) as f:
                    own = "\nPPid:\t%s\n" % pid in f.read()
            except OSError:   # gone meanwhile: look again
                own = True
            if not own or time.monotonic() > deadline:
                problems.append("%s: still traced: %s" % (what, status))
                return False
            time.sleep(0.01)

    def detach_if_attached(what):
        rc, err, _ = cli(["detach", pid])
        if rc and "is not attached" not in err and "has no heaptrail agent" not in err:
            problems.append("%s: the detach after it: exit %d: %s" % (what, rc, err[:300]))

    try:
        # how long each takes here, for the sweep of delays
        took = {"attach": [], "detach": []}
        for _ in range(3):
            rc, err, dt = attach()
            took["attach"].append(dt)
            expect_ok(problems, "attach", rc, err)
            rc, err, dt = cli(["detach", pid])
            took["detach"].append(dt)
            expect_ok(problems, "detach", rc, err)
        if problems:
            return problems, details
        maps_before = not_arenas(t.maps())
        steps = {}
        for what in ("attach", "detach"):
            n = 0
            while not problems:
                n += 1
                if what == "detach":
                    rc, err, _ = attach()
                    if not expect_ok(problems, "attach before a detach killed at step %d" % n,
                                     rc, err):
                        break
                    rc, err, _ = cli(["detach", pid], kill_at=n)
                else:
                    rc, err, _ = attach(kill_at=n)
                label = "%s killed at step %d" % (what, n)
                if not whole(label):
                    break
                detach_if_attached(label)
                if rc != -signal.SIGKILL:
                    expect_ok(problems, "%s (not killed: all its steps done)" % label, rc, err)
                    break
                if n > 20000:
                    problems.append("%s: more than 20000 steps" % what)
            steps[what] = n - 1
        for what in ("attach", "detach"):
            longest = max(took[what])
            delays = [longest * 1.5 * i / 60 for i in range(61)]
            for d in delays:
                if problems:
                    break
                if what == "detach":
                    rc, err, _ = attach()
                    if not expect_ok(problems, "attach before a detach killed", rc, err):
                        break
                else:
                    run_tests.fresh_dir(out)
                args = ["attach", "-o", out, pid] if what == "attach" else ["detach", pid]
                c = subprocess.Popen([suite.heaptrail] + args, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                time.sleep(d)
                c.kill()
                c.wait()
                label = "%s killed after %.1f ms" % (what, d * 1e3)
                if not whole(label):
                    break
                detach_if_attached(label)
        details.append("killed at each of %d steps of the attach and %d of the detach, then "
                       "after delays up to 1.5 x %.0f ms and 1.5 x %.0f ms"
                       % (steps.get("attach", 0), steps.get("detach", 0),
                          max(took["attach"]) * 1e3, max(took["detach"]) * 1e3))
        if not problems:
            # heaptrail held up past the park (1 s) once a call has ended:
            # the thread goes back by itself; an attach borrows one again
            # after its dlopen, a dump or a detach says its result is lost
            run_tests.fresh_dir(out)
            rc, err, _ = cli(["attach", "-o", out, pid], stall=1)
            expect_ok(problems, "attach held up after its dlopen", rc, err)
            whole("attach held up after its dlopen")
            for what, args, entry in (("dump", ["dump", pid], "heaptrail_dump_request"),
                                      ("detach", ["detach", pid], "heaptrail_attach_stop")):
                if what == "detach":
                    rc, err, _ = cli(["dump", pid])
                    expect_ok(problems, "dump before a held-up detach", rc, err)
                rc, err, _ = cli(args, stall=1)
                lines = err.splitlines()
                if rc != 1 or len(lines) != 1 or \
                        not re.search(r"%s ran in process %s, but its result was lost" %
                                      (entry, pid), lines[0]):
                    problems.append("%s held up after its call: exit %d, stderr %r" %
                                    (what, rc, err[:300]))
                whole("%s held up after its call" % what)
            rc, err, _ = cli(["detach", pid])
            if rc != 1 or "is not attached" not in err:
                problems.append("the detach held up did not detach: a detach after it: "
                                "exit %d, %r" % (rc, err[:300]))
            details.append("held up past the park after a call: attach, dump, detach")
        if not problems:
            # a signal for the thread that comes while heaptrail holds it
            # passes through a ptrace stop, and the kernel drops it when
            # heaptrail dies right there; with heaptrail alive none is lost
            lost = int(t.ask("lost").split()[-1])
            details.append("signals lost to the kills: %d" % lost)
            for _ in range(3):
                rc, err, _ = attach()
                expect_ok(problems, "attach after the kills", rc, err)
                rc, err, _ = cli(["dump", pid])
                expect_ok(problems, "dump after the kills", rc, err)
                rc, err, _ = cli(["detach", pid])
                expect_ok(problems, "detach after the kills", rc, err)
            now = int(t.ask("lost").split()[-1])
            if now != lost:
                problems.append("%d signals lost in 3 attach, dump and detach cycles" %
                                (now - lost))
            # nothing left behind by the kills or the cycles (the agent
            # stays mapped from the first attach on)
            maps_after = not_arenas(t.maps())
            if len(maps_after) != len(maps_before):
                problems.append("%d mappings after the first attach and detach, %d after "
                                "the kills and cycles: %s"
                                % (len(maps_before), len(maps_after),
                                   sorted(set(maps_after) - set(maps_before))[:8]))
        if t.p.poll() is None:
            rc, err = t.finish()
            if rc != 0 or t.out[-1:] != ["done ok"] or err:
                problems.append("the program: exit %d, output %s, stderr %r"
                                % (rc, t.out[-3:], err[:300]))
    finally:
        t.kill()
    return problems, details


def test_timeout(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "attach-timeout"))
    prog = os.path.join(work, "attach_sleep")
    rc, _, err = run_tests.run([suite.cc, "-O1", "-pthread", "-o", prog,
                                os.path.join(os.path.dirname(HERE), "progs", "attach_sleep.c")], env=os.environ)
    if rc:
        raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    problems, slept = [], None
    t = Target(prog, work)
    try:
        time.sleep(0.8)
        rc, _, err = heaptrail(suite, "attach", "-o", os.path.join(work, "out"), str(t.p.pid))
        expect_ok(problems, "attach", rc, err.decode())
        rc, _, err = heaptrail(suite, "detach", str(t.p.pid))
        expect_ok(problems, "detach", rc, err.decode())
        slept = int(t.line().split()[1])
        if slept >= 2500:
            problems.append("the 2 s sleep took %d ms: its thread was borrowed" % slept)
        t.p.stdin.close()
        t.p.wait(timeout=30)
        if t.p.returncode != 0:
            problems.append("exit status %d" % t.p.returncode)
    finally:
        t.kill()
    return problems, ["the 2 s sleep took %s ms" % slept]


def test_exiting(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "attach-exiting"))
    sleep = shutil.which("sleep")
    problems, seen = [], {}
    want = re.compile(r"^heaptrail: (no process \d+|process \d+ exited|process \d+ is a zombie "
                      r"\(.*\)|cannot attach to process \d+ yet: libc\.so\.6 is not loaded "
                      r"in it \(it is starting\); try again)$")
    for i in range(60):
        p = subprocess.Popen([sleep, "0.03"], env=run_tests.RUN_ENV)
        try:
            time.sleep(i * 0.001)
            rc, _, err = heaptrail(suite, "attach", "-o", os.path.join(work, "d%d" % i),
                                   str(p.pid))
        finally:
            p.wait()
        err = err.decode() if isinstance(err, bytes) else err
        if rc == 0:
            seen["attached"] = seen.get("attached", 0) + 1
            continue
        line = err.strip()
        if rc != 1 or "\n" in line or not want.match(line):
            problems.append("attach after %d ms: exit %d: %r" % (i, rc, err[:300]))
        else:
            key = re.sub(r"\d+", "N", line)
            seen[key] = seen.get(key, 0) + 1
    return problems, ["; ".join("%s: %d" % kv for kv in sorted(seen.items()))]


def collect(suite):
    return [("attach:growth", lambda: test_growth(suite)),
            ("attach:exact", lambda: test_exact(suite)),
            ("attach:plugin", lambda: test_plugin(suite)),
            ("attach:loop", lambda: test_loop(suite)),
            ("attach:exit", lambda: test_exit(suite)),
            ("attach:detach-forks", lambda: test_detach_forks(suite)),
            ("attach:reattach", lambda: test_reattach(suite)),
            ("attach:crash", lambda: test_crash(suite)),
            ("attach:for", lambda: test_for(suite)),
            ("attach:preloaded", lambda: test_preloaded(suite)),
            ("attach:busy", lambda: test_busy(suite)),
            ("attach:cpu", lambda: test_cpu(suite)),
            ("attach:errors", lambda: test_errors(suite)),
            ("attach:kill", lambda: test_kill(suite)),
            ("attach:exiting", lambda: test_exiting(suite)),
            ("attach:timeout", lambda: test_timeout(suite)),
            ("attach:namespace", lambda: test_namespace(suite)),
            ("attach:fnhook", lambda: test_fnhook(suite))]
