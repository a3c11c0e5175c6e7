"""`heaptrail attach/dump/leaks/detach HOSTPID` on a process in mount and
PID namespaces of its own with a root of its own, as docker, podman and
Kubernetes run services (issue 28): the service is
tests/progs/attach_target.c, run by `unshare --mount --pid
--fork --mount-proc --root=ROOT` in a ROOT that holds only the program
and the libraries ldd names (no heaptrail, no libm), attached from
outside with the PID the host sees.

    attach:container  attach; `growth` (while the service runs: the
                    files its dumps name are read under /proc/PID/root)
                    names the slow leak alone as growing, at the rate the
                    program reports; `leaks HOSTPID` names it (before:
                    "?? (in /attach_target +0x...)") and `dump HOSTPID`
                    writes a dump, both into -o DIR on the host; every
                    file and record names the host's PID, never the one
                    the service sees (1); detach; a second attach (the
                    agent already in memory) and detach; the service runs
                    to its end with its output and status unchanged, no
                    descriptor is left open in it, and its root is as it
                    was (every path, size, mode and mtime)
    attach:container-http  `attach --http ADDR --for 3s HOSTPID`:
                    /debug/pprof/heap and /metrics answer while attached;
                    then `serve --http ADDR HOSTPID` beside an attach:
                    /metrics names slow_leak_site
    attach:container-kill  crash-only, across namespaces: heaptrail killed
                    (HEAPTRAIL_TEST_KILL_AT=N) before each of its first 80
                    ptrace requests and writes of an attach, then every
                    20th until one finishes, each followed by a detach, on
                    tests/progs/attach_kill.c in a root of its own:
                    it answers after every kill, is traced by no one, and
                    after a last attach and detach holds no descriptor
                    more (the memory files and socket pairs a kill left
                    are closed by the agent's next start or stop), its
                    root is unchanged, and it ends with its own check
                    passed
    attach:container-stall  heaptrail held up past the calls' park
                    (HEAPTRAIL_TEST_STALL_PARK=K: it sleeps 1.3 s once its
                    Kth call waits there) across namespaces, on
                    tests/progs/attach_kill.c in a root of its own:
                    after the memory file's memfd_create, dlopen or close
                    (K = 1, 2, 3, each on a fresh service) the attach
                    borrows a thread again, loads the agent once (one
                    memory file mapped) and works; after the pair's call
                    or the start (the agent in memory) it says in one line
                    that the call ran but its result was lost; the service
                    answers after each, is traced by no one, holds no
                    descriptor more after a detach, and ends with its own
                    check passed
    attach:container-seccomp  a service whose seccomp filter refuses
                    memfd_create, or socketpair (tests/progs/
                    attach_seccomp.c memfd|socketpair): one line naming the
                    call and the filter, exit 1, no descriptor more, the
                    service's output its own

    attach:perms    who may attach (tests/progs/attach_target.c):
                    a user's own process, by that user (this kernel has no
                    Yama: as ptrace_scope 0): attach, leaks, detach work;
                    root in a user namespace of its own (`unshare --user
                    --map-root-user`), attaching to root's process outside
                    it: one line naming the user namespace (before: "it
                    belongs to another user", which it does not); a user
                    with CAP_SYS_PTRACE alone, attaching to root's process:
                    one line naming CAP_DAC_READ_SEARCH (before: "cannot
                    open /proc/PID/mem"; /proc/PID/task/*/syscall and the
                    agent's files are root's alone), and with both
                    capabilities attach, leaks, dump and detach work
                    (/proc/PID/mem is written through process_vm_writev)

Skipped when not root, or when this machine refuses `unshare` of mount
and PID namespaces, or of a user namespace (the message says which).
"""
import os
import re
import subprocess
import time
import urllib.request

import run_tests
from test_attach import (HERE, PROG_SRC, Target, build, expect_ok, growth_rows, heaptrail,
                         new_dir, one_line_error)


def make_root(work, name, prog):
    """A root holding prog (as /NAME) and the libraries ldd names, and an
    empty /proc for the service's own."""
    root = run_tests.fresh_dir(os.path.join(work, name + "-root"))
    os.makedirs(os.path.join(root, "proc"))
    rc, out, err = run_tests.run(["ldd", prog], env=os.environ)
    if rc:
        raise run_tests.Failure("ldd %s: %s" % (prog, run_tests.short(err)))
    for lib in re.findall(r"(/\S+)", out.decode()):
        dst = root + lib
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(lib, "rb") as f, open(dst, "wb") as g:
            g.write(f.read())
        os.chmod(dst, 0o755)
    dst = os.path.join(root, name)
    with open(prog, "rb") as f, open(dst, "wb") as g:
        g.write(f.read())
    os.chmod(dst, 0o755)
    if any("libheaptrail" in l or "libm.so" in l for l in listing(root)):
        raise run_tests.Failure("the root holds more than the program needs: %s"
                                % sorted(listing(root)))
    return root


def listing(root):
    """Every path under root with its type, size, mode and mtime."""
    seen = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            seen[os.path.relpath(p, root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return seen


def unshared(root, name, args=()):
    """The command that runs /NAME in root, in mount and PID namespaces of
    its own with /proc of its own."""
    return ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--root=" + root,
            "/" + name] + list(args)


class Service(Target):
    """The program under unshare: its PID as the host sees it is the
    child of unshare's."""

    def __init__(self, root, name, args=()):
        super().__init__(None, root, argv=unshared(root, name, args))
        self.unshare_pid = self.p.pid
        with open("/proc/%d/task/%d/children" % (self.p.pid, self.p.pid)) as f:
            kids = f.read().split()
        if len(kids) != 1:
            raise run_tests.Failure("unshare has children %s" % kids)
        self.pid = int(kids[0])
        with open("/proc/%d/status" % self.pid) as f:
            nspid = re.search(r"^NSpid:\s+(.*)$", f.read(), re.M).group(1).split()
        if len(nspid) != 2 or nspid[1] == str(self.pid):
            raise run_tests.Failure("the service is not in a PID namespace of its own: "
                                    "NSpid %s" % nspid)
        self.inner = int(nspid[1])

    def maps(self):
        with open("/proc/%d/maps" % self.pid) as f:
            return f.read()

    def fds(self):
        return sorted(os.listdir("/proc/%d/fd" % self.pid), key=int)


def setup(suite, name):
    work, prog = build(suite)
    cwork = run_tests.fresh_dir(os.path.join(work, "container-" + name))
    root = make_root(cwork, "attach_target", prog)
    # the probe: a program of the root's own (the target with no stdin ends at once)
    with open(os.path.join(root, "attach_target"), "rb") as f, \
            open(os.path.join(root, "probe"), "wb") as g:
        g.write(f.read())
    os.chmod(os.path.join(root, "probe"), 0o755)
    check_probe(root, b"quit\n", 3)
    return cwork, root


def check_probe(root, stdin, want):
    """Skips, naming why, where unshare cannot run root's /probe (a copy
    of the service, ending at once on stdin) to its status want."""
    if os.geteuid() != 0:
        raise run_tests.Skip("not running as root: unshare of mount and PID namespaces")
    p = subprocess.run(unshared(root, "probe"), input=stdin, capture_output=True, timeout=30)
    os.unlink(os.path.join(root, "probe"))
    if p.returncode != want:
        raise run_tests.Skip("unshare of mount and PID namespaces with a root of its own "
                             "is not permitted here: status %d, %s"
                             % (p.returncode, run_tests.short(p.stderr, 200)))


def names_pid(problems, out, pid, inner):
    """Every file in out is heaptrail.PID.*, and records the host's PID."""
    for n in os.listdir(out):
        if not n.startswith("heaptrail.%d." % pid):
            problems.append("%s in %s does not name the host's PID %d" % (n, out, pid))
        with open(os.path.join(out, n), "rb") as f:
            text = f.read().decode("utf-8", "replace")
        for m in re.finditer(r"(?:^pid |pid=|^pid: ?)(\d+)", text, re.M):
            if int(m.group(1)) != pid:
                problems.append("%s records pid %s, want the host's %d (the service sees "
                                "itself as %d)" % (n, m.group(1), pid, inner))


def test_container(suite):
    cwork, root = setup(suite, "growth")
    out = new_dir(os.path.join(cwork, "out"))
    out2 = new_dir(os.path.join(cwork, "out2"))
    before = listing(root)
    problems = []
    t = Service(root, "attach_target")
    try:
        time.sleep(0.5)  # it has run a while: the cache is full, the epoll made
        fds_before = t.fds()
        rc, _, err = heaptrail(suite, "attach", "--sample", "2k", "--every", "200ms",
                               "-o", out, str(t.pid))
        if not expect_ok(problems, "attach", rc, err):
            return problems, []
        t0 = time.monotonic()
        c0 = int(t.ask("count").split()[1])
        if "libheaptrail.so" not in t.maps():
            problems.append("no agent in the service's memory map after the attach")
        time.sleep(1.5)
        rc, lout, err = heaptrail(suite, "leaks", str(t.pid))
        if expect_ok(problems, "leaks HOSTPID", rc, err):
            text = lout.decode() + err.decode()
            if "process %d" % t.pid not in text or "process %d:" % t.inner in text:
                problems.append("leaks does not name the host's PID %d:\n%s" % (t.pid, text))
            if "slow_leak_site (" not in text:
                problems.append("leaks does not name slow_leak_site, where the service "
                                "leaks:\n%s" % text)
            if not any(n.endswith(".leaks") for n in os.listdir(out)):
                problems.append("leaks HOSTPID wrote no .leaks file into %s: %s"
                                % (out, os.listdir(out)))
        rc, _, err = heaptrail(suite, "dump", str(t.pid))
        if expect_ok(problems, "dump HOSTPID", rc, err) and \
                not any(n.endswith(".api.heap") for n in os.listdir(out)):
            problems.append("dump HOSTPID wrote no .api.heap into %s: %s"
                            % (out, os.listdir(out)))
        time.sleep(1.5)
        c1 = int(t.ask("count").split()[1])
        t1 = time.monotonic()
        rc, _, err = heaptrail(suite, "detach", str(t.pid))
        expect_ok(problems, "detach", rc, err)
        rate = 512.0 * (c1 - c0) / (t1 - t0)
        # still running: the files it names are read under its root
        rc, gout, err = heaptrail(suite, "growth", "--bytes", out)
        if expect_ok(problems, "growth", rc, err):
            rows = growth_rows(gout.decode())
            growing = [r for r in rows if r[0] != "-" and r[3] != "(all)"]
            if [r[3] for r in growing] != ["slow_leak_site"]:
                problems.append("growing sites %s, want only slow_leak_site:\n%s"
                                % ([r[3] for r in growing], gout.decode()))
            elif not 0.6 * rate <= growing[0][2] <= 1.5 * rate:
                problems.append("slow_leak_site grows at %d B/s, the program leaked %.0f B/s"
                                % (growing[0][2], rate))
        names_pid(problems, out, t.pid, t.inner)
        if not os.path.exists(os.path.join(out, "heaptrail.%d.attach" % t.pid)):
            problems.append("no heaptrail.%d.attach in %s: %s" % (t.pid, out, os.listdir(out)))
        # again: the agent is in its memory already
        rc, _, err = heaptrail(suite, "attach", "-o", out2, str(t.pid))
        if expect_ok(problems, "second attach", rc, err):
            rc, _, err = heaptrail(suite, "dump", str(t.pid))
            expect_ok(problems, "second dump", rc, err)
            rc, _, err = heaptrail(suite, "detach", str(t.pid))
            expect_ok(problems, "second detach", rc, err)
            names = os.listdir(out2)
            if not any(n.endswith(".final.heap") for n in names):
                problems.append("second attach: no final dump in %s" % names)
            names_pid(problems, out2, t.pid, t.inner)
        fds_after = t.fds()
        if fds_after != fds_before:
            problems.append("descriptors of the service before the attach %s, after the "
                            "detach %s" % (fds_before, fds_after))
        rc, err = t.finish()
        if rc != 3:
            problems.append("service exit status %d, want 3 (stderr: %s)" % (rc, err[:300]))
        want = ["ready", "ok %d" % c0, "ok %d" % c1, "done held=0 cached=256"]
        if t.out != want:
            problems.append("service output %s, want %s" % (t.out, want))
        if err:
            problems.append("service wrote on stderr: %s" % err[:300])
        after = listing(root)
        if after != before:
            changed = sorted(set(after.items()) ^ set(before.items()))
            problems.append("the service's root changed: %s" % changed[:10])
    finally:
        t.kill()
    return problems, []


def test_http(suite):
    cwork, root = setup(suite, "http")
    out = new_dir(os.path.join(cwork, "out"))
    problems = []
    t = Service(root, "attach_target")
    import test_live
    port = test_live.free_port()
    att = None
    try:
        errf = open(os.path.join(cwork, "stderr"), "wb")
        att = subprocess.Popen([suite.heaptrail, "attach", "--sample", "2k", "-o", out,
                                "--http", "127.0.0.1:%d" % port, "--for", "3s", str(t.pid)],
                               stderr=errf, env=run_tests.RUN_ENV)
        base = "http://127.0.0.1:%d" % port
        for _ in range(100):
            with open(os.path.join(cwork, "stderr"), "rb") as f:
                if b"live endpoint" in f.read():
                    break
            if att.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        for path, want in (("/debug/pprof/heap?debug=1", "heap profile:"),
                           ("/metrics", "heaptrail_")):
            try:
                st, body, _ = test_live.http(base + path)
            except OSError as e:
                problems.append("%s while attached: %s" % (path, e))
                continue
            if st != 200 or want not in body.decode("utf-8", "replace"):
                problems.append("%s while attached: %d %r" % (path, st, body[:200]))
        rc = att.wait(timeout=60)
        errf.close()
        if rc != 0:
            with open(os.path.join(cwork, "stderr"), "rb") as f:
                problems.append("attach --http --for: status %d: %s"
                                % (rc, f.read().decode()[:300]))
        # `serve HOSTPID` beside an attach: its sites named from the
        # binaries under the service's root
        out2 = new_dir(os.path.join(cwork, "out2"))
        rc, _, err = heaptrail(suite, "attach", "--sample", "2k", "-o", out2, str(t.pid))
        if expect_ok(problems, "attach for serve", rc, err):
            port = test_live.free_port()
            att = subprocess.Popen([suite.heaptrail, "serve", "--http", "127.0.0.1:%d" % port,
                                    str(t.pid)], stderr=subprocess.DEVNULL,
                                   env=run_tests.RUN_ENV)
            text = ""
            for _ in range(50):
                time.sleep(0.2)
                try:
                    st, body, _ = test_live.http("http://127.0.0.1:%d/metrics" % port)
                    text = body.decode("utf-8", "replace")
                    if 'site="slow_leak_site"' in text:
                        break
                except OSError:
                    pass
            if 'site="slow_leak_site"' not in text:
                problems.append("serve HOSTPID: /metrics does not name slow_leak_site: %r"
                                % text[-300:])
            att.kill()
            att.wait()
            rc, _, err = heaptrail(suite, "detach", str(t.pid))
            expect_ok(problems, "detach after serve", rc, err)
        rc, err = t.finish()
        if rc != 3 or t.out != ["ready", "done held=0 cached=256"]:
            problems.append("service: status %d, output %s, stderr %s" % (rc, t.out, err[:200]))
    finally:
        if att is not None and att.poll() is None:
            att.kill()
        t.kill()
    return problems, []


def test_seccomp(suite):
    work, _ = build(suite)
    sec = os.path.join(work, "attach_seccomp")
    rc, _, err = run_tests.run([suite.cc, "-O1", "-o", sec,
                                os.path.join(os.path.dirname(HERE), "progs", "attach_seccomp.c")], env=os.environ)
    if rc:
        raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    cwork = run_tests.fresh_dir(os.path.join(work, "container-seccomp"))
    root = make_root(cwork, "attach_seccomp", sec)
    with open(os.path.join(root, "attach_seccomp"), "rb") as f, \
            open(os.path.join(root, "probe"), "wb") as g:
        g.write(f.read())
    os.chmod(os.path.join(root, "probe"), 0o755)
    check_probe(root, b"", 0)
    before = listing(root)
    problems = []
    for call, want in (("memfd", r"could not make a memory file for the agent \(memfd_create"),
                       ("socketpair", r"could not make the socket pair that takes the output "
                                      r"directory \(socketpair: Operation not permitted")):
        t = Service(root, "attach_seccomp", [call])
        try:
            fds = t.fds()
            rc, _, err = heaptrail(suite, "attach", "-o", os.path.join(cwork, "out"),
                                   str(t.pid))
            one_line_error(problems, "seccomp refusing " + call, rc, err,
                           r"process %d %s.*\); its seccomp filter may refuse it$"
                           % (t.pid, want))
            if call == "memfd" and "libheaptrail" in t.maps():
                problems.append("the agent got into the seccomp-filtered service")
            if t.fds() != fds:
                problems.append("%s refused: descriptors %s, before %s" % (call, t.fds(), fds))
            rest, err = t.p.communicate(b"", timeout=30)
            if t.p.returncode != 0 or rest != b"done\n":
                problems.append("seccomp service (%s): exit %d, output %r"
                                % (call, t.p.returncode, rest))
            if listing(root) != before:
                problems.append("the service's root changed")
        finally:
            t.kill()
    return problems, []


def test_kill(suite):
    work, _ = build(suite)
    kill_prog = os.path.join(work, "attach_kill")
    rc, _, err = run_tests.run([suite.cc, "-g", "-O1", "-pthread", "-o", kill_prog,
                                os.path.join(os.path.dirname(HERE), "progs", "attach_kill.c")], env=os.environ)
    if rc:
        raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    cwork = run_tests.fresh_dir(os.path.join(work, "container-kill"))
    root = make_root(cwork, "attach_kill", kill_prog)
    with open(os.path.join(root, "attach_kill"), "rb") as f, \
            open(os.path.join(root, "probe"), "wb") as g:
        g.write(f.read())
    os.chmod(os.path.join(root, "probe"), 0o755)
    check_probe(root, b"quit\n", 0)
    before = listing(root)
    problems, details = [], []
    t = Service(root, "attach_kill")
    try:
        time.sleep(0.3)
        fds0 = t.fds()
        n, done = 1, False
        while not done and n < 3000:
            out = new_dir(os.path.join(cwork, "o%d" % n))
            env = dict(os.environ, HEAPTRAIL_TEST_KILL_AT=str(n))
            rc, _, err = run_tests.run([suite.heaptrail, "attach", "-o", out, str(t.pid)],
                                       env=env)
            done = rc == 0
            for _ in range(250):
                with open("/proc/%d/status" % t.pid) as f:
                    if "\nTracerPid:\t0\n" in f.read():
                        break
                time.sleep(0.02)
            else:
                problems.append("still traced after a kill at step %d" % n)
                break
            got = t.ask("ping")
            if not got.startswith("ok "):
                problems.append("after a kill at step %d it answered %r" % (n, got))
                break
            time.sleep(0.05)  # a call heaptrail left runs to its end
            heaptrail(suite, "detach", str(t.pid))
            n = n + 1 if n < 80 else n + 20
        if not done:
            problems.append("no attach finished within %d steps" % n)
        details.append("attach finished at step %d" % n)
        out = new_dir(os.path.join(cwork, "last"))
        rc, _, err = heaptrail(suite, "attach", "-o", out, str(t.pid))
        if expect_ok(problems, "attach after the kills", rc, err):
            rc, _, err = heaptrail(suite, "detach", str(t.pid))
            expect_ok(problems, "detach after the kills", rc, err)
        left = [(f, os.readlink("/proc/%d/fd/%s" % (t.pid, f))) for f in t.fds()
                if f not in fds0]
        if left:
            problems.append("descriptors left after the last detach: %s" % left)
        rc, err = t.finish()
        if rc != 0 or t.out[-1:] != ["done ok"]:
            problems.append("status %d, output %s, stderr %s" % (rc, t.out[-3:], err[:300]))
        if listing(root) != before:
            problems.append("the service's root changed")
    finally:
        t.kill()
    return problems, details


def test_stall(suite):
    work, _ = build(suite)
    kill_prog = os.path.join(work, "attach_kill")
    rc, _, err = run_tests.run([suite.cc, "-g", "-O1", "-pthread", "-o", kill_prog,
                                os.path.join(os.path.dirname(HERE), "progs", "attach_kill.c")], env=os.environ)
    if rc:
        raise run_tests.Failure("build failed: %s" % run_tests.short(err))
    cwork = run_tests.fresh_dir(os.path.join(work, "container-stall"))
    root = make_root(cwork, "attach_kill", kill_prog)
    problems, details = [], []

    def stalled(t, k, label):
        out = new_dir(os.path.join(cwork, "%s-%d" % (label, k)))
        env = dict(os.environ, HEAPTRAIL_TEST_STALL_PARK=str(k))
        rc, _, err = run_tests.run([suite.heaptrail, "attach", "-o", out, str(t.pid)], env=env)
        with open("/proc/%d/status" % t.pid) as f:
            if "\nTracerPid:\t0\n" not in f.read():
                problems.append("%s: still traced" % label)
        got = t.ask("ping")
        if not got.startswith("ok "):
            problems.append("%s: it answered %r" % (label, got))
        return rc, err

    def finish(t, fds0, label):
        left = [(f, os.readlink("/proc/%d/fd/%s" % (t.pid, f))) for f in t.fds()
                if f not in fds0]
        if left:
            problems.append("%s: descriptors left after the detach: %s" % (label, left))
        rc, err = t.finish()
        if rc != 0 or t.out[-1:] != ["done ok"]:
            problems.append("%s: status %d, output %s, stderr %s" % (label, rc, t.out[-3:],
                                                                   err[:300]))

    # held up after the load's memfd_create, dlopen, close: the attach
    # borrows a thread again and loads the agent once
    for k, call in ((1, "memfd_create"), (2, "dlopen"), (3, "close")):
        label = "held up after %s" % call
        t = Service(root, "attach_kill")
        try:
            time.sleep(0.3)
            fds0 = t.fds()
            rc, err = stalled(t, k, label)
            expect_ok(problems, label, rc, err)
            copies = set(re.findall(r"/memfd:heaptrail-[0-9a-f]+/libheaptrail\.so", t.maps()))
            if len(copies) != 1:
                problems.append("%s: the agent mapped from %d memory files: %s"
                                % (label, len(copies), sorted(copies)))
            rc, _, err = heaptrail(suite, "detach", str(t.pid))
            expect_ok(problems, "%s: detach" % label, rc, err)
            finish(t, fds0, label)
        finally:
            t.kill()
    details.append("held up after memfd_create, dlopen, close: attach works")
    # the agent in memory: held up after the pair's call, or the start
    t = Service(root, "attach_kill")
    try:
        time.sleep(0.3)
        fds0 = t.fds()
        rc, _, err = heaptrail(suite, "attach", "-o", new_dir(os.path.join(cwork, "first")),
                               str(t.pid))
        if expect_ok(problems, "first attach", rc, err):
            rc, _, err = heaptrail(suite, "detach", str(t.pid))
            expect_ok(problems, "first detach", rc, err)
        for k, entry in ((1, "heaptrail_attach_pair"), (2, "heaptrail_attach_start")):
            label = "held up after %s" % entry
            rc, err = stalled(t, k, label)
            one_line_error(problems, label, rc, err,
                           r"%s ran in process %d, but its result was lost" % (entry, t.pid))
            rc, _, err = heaptrail(suite, "detach", str(t.pid))
            if rc and b"is not attached" not in err:
                problems.append("%s: the detach after it: exit %d: %s" % (label, rc, err[:300]))
        rc, _, err = heaptrail(suite, "attach", "-o", new_dir(os.path.join(cwork, "last")),
                               str(t.pid))
        if expect_ok(problems, "attach after the held-up ones", rc, err):
            rc, _, err = heaptrail(suite, "detach", str(t.pid))
            expect_ok(problems, "detach after the held-up ones", rc, err)
        finish(t, fds0, "the agent in memory")
    finally:
        t.kill()
    details.append("held up after the pair's call, the start: one line each")
    return problems, details


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_perms(suite):
    if os.geteuid() != 0:
        raise run_tests.Skip("not running as root: users and capabilities are set with setpriv")
    rc, _, err = run_tests.run(["unshare", "--user", "--map-root-user", "true"], env=os.environ)
    if rc:
        raise run_tests.Skip("unshare of a user namespace is not permitted here: %s"
                             % run_tests.short(err, 200))
    work, prog = build(suite)
    pwork = run_tests.fresh_dir(os.path.join(work, "perms"))
    os.chmod(pwork, 0o777)
    problems = []
    # a user's own process, by that user
    t = Target(prog, pwork, argv=NOBODY + [prog])
    try:
        time.sleep(0.3)
        out = os.path.join(pwork, "own")
        rc, _, err = run_tests.run(NOBODY + [suite.heaptrail, "attach", "-o", out,
                                             str(t.p.pid)], env=os.environ)
        if expect_ok(problems, "nobody attaching to its own process", rc, err):
            rc, _, err = run_tests.run(NOBODY + [suite.heaptrail, "leaks", str(t.p.pid)],
                                       env=os.environ)
            expect_ok(problems, "nobody: leaks of its own process", rc, err)
            rc, _, err = run_tests.run(NOBODY + [suite.heaptrail, "detach", str(t.p.pid)],
                                       env=os.environ)
            expect_ok(problems, "nobody: detach of its own process", rc, err)
        rc, err = t.finish()
        if rc != 3 or t.out != ["ready", "done held=0 cached=256"]:
            problems.append("nobody's process: status %d, output %s" % (rc, t.out))
    finally:
        t.kill()
    # root's process, from a user namespace and with CAP_SYS_PTRACE alone
    t = Target(prog, pwork)
    try:
        rc, _, err = run_tests.run(["unshare", "--user", "--map-root-user", suite.heaptrail,
                                    "attach", "-o", os.path.join(pwork, "userns"),
                                    str(t.p.pid)], env=os.environ)
        one_line_error(problems, "root of a user namespace", rc, err,
                       r"not permitted to trace process %d: heaptrail runs in a user "
                       r"namespace \(uid_map 0 0 1\).*CAP_SYS_PTRACE" % t.p.pid)
        ptrace_only = NOBODY + ["--inh-caps=+sys_ptrace", "--ambient-caps=+sys_ptrace"]
        rc, _, err = run_tests.run(ptrace_only + [suite.heaptrail, "attach", "-o",
                                                  os.path.join(pwork, "cap1"), str(t.p.pid)],
                                   env=os.environ)
        one_line_error(problems, "CAP_SYS_PTRACE alone", rc, err,
                       r"cannot read /proc/%d/syscall: .*needs CAP_DAC_READ_SEARCH besides "
                       r"CAP_SYS_PTRACE" % t.p.pid)
        if "libheaptrail" in t.maps():
            problems.append("a refused attach left the agent in root's process")
        both = NOBODY + ["--inh-caps=+sys_ptrace,+dac_read_search",
                         "--ambient-caps=+sys_ptrace,+dac_read_search"]
        out = os.path.join(pwork, "cap2")
        rc, _, err = run_tests.run(both + [suite.heaptrail, "attach", "-o", out, str(t.p.pid)],
                                   env=os.environ)
        if expect_ok(problems, "CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH: attach", rc, err):
            for cmd in ("leaks", "dump", "detach"):
                rc, _, err = run_tests.run(both + [suite.heaptrail, cmd, str(t.p.pid)],
                                           env=os.environ)
                expect_ok(problems, "CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH: " + cmd, rc, err)
            names = os.listdir(out)
            if not any(n.endswith(".api.heap") for n in names) or \
                    not any(n.endswith(".leaks") for n in names):
                problems.append("with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH: files %s" % names)
        rc, err = t.finish()
        if rc != 3 or t.out != ["ready", "done held=0 cached=256"]:
            problems.append("root's process: status %d, output %s" % (rc, t.out))
    finally:
        t.kill()
    return problems, []


def collect(suite):
    return [("attach:container", lambda: test_container(suite)),
            ("attach:container-http", lambda: test_http(suite)),
            ("attach:container-kill", lambda: test_kill(suite)),
            ("attach:container-stall", lambda: test_stall(suite)),
            ("attach:container-seccomp", lambda: test_seccomp(suite)),
            ("attach:perms", lambda: test_perms(suite))]
