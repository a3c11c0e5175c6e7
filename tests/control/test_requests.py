"""requests: heaptrail's requests to a running agent never interrupt the
program (issue 27). The oracle is the program's own check:
tests/hostile/progs/eintr.c in its `wait` mode, whose main thread and
other threads wait in nanosleep, poll, epoll_wait, select, sem_timedwait
and sigtimedwait (and read and sleep) over and over, and exit 91 when one
fails with EINTR or returns early. Each test ends the program through its
stdin and wants "eintr: no call was interrupted" and status 0.

    requests:leaks-run      `heaptrail run`, then 30 `heaptrail leaks PID`:
                            each answers (before: the first EINTR'd the
                            main thread's wait)
    requests:leaks-attach   started bare, `heaptrail attach`, 30 `heaptrail
                            leaks PID`, detach
    requests:http-run       `heaptrail run --http`: 200 GETs of
                            /debug/pprof/heap, 16 at a time, all 200 OK
    requests:http-attach    `heaptrail attach --http`: the same
    requests:attach-cycles  ATTACH_CYCLES times `attach --http`, one
                            /debug/pprof/heap, `heaptrail dump`, detach
                            (before: the program died within a few cycles)
    requests:concurrent     `run --http`: four `heaptrail leaks PID` at a
                            time, 40 in all, while 200 heap requests come
                            over HTTP: every one answers (a thread held by
                            another heaptrail is waited for, not "already
                            traced" nor counted as a thread that ended:
                            before, -EPERM was -1, "gone", and 200 tries
                            went by in 20 ms; the agent's scan does not
                            fall back to its signal, EINTRs, when a
                            holder let go between its refusal and its look)
    requests:detached-leaks attach, detach, then `heaptrail leaks PID`: one
                            line saying the process was detached, non-zero
                            status, and the program never notices (before:
                            its poll failed with EINTR)
    requests:moved-cwd      the agent alone (LD_PRELOAD), output= and
                            prefix= relative in HEAPTRAIL_OPTIONS, or a
                            relative HEAPTRAIL_OUTPUT, and a program that
                            changes directory once started
                            (progs/chdir_wait.c): `heaptrail leaks PID`,
                            run from another directory, and `heaptrail
                            serve`'s /debug/pprof/heap find the files
                            where the agent wrote them, against its start
                            directory (before: leaks waited for a file
                            in the program's new directory, or the CLI's)
"""
import concurrent.futures
import os
import select
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import run_tests
import common

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(ROOT, "tests", "hostile", "progs", "eintr.c")
ATTACH_CYCLES = 100
LEAKS_AT_ONCE = 4
LEAKS_EACH = 10


def build(suite):
    return common.built_once(
        suite, SRC, os.path.join(suite.build, "e2e", "requests", "eintr"),
        ["-g", "-O1", "-fno-omit-frame-pointer", "-pthread",
         "-I" + os.path.join(ROOT, "tests", "hostile", "progs"),
         "-I" + os.path.join(ROOT, "tests", "e2e", "progs"),
         "-I" + os.path.join(ROOT, "include")])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Prog:
    """eintr wait, bare or under `heaptrail run` (extra: its options)."""

    def __init__(self, suite, work, run=None):
        prog = build(suite)
        env = dict(run_tests.RUN_ENV)
        env.pop("LD_PRELOAD", None)
        cmd = [prog, "wait"]
        if run is not None:
            cmd = [suite.heaptrail, "run", "-q", "-o", os.path.join(work, "out")] + run + \
                  ["--"] + cmd
        self.err = open(os.path.join(work, "stderr"), "wb")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, cwd=work, env=env)
        r, _, _ = select.select([self.p.stdout], [], [], 20)
        line = self.p.stdout.readline() if r else b""
        if line != b"ready\n":
            self.p.kill()
            raise run_tests.Failure("eintr did not start: %r" % line)
        self.pid = self.p.pid
        if run is not None:
            kids = open("/proc/%d/task/%d/children" % (self.p.pid, self.p.pid)).read().split()
            self.pid = int(kids[0])

    def alive(self):
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except OSError:
            return False

    def finish(self, problems, tag=""):
        try:
            out, _ = self.p.communicate(b"\n", timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, _ = self.p.communicate()
        self.err.close()
        with open(self.err.name, "rb") as f:
            err = f.read()
        if self.p.returncode != 0 or b"eintr: no call was interrupted\n" not in out:
            problems.append("%sthe program: status %d, stdout %r, stderr %r" % (
                tag, self.p.returncode, run_tests.short(out), run_tests.short(err, 400)))
        text = err.decode("utf-8", "replace")
        if problems:
            # what heaptrail said, which a 503 only points to
            said = [l for l in text.splitlines()
                    if l.startswith("heaptrail: ") and "live endpoint" not in l
                    and " report in " not in l]
            if said:
                problems.append("heaptrail's stderr: " + " | ".join(said[:3]))
        return text


def heaptrail(suite, work, *args, timeout=60):
    return run_tests.run([suite.heaptrail] + list(args), cwd=work, timeout=timeout)


def attach(suite, work, prog, problems, *extra, out="att"):
    rc, _, err = heaptrail(suite, work, "attach", "-o", os.path.join(work, out), *extra,
                           str(prog.pid))
    if rc:
        problems.append("attach: status %d: %s" % (rc, run_tests.short(err, 300)))
    return rc == 0


def detach(suite, work, prog, problems):
    rc, _, err = heaptrail(suite, work, "detach", str(prog.pid))
    if rc:
        problems.append("detach: status %d: %s" % (rc, run_tests.short(err, 300)))


def many_leaks(suite, work, prog, problems, n=30):
    ok = 0
    for i in range(n):
        if not prog.alive():
            problems.append("the program died after %d calls of heaptrail leaks" % i)
            break
        rc, _, err = heaptrail(suite, work, "leaks", "--json", str(prog.pid))
        if rc:
            problems.append("heaptrail leaks #%d: status %d: %s" % (
                i + 1, rc, run_tests.short(err, 300)))
            break
        ok += 1
    return ok


def test_leaks_run(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "requests", "leaks-run"))
    problems = []
    prog = Prog(suite, work, run=[])
    ok = many_leaks(suite, work, prog, problems)
    err = prog.finish(problems)
    return problems, ["%d of 30 calls answered" % ok, err]


def test_leaks_attach(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "requests", "leaks-attach"))
    problems = []
    prog = Prog(suite, work)
    ok = 0
    if attach(suite, work, prog, problems):
        ok = many_leaks(suite, work, prog, problems)
        if prog.alive():
            detach(suite, work, prog, problems)
    err = prog.finish(problems)
    return problems, ["%d of 30 calls answered" % ok, err]


def parallel_heap(port, problems, n=200, width=16):
    url = "http://127.0.0.1:%d/debug/pprof/heap" % port

    def one(_):
        try:
            with urllib.request.urlopen(url, timeout=120) as r:
                body = r.read()
                return r.status if body else -1
        except urllib.error.HTTPError as e:
            return "%s: %s" % (e, e.read().decode(errors="replace").strip()[:200])
        except Exception as e:  # noqa: BLE001 -- any failure counts
            return str(e)

    with concurrent.futures.ThreadPoolExecutor(width) as ex:
        answers = list(ex.map(one, range(n)))
    bad = [a for a in answers if a != 200]
    if bad:
        problems.append("%d of %d requests failed: %s" % (len(bad), n, bad[:3]))
    return n - len(bad)


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def test_http_run(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "requests", "http-run"))
    problems = []
    port = free_port()
    prog = Prog(suite, work, run=["--http", "127.0.0.1:%d" % port])
    ok = 0
    if wait_port(port):
        ok = parallel_heap(port, problems)
    else:
        problems.append("the endpoint never listened")
    err = prog.finish(problems)
    return problems, ["%d of 200 answered" % ok, err]


def test_http_attach(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "requests", "http-attach"))
    problems = []
    port = free_port()
    prog = Prog(suite, work)
    serve = subprocess.Popen([suite.heaptrail, "attach", "-o", os.path.join(work, "att"),
                              "--http", "127.0.0.1:%d" % port, str(prog.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=work)
    ok = 0
    try:
        if wait_port(port):
            ok = parallel_heap(port, problems)
        else:
            problems.append("the endpoint never listened")
    finally:
        serve.send_signal(signal.SIGTERM)
        _, serr = serve.communicate(timeout=60)
    if prog.alive():
        detach(suite, work, prog, problems)
    err = prog.finish(problems)
    return problems, ["%d of 200 answered" % ok, serr.decode("utf-8", "replace"), err]


def test_concurrent(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "requests", "concurrent"))
    problems = []
    port = free_port()
    prog = Prog(suite, work, run=["--http", "127.0.0.1:%d" % port])
    ok = 0
    if wait_port(port):
        got = []
        t = threading.Thread(target=lambda: got.append(parallel_heap(port, problems)))
        t.start()
        # at once: each waits while another holds the threads
        with concurrent.futures.ThreadPoolExecutor(LEAKS_AT_ONCE) as ex:
            ok = sum(ex.map(lambda _: many_leaks(suite, work, prog, problems, n=LEAKS_EACH),
                            range(LEAKS_AT_ONCE)))
        t.join()
    else:
        problems.append("the endpoint never listened")
    err = prog.finish(problems)
    return problems, ["%d of %d leaks calls answered" % (ok, LEAKS_EACH * LEAKS_AT_ONCE), err]


def test_attach_cycles(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "requests", "cycles"))
    problems = []
    prog = Prog(suite, work)
    done = 0
    for i in range(ATTACH_CYCLES):
        if not prog.alive():
            problems.append("the program died in cycle %d" % (i + 1))
            break
        n = len(problems)
        port = free_port()
        serve = subprocess.Popen([suite.heaptrail, "attach", "-o",
                                  os.path.join(work, "att%d" % i), "--http",
                                  "127.0.0.1:%d" % port, str(prog.pid)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=work)
        try:
            if not wait_port(port):
                problems.append("attach --http: the endpoint never listened")
            else:
                parallel_heap(port, problems, n=1, width=1)
                rc, _, err = heaptrail(suite, work, "dump", str(prog.pid))
                if rc:
                    problems.append("dump: status %d: %s" % (rc, run_tests.short(err, 300)))
        finally:
            serve.send_signal(signal.SIGTERM)
            _, serr = serve.communicate(timeout=60)
        if serve.returncode:
            problems.append("attach --http: status %d: %s" % (
                serve.returncode, run_tests.short(serr, 300)))
        if prog.alive():
            detach(suite, work, prog, problems)
        if len(problems) > n:
            problems.append("in cycle %d" % (i + 1))
            break
        done += 1
    err = prog.finish(problems)
    return problems, ["%d of %d cycles" % (done, ATTACH_CYCLES), err]


def test_detached_leaks(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "requests", "detached"))
    problems = []
    prog = Prog(suite, work)
    logs = []
    if attach(suite, work, prog, problems):
        detach(suite, work, prog, problems)
        for i in range(5):
            t = time.time()
            rc, out, err = heaptrail(suite, work, "leaks", str(prog.pid), "--timeout", "10")
            lines = run_tests.stderr_lines(err)
            logs.append(err.decode("utf-8", "replace"))
            if rc == 0 or len(lines) != 1 or b"detached" not in err or out:
                problems.append("leaks PID after detach: status %d, stdout %r, stderr %r "
                                "(want one line saying it was detached)" % (
                                    rc, run_tests.short(out), run_tests.short(err, 300)))
                break
            if time.time() - t > 5:
                problems.append("leaks PID after detach took %.1f s" % (time.time() - t))
                break
    logs.append(prog.finish(problems))
    return problems, logs


def test_moved_cwd(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "requests", "moved-cwd"))
    problems, details = [], []
    prog = os.path.join(work, "chdir_wait")
    rc, _, err = run_tests.run([suite.cc, "-g", "-O1", "-o", prog,
                                os.path.join(os.path.dirname(HERE), "progs", "chdir_wait.c")], env=os.environ)
    if rc:
        raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    agent = os.path.join(os.path.dirname(os.path.abspath(suite.heaptrail)), "libheaptrail.so")
    start = os.path.join(work, "start")
    moved = os.path.join(work, "moved")
    other = os.path.join(work, "cli")
    for d in (start, moved, other, os.path.join(start, "out"), os.path.join(start, "out2"),
              os.path.join(start, "dumps")):
        os.makedirs(d, exist_ok=True)
    for tag, extra, outdir in (
            ("output= in HEAPTRAIL_OPTIONS", {"HEAPTRAIL_OPTIONS": "sample=1,output=out,"
                                              "prefix=dumps/p"}, "out"),
            ("HEAPTRAIL_OUTPUT", {"HEAPTRAIL_OPTIONS": "sample=1",
                                  "HEAPTRAIL_OUTPUT": "out2"}, "out2")):
        env = dict(run_tests.RUN_ENV, LD_PRELOAD=agent, **extra)
        p = subprocess.Popen([prog, moved], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=start, env=env)
        try:
            r, _, _ = select.select([p.stdout], [], [], 20)
            line = p.stdout.readline() if r else b""
            if line != b"ready\n":
                raise run_tests.Failure("%s: chdir_wait did not start: %r" % (tag, line))
            rc, out, err = run_tests.run([suite.heaptrail, "leaks", "--json", "--timeout", "5",
                                          str(p.pid)], cwd=other, timeout=60)
            want = os.path.join(start, outdir, "heaptrail.%d.check-" % p.pid)
            said = [l for l in run_tests.stderr_lines(err) if "leak check written to" in l]
            if rc or b'"bytes": 4321' not in out.replace(b'"bytes":4321', b'"bytes": 4321'):
                problems.append("%s: heaptrail leaks: status %d, stdout %r, stderr %r" % (
                    tag, rc, run_tests.short(out, 200), run_tests.short(err, 300)))
            elif not said or want not in said[0]:
                problems.append("%s: the check was not read from %s: %r" % (
                    tag, os.path.join(start, outdir), said))
            details.append("%s: %s" % (tag, said))
            if os.listdir(moved):
                problems.append("%s: files in the program's new directory: %s" % (
                    tag, os.listdir(moved)))
            if tag.startswith("output="):
                port = free_port()
                s = subprocess.Popen([suite.heaptrail, "serve", "--http",
                                      "127.0.0.1:%d" % port, str(p.pid)], cwd=other,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=run_tests.RUN_ENV)
                try:
                    if not wait_port(port):
                        problems.append("serve: no endpoint")
                    else:
                        try:
                            with urllib.request.urlopen(
                                    "http://127.0.0.1:%d/debug/pprof/heap?debug=1" % port,
                                    timeout=30) as resp:
                                body = resp.read()
                            if b"heap profile:" not in body:
                                problems.append("serve: /debug/pprof/heap?debug=1 gave %r"
                                                % run_tests.short(body))
                        except Exception as e:  # an HTTP error says why in its body
                            why = e.read() if hasattr(e, "read") else str(e).encode()
                            problems.append("serve: /debug/pprof/heap: %s: %r" % (
                                e, run_tests.short(why, 300)))
                finally:
                    s.terminate()
                    _, serr = s.communicate(timeout=30)
                details.append("serve: %s" % serr.decode("utf-8", "replace"))
        finally:
            out, err = p.communicate(b"", timeout=30)
        if p.returncode != 0 or out != b"done\n":
            problems.append("%s: the program: status %d, stdout %r, stderr %r" % (
                tag, p.returncode, out, run_tests.short(err, 300)))
    return problems, details


def collect(suite):
    return [("requests:leaks-run", lambda: test_leaks_run(suite)),
            ("requests:leaks-attach", lambda: test_leaks_attach(suite)),
            ("requests:http-run", lambda: test_http_run(suite)),
            ("requests:http-attach", lambda: test_http_attach(suite)),
            ("requests:attach-cycles", lambda: test_attach_cycles(suite)),
            ("requests:concurrent", lambda: test_concurrent(suite)),
            ("requests:detached-leaks", lambda: test_detached_leaks(suite)),
            ("requests:moved-cwd", lambda: test_moved_cwd(suite))]
