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
    attach:real-sqlite3  sqlite3 :memory: in a session on stdin: attach
                         (--sample 1), insert 5,000 rows of 100 bytes,
                         dump, detach, query: the answers are right, the
                         dump holds the table (>= 500,000 bytes in use, in
                         libsqlite3), sqlite3 ends with status 0
    attach:real-redis    redis-server: attach (--sample 1) while
                         redis-benchmark runs SET/GET/LPUSH, dump, detach;
                         every benchmark run succeeds, redis answers PING
                         after the detach and shuts down with status 0;
                         the dump names processCommand
"""
import os
import re
import shutil
import socket
import subprocess
import time

import run_tests as rt
from run_tests import Failure, Skip

PY = "/usr/bin/python3"

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
    problems = []

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
        rc, _, err = ht(suite, "attach", "--sample", "1", "-o", out, str(p.pid))
        if not ok(problems, "attach", rc, err):
            return problems, []
        bench(20000)
        rc, _, err = ht(suite, "dump", str(p.pid))
        ok(problems, "dump", rc, err)
        rc, _, err = ht(suite, "detach", str(p.pid))
        ok(problems, "detach", rc, err)
        if cli("ping")[1] != b"PONG\n":
            problems.append("no PONG after the detach")
        bench(2000)
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
    return problems, [text[:800]]


def collect(suite):
    return [("attach:real-python", lambda: test_python(suite)),
            ("attach:real-sqlite3", lambda: test_sqlite3(suite)),
            ("attach:real-redis", lambda: test_redis(suite))]
