"""Attaching to real programs from Debian, started bare (issue 14).

    attach:real-python   python3 reading commands on stdin; after the
                         attach (--sample 1) it leaks 50 blocks of 4,000
                         bytes through ctypes (CDLL("libc.so.6").malloc,
                         looked up after the attach): `heaptrail leaks PID`
                         reports them as definitely lost, through libffi
                         (40 to 50 of them: the scan is conservative, and a
                         stale copy of a pointer left in the interpreter's
                         memory keeps a block reachable, as under valgrind;
                         how many such copies survive varies from run to
                         run: 0 to 6 were seen on a loaded machine);
                         detach; the script ends with its output and status
    attach:real-ctypes, attach:real-ctypes-exact   python3 started bare
                         runs tests/progs/ctypes_leak.py: 4 KiB
                         leaked through ctypes about every millisecond, through
                         libc's malloc and free as dlsym gave them before
                         the attach (the allocator's entry points behind
                         trampolines, issue 28), beside a flat ring of
                         ctypes blocks and one of bytearrays; attach
                         (default sampling, and --sample 1), 3 s, detach:
                         `growth` has one site growing, in libffi (the
                         code that calls malloc for ctypes), at the rate
                         the script counted (within 25 %), and the
                         bytearrays' site listed, not growing; exact: with
                         the script paused, a leak check holds, from
                         libffi, the bytes leaked since the attach and the
                         ring, to the block; after the detach the fds and
                         threads are those before the attach, the mappings
                         too but for the agent's own libraries and one page
                         of trampolines; the script ends with its output
                         (no block's bytes changed) and status. With
                         --slots-only both fail (nothing from libffi seen)
    attach:real-sqlite3  sqlite3 :memory: in a session on stdin: attach
                         (--sample 1), insert 5,000 rows of 100 bytes,
                         dump, detach, query: the answers are right, the
                         dump holds the table (>= 500,000 bytes in use, in
                         libsqlite3), sqlite3 ends with status 0
    attach:real-redis    redis-server (jemalloc's malloc): attach
                         (--sample 1, --every 500ms) while redis-benchmark
                         runs SET/GET/LPUSH, then a list grown by 40,000
                         LPUSHes of 1,000 bytes between two dumps: the
                         in-use heap of the second dump less the first's
                         within 25 % of what redis says its own memory
                         grew by (INFO's used_memory, jemalloc's sizes);
                         `growth` over the dumps names a growing site;
                         `leaks PID` writes a check; detach; every
                         benchmark run succeeds, redis answers PING after
                         the detach, has the descriptors it had before the
                         attach and its threads (jemalloc may have started
                         one background thread, for the arena it gave the
                         thread the attach borrowed), no mapping added but
                         the agent's own files (inert), and shuts down with
                         status 0; the dump names processCommand
"""
import os
import re
import shutil
import socket
import subprocess
import time

import run_tests as rt
from run_tests import Failure, Skip
import test_attach as ta
import test_attach_ptrs as tap

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
CTYPES = os.path.join(os.path.dirname(HERE), "progs", "ctypes_leak.py")

LEAKER = r"""
import ctypes, sys
print("ready", flush=True)
for line in sys.stdin:
    w = line.split()
    if w[0] == "leak":
        m = ctypes.CDLL("libc.so.6").malloc
        m.restype = ctypes.c_void_p
        for i in range(int(w[1])):
            m(4000)
        print("ok", flush=True)
    elif w[0] == "quit":
        break
print("done", flush=True)
"""


def bare_env():
    env = dict(rt.RUN_ENV)
    for k in ("LD_PRELOAD", "HEAPTRAIL_OPTIONS", "PYTHONPATH", "PYTHONHOME"):
        env.pop(k, None)
    return env


def ht(suite, *args, timeout=60):
    return rt.run([suite.heaptrail] + list(args), timeout=timeout)


def work_dir(suite, name):
    return rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "attach-real-" + name))


def ok(problems, what, rc, err):
    if rc != 0:
        problems.append("%s: status %d: %s" % (what, rc, rt.short(err, 300)))
        return False
    return True


def readline(p, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        line = p.stdout.readline()
        if line:
            return line.decode().rstrip("\n")
        if p.poll() is not None:
            break
    raise Failure("no answer from the program (status %s)" % p.poll())


def test_python(suite):
    if not os.access(PY, os.X_OK):
        raise Skip("Debian's python3 is not installed")
    work = work_dir(suite, "python")
    out = os.path.join(work, "run")
    p = subprocess.Popen([PY, "-c", LEAKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=work, env=bare_env())
    problems = []
    try:
        if readline(p) != "ready":
            raise Failure("python3 did not start")
        rc, _, err = ht(suite, "attach", "--sample", "1", "-o", out, str(p.pid))
        if not ok(problems, "attach", rc, err):
            return problems, []
        p.stdin.write(b"leak 50\n")
        p.stdin.flush()
        if readline(p) != "ok":
            problems.append("python3 did not answer the leak command")
        rc, text, err = ht(suite, "leaks", str(p.pid))
        ok(problems, "leaks", rc, err)
        report = (text + err).decode(errors="replace")
        m = re.search(r"definitely lost: ([\d,]+) bytes in ([\d,]+) blocks?", report)
        nbytes, nblocks = ((int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")))
                           if m else (0, 0))
        if not 40 <= nblocks <= 50 or nbytes != 4000 * nblocks:
            problems.append("definitely lost %s, expected 40 to 50 blocks of 4,000 bytes"
                            % (m.group(0) if m else "missing"))
        if "ffi_call" not in report:
            problems.append("the lost blocks' stack does not go through ffi_call")
        rc, _, err = ht(suite, "detach", str(p.pid))
        ok(problems, "detach", rc, err)
        rest, perr = p.communicate(b"leak 5\nquit\n", timeout=60)
        if p.returncode != 0 or rest != b"ok\ndone\n" or perr:
            problems.append("python3 after the detach: status %d, stdout %r, stderr %r"
                            % (p.returncode, rest, perr[:300]))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return problems, [report[-1200:]] if 'report' in locals() else []


def counts(t, cmd="count"):
    return [int(x) for x in t.ask(cmd).split()[1:]]


def in_libffi(frame):
    return re.search(r"/libffi\.so[.\d]*$", frame.get("module") or "") is not None


def test_ctypes(suite, exact):
    if not os.access(PY, os.X_OK):
        raise Skip("Debian's python3 is not installed")
    work = work_dir(suite, "ctypes-exact" if exact else "ctypes")
    out = os.path.join(work, "run")
    problems, info = [], []
    t = ta.Target(None, work, argv=[PY, CTYPES], env=bare_env())
    try:
        deadline = time.monotonic() + 20
        # both rings full: 26 turns fill the 256 ctypes blocks
        while counts(t)[1] < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = t.p.pid
        before = tap.snapshot(pid)
        c0 = counts(t, "pause")
        args = ["attach", "--every", "200ms", "-o", out] + (["--sample", "1"] if exact else [])
        rc, _, err = ht(suite, *(args + [str(pid)]))
        if not ok(problems, "attach", rc, err):
            return problems, []
        t.ask("resume")
        t0 = time.monotonic()
        time.sleep(3)
        wall1 = time.time()
        c1 = counts(t, "pause")
        t1 = time.monotonic()
        leaked = c1[0] - c0[0]
        rate = leaked / (t1 - t0)
        info.append("python3 leaked %d bytes through ctypes in %.2f s: %.0f B/s"
                    % (leaked, t1 - t0, rate))
        if exact:
            rc, _, err = ht(suite, "leaks", str(pid))
            if ok(problems, "leaks", rc, err):
                records = ta.check_records(problems, suite, out)
                # the blocks ctypes' malloc returned since the attach: the
                # leak, and the ring of 256 (turned over many times since)
                got = [0, 0]
                for r in records or []:
                    if r["stack"] and in_libffi(r["stack"][0]):
                        got[0] += r["bytes"]
                        got[1] += r["blocks"]
                want = [leaked + 256 * 2048, leaked // 4096 + 256]
                if records is not None and got != want:
                    problems.append("blocks from ctypes' malloc since the attach: %d bytes in "
                                    "%d blocks, want %d in %d (%d leaked by the program, "
                                    "and its ring of 256 blocks of 2048)"
                                    % (got[0], got[1], want[0], want[1], leaked))
        t.ask("resume")
        rc, _, err = ht(suite, "detach", str(pid))
        ok(problems, "detach", rc, err)
        after = tap.snapshot(pid)
        if after[2:] != before[2:]:
            problems.append("after the detach: fds %s, threads %s; before the attach: %s, %s"
                            % (after[2], after[3], before[2], before[3]))
        new = [f for f in after[0] if f not in before[0]]
        if any(not re.search(r"/(libheaptrail\.so|libZy\w+\.so[.\d]*|libm\.so\.6)$", f)
               for f in new) or after[1] - before[1] > 1:
            problems.append("the detach left mapped %s and %d executable anonymous "
                            "mappings more, want only the agent's libraries and 1"
                            % (new, after[1] - before[1]))
        dumps = sorted(os.path.join(out, f) for f in os.listdir(out)
                       if f.endswith(".every.heap") and
                       os.path.getmtime(os.path.join(out, f)) < wall1)
        rc, gout, err = ht(suite, "growth", "--bytes", *dumps)
        if ok(problems, "growth", rc, err):
            text = gout.decode()
            info.append(text)
            rows = ta.growth_rows(text)
            growing = [r for r in rows if r[0] != "-" and r[3] != "(all)"]
            if len(growing) != 1 or not re.match(r"libffi\.so[.\d]*\+0x", growing[0][3]):
                problems.append("growing %s, want the site in libffi alone (ctypes' calls "
                                "to malloc)" % [r[3] for r in growing])
            elif not 0.75 * rate <= growing[0][2] <= 1.25 * rate:
                problems.append("%s grows at %d B/s, python3 leaked %.0f B/s there"
                                % (growing[0][3], growing[0][2], rate))
            if not any(r[0] == "-" and r[3] == "PyByteArray_FromStringAndSize" for r in rows):
                problems.append("want PyByteArray_FromStringAndSize (a full ring of "
                                "bytearrays) listed, not growing")
            if "does not see" in text or "unseen" in text:
                problems.append("growth says it misses memory:\n%s" % text)
        rc, err = t.finish()
        if rc != 3 or err or t.out[-1] != "done errors=0":
            problems.append("python3: exit %d, last line %r, stderr %r"
                            % (rc, t.out[-1], err[:300]))
    finally:
        t.kill()
    return problems, info


def test_sqlite3(suite):
    if not shutil.which("sqlite3"):
        raise Skip("sqlite3 is not installed")
    work = work_dir(suite, "sqlite3")
    out = os.path.join(work, "run")
    p = subprocess.Popen(["sqlite3", ":memory:"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=work,
                         env=bare_env())
    problems = []
    try:
        p.stdin.write(b"create table t(a, b text);\nselect 'ready';\n")
        p.stdin.flush()
        if readline(p) != "ready":
            raise Failure("sqlite3 did not start")
        rc, _, err = ht(suite, "attach", "--sample", "1", "-o", out, str(p.pid))
        if not ok(problems, "attach", rc, err):
            return problems, []
        p.stdin.write(b"with recursive c(x) as (select 1 union all select x+1 from c "
                      b"where x<5000) insert into t select x, printf('%0100d', x) from c;\n"
                      b"select count(*) from t;\n")
        p.stdin.flush()
        if readline(p) != "5000":
            problems.append("sqlite3 did not count 5000 rows")
        rc, _, err = ht(suite, "dump", str(p.pid))
        ok(problems, "dump", rc, err)
        rc, _, err = ht(suite, "detach", str(p.pid))
        ok(problems, "detach", rc, err)
        rest, perr = p.communicate(b"select sum(a) from t;\n.quit\n", timeout=60)
        if p.returncode != 0 or rest != b"12502500\n" or perr:
            problems.append("sqlite3 after the detach: status %d, stdout %r, stderr %r"
                            % (p.returncode, rest, perr[:300]))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    dumps = sorted(f for f in os.listdir(out) if f.endswith(".api.heap")) if os.path.isdir(out) else []
    if not dumps:
        problems.append("no dump in %s" % out)
        return problems, []
    rc, top, err = ht(suite, "top", os.path.join(out, dumps[0]))
    text = top.decode(errors="replace")
    m = re.search(r"in-use space ([\d.]+) (KiB|MiB)", text)
    size = float(m.group(1)) * (1024 if m.group(2) == "KiB" else 1 << 20) if m else 0
    if size < 500000:
        problems.append("the dump holds %d bytes in use, expected >= 500,000 (the table)"
                        % size)
    if "libsqlite3" not in text and "sqlite3" not in text:
        problems.append("the dump does not name sqlite3's code")
    return problems, [text[:800]]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_redis(suite):
    for tool in ("redis-server", "redis-cli", "redis-benchmark"):
        if not shutil.which(tool):
            raise Skip("%s is not installed (apt-get install redis-server)" % tool)
    work = work_dir(suite, "redis")
    out = os.path.join(work, "run")
    port = str(free_port())
    p = subprocess.Popen(["redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", work], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, cwd=work, env=bare_env())
    problems, details_redis = [], []

    def cli(*args):
        return rt.run(["redis-cli", "-p", port] + list(args), env=bare_env())

    def bench(n):
        rc, o, e = rt.run(["redis-benchmark", "-p", port, "-n", str(n), "-q", "-t",
                           "set,get,lpush"], env=bare_env(), timeout=120)
        if rc != 0 or b"rror" in o + e:
            problems.append("redis-benchmark -n %d: status %d: %s" % (n, rc, rt.short(o + e)))

    try:
        for _ in range(100):
            if cli("ping")[1] == b"PONG\n":
                break
            time.sleep(0.05)
        else:
            raise Failure("redis-server did not answer PING")
        bench(2000)
        before = process_state(p.pid)
        rc, _, err = ht(suite, "attach", "--sample", "1", "--every", "500ms", "-o", out,
                        str(p.pid))
        if not ok(problems, "attach", rc, err):
            return problems, []
        bench(20000)
        # a list that grows by 40 MB between two dumps: heaptrail's figure
        # against redis' own count of its memory
        used = []
        in_use = []
        for step in range(2):
            if step:
                rc, o, e = rt.run(["redis-benchmark", "-p", port, "-n", "40000", "-d", "1000",
                                   "-q", "-t", "lpush"], env=bare_env(), timeout=120)
                if rc != 0:
                    problems.append("redis-benchmark lpush: status %d: %s" % (
                        rc, rt.short(o + e)))
            rc, _, err = ht(suite, "dump", str(p.pid))
            ok(problems, "dump", rc, err)
            info = cli("info", "memory")[1].decode()
            used.append(int(re.search(r"^used_memory:(\d+)", info, re.M).group(1)))
            dumps = sorted(f for f in os.listdir(out) if f.endswith(".api.heap"))
            rc, top, err = ht(suite, "top", "--bytes", os.path.join(out, dumps[-1]))
            m = re.search(rb"in-use space (\d+)", top)
            in_use.append(int(m.group(1)) if m else None)
        if None in in_use:
            problems.append("top --bytes gave no in-use space: %s" % in_use)
        else:
            ours, theirs = in_use[1] - in_use[0], used[1] - used[0]
            details_redis.append("the list's growth: heaptrail %d bytes, redis' used_memory "
                                 "%d" % (ours, theirs))
            if not 0.75 * theirs <= ours <= 1.25 * theirs:
                problems.append("the list grew by %d bytes by heaptrail's dumps, %d by "
                                "redis' used_memory: more than 25 %% apart" % (ours, theirs))
        rc, gout, err = ht(suite, "growth", out)
        g = gout.decode(errors="replace")
        details_redis.append(g[:1500])
        if rc != 0 or not re.search(r"^\s*\d+\s+growing\b", g, re.M):
            problems.append("growth over the dumps names no growing site (status %d): %s" % (
                rc, rt.short(gout + err, 600)))
        rc, lout, err = ht(suite, "leaks", str(p.pid))
        ok(problems, "leaks", rc, err)
        rc, _, err = ht(suite, "detach", str(p.pid))
        ok(problems, "detach", rc, err)
        if cli("ping")[1] != b"PONG\n":
            problems.append("no PONG after the detach")
        bench(2000)
        after = process_state(p.pid)
        if before["fds"] != after["fds"]:
            problems.append("descriptors before the attach %s, after the detach %s" % (
                before["fds"], after["fds"]))
        # jemalloc gives the thread the attach borrows (an idle one, never
        # the main thread) an arena of its own at the agent's dlopen, and
        # starts a background thread for that arena: jemalloc's, idle,
        # said in docs/usage/heaptrail-attach.md; any other thread is ours
        new = list(after["threads"])
        for t in before["threads"]:
            if t in new:
                new.remove(t)
        if [t for t in new if t != "jemalloc_bg_thd"] or len(new) > 1 or \
                len(after["threads"]) < len(before["threads"]):
            problems.append("threads before the attach %s, after the detach %s" % (
                before["threads"], after["threads"]))
        extra = sorted(m for m in after["maps"] - before["maps"]
                       if not re.search(r"(libheaptrail\.so|/memfd:heaptrail|libm\.so|"
                                        r"libZydis|\[anon)", m))
        if extra:
            problems.append("mappings left after the detach: %s" % extra)
        cli("shutdown", "nosave")
        p.wait(timeout=30)
        if p.returncode != 0:
            problems.append("redis-server ended with status %d" % p.returncode)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    dumps = sorted(f for f in os.listdir(out) if f.endswith(".api.heap")) if os.path.isdir(out) else []
    if not dumps:
        problems.append("no dump in %s" % out)
        return problems, []
    rc, top, err = ht(suite, "top", "--cum", os.path.join(out, dumps[0]))
    text = top.decode(errors="replace")
    if "processCommand" not in text:
        problems.append("the dump does not name processCommand")
    return problems, details_redis + [text[:800]]


def process_state(pid):
    """The threads, descriptors (what they point to; of the TCP sockets,
    the listening ones alone: clients come and go) and mapped files of a
    process."""
    clients = set()
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                for l in f.readlines()[1:]:
                    w = l.split()
                    if len(w) > 9 and w[3] != "0A":  # not LISTEN
                        clients.add("socket:[%s]" % w[9])
        except OSError:
            pass
    fds = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target not in clients:
            fds.append(target)
    with open("/proc/%d/maps" % pid) as f:
        maps = {l.split(None, 5)[5].strip() for l in f if len(l.split(None, 5)) == 6}
    threads = []
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                threads.append(f.read().strip())
        except OSError:
            pass
    return {"threads": sorted(threads), "fds": sorted(fds), "maps": maps}


def collect(suite):
    return [("attach:real-python", lambda: test_python(suite)),
            ("attach:real-ctypes", lambda: test_ctypes(suite, False)),
            ("attach:real-ctypes-exact", lambda: test_ctypes(suite, True)),
            ("attach:real-sqlite3", lambda: test_sqlite3(suite)),
            ("attach:real-redis", lambda: test_redis(suite))]
