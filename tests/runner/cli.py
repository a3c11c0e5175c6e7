"""The report: and cli: tests: the CLI's commands, errors, and the
"never hurt the host" cases (see tests/run_tests.py)."""

from .harness import *  # noqa: F401,F403
from .specs import *  # noqa: F401,F403
from .e2e import *  # noqa: F401,F403

# The CLI's "never hurt the host" tests (cli:NAME, Suite.host_NAME).
HOST_TESTS = ("forward-signals", "run-bad-values", "outdir-owned",
              "bad-leak-file", "missing-report", "leaks-signal-rules",
              "leaks-refuses", "leaks-after-reset", "own-handler",
              "hostile-inputs")


class Cli:
    """Suite's report: and cli: tests."""

    def test_report(self, spec, want_func):
        problems, details = [], []
        rc, _, err, outdir, jpath = self.heaptrail_run(spec, "fp", ".report")
        if rc != self.bare(spec, "fp")[0]:
            problems.append("run: status %d" % rc)
        rc, out, err2 = run([self.heaptrail, "report", outdir])
        text = out.decode("utf-8", "replace")
        details.append("report:\n" + short(text, 4000))
        if rc != 0:
            problems.append("report: status %d: %s" % (rc, short(err2)))
        if "bytes in" not in text:
            problems.append("report: no 'bytes in' in the text")
        if want_func not in text:
            problems.append("report: %s not named" % want_func)
        rc, out, err2 = run([self.heaptrail, "report", "--json", outdir])
        if rc != 0:
            problems.append("report --json: status %d: %s" % (rc,
                                                              short(err2)))
        else:
            try:
                again = wrap(json.loads(out))
            except ValueError as e:
                raise Failure("report --json: not JSON: %s" % e)
            if again != load_json_objects(jpath):
                problems.append("report --json differs from run --json")
        return problems, details

    def test_cli(self, name):
        """The CLI's own behaviour: errors, passthrough, exit codes."""
        if not os.path.exists(self.heaptrail):
            raise Failure("%s not found (build it with make)" %
                          self.heaptrail)
        ht = self.heaptrail
        work = fresh_dir(os.path.join(self.e2e, "cli", name))
        out = os.path.join(work, "out")
        problems = []

        def one_line_error(rc, err, mention, what):
            lines = stderr_lines(err)
            if rc == 0:
                problems.append("%s: exit status 0" % what)
            if len(lines) != 1:
                problems.append("%s: %d stderr lines, expected 1: %r" %
                                (what, len(lines), short(err)))
            elif mention.lower() not in lines[0].lower():
                problems.append("%s: error does not mention %r: %r" %
                                (what, mention, lines[0]))

        def status(cmd, want, stdin=b"", want_out=None, cwd=work):
            rc, o, e = run(cmd, stdin, cwd=cwd)
            if rc != want:
                problems.append("%s: status %d, expected %d (%s)" % (
                    " ".join(os.path.basename(c) for c in cmd[1:]), rc,
                    want, short(e)))
            if want_out is not None and o != want_out:
                problems.append("%s: stdout %r, expected %r" % (
                    cmd[-1], short(o), short(want_out)))

        leak = self.specs["leak_one"]
        clean = self.specs["noleak_libc"]
        if name == "nonexistent":
            rc, o, e = run([ht, "run", "-o", out, "--", "/nonexistent"],
                           cwd=work)
            one_line_error(rc, e, "/nonexistent", "run -- /nonexistent")
        elif name == "passthrough":
            # No -o: the default output directory goes in the cwd.
            status([ht, "run", "--", "/bin/true"], 0, want_out=b"")
            status([ht, "run", "-o", out + "1", "--", "/bin/false"], 1)
            status([ht, "run", "-o", out + "2", "--", "/bin/sh", "-c",
                    "read x; echo got $x; exit 5"], 5, b"hello\n",
                   b"got hello\n")
        elif name == "forbidden-outdir":
            prog = self.build_prog(leak, "fp")
            rc, o, e = run([ht, "run", "-o", "/proc/forbidden", "--", prog],
                           cwd=work)
            one_line_error(rc, e, "/proc/forbidden", "run -o /proc/forbidden")
            if b"leaked one block" in o:
                problems.append("the program ran although the output "
                                "directory cannot be made")
        elif name == "error-exitcode":
            status([ht, "run", "-o", out + "1", "--error-exitcode=42", "--",
                    self.build_prog(leak, "fp")], 42)
            status([ht, "run", "-o", out + "2", "--error-exitcode=42", "--",
                    self.build_prog(self.specs["exit_status"], "fp")], 42)
            status([ht, "run", "-o", out + "3", "--error-exitcode=42", "--",
                    self.build_prog(clean, "fp")], 0)
            status([ht, "run", "-o", out + "4", "--error-exitcode=42", "--",
                    self.build_prog(clean, "fp"), "5"], 5)
        elif name == "static":
            prog = self.build_prog(self.specs["static_leak"], "static")
            rc, o, e = run([ht, "run", "-o", out, "--", prog], cwd=work)
            one_line_error(rc, e, "static", "run -- static binary")
            if b"static program ran" in o:
                problems.append("the static program ran untracked")
        elif name == "signal-status":
            sig = self.specs["signal_exit"]
            bare_rc, bare_out = self.bare(sig, "fp")
            if bare_rc != -15:
                problems.append("bare run: status %d, expected SIGTERM" %
                                bare_rc)
            rc, o, e = run([ht, "run", "-o", out, "--",
                            self.binary(sig, "fp")], cwd=work)
            if rc != bare_rc:
                problems.append("status %d, bare run %d (a wrapper must die "
                                "of the same signal)" % (rc, bare_rc))
            if o != bare_out:
                problems.append("stdout differs from the bare run: " +
                                first_difference(o, bare_out))
            # Killed by a fault, with the default disposition: the agent
            # writes the report first, and the file says how it ended.
            segv = self.build_prog(self.specs["killed_segv"], "fp")
            rc, o, e = run([ht, "run", "-o", out + "2", "--", segv], cwd=work)
            if rc != -11:
                problems.append("killed_segv: status %d, expected SIGSEGV" % rc)
            rc, o, e = run([ht, "report", out + "2"], cwd=work)
            if rc != 0 or b"killed by signal 11" not in o + e:
                problems.append("report of killed_segv: status %d, no "
                                "'killed by signal 11': %r" % (rc, short(o + e)))
        elif name == "no-follow-children":
            # A forked child reports by default, and not with the option.
            prog = self.build_prog(self.specs["fork_leak"], "fp")
            for opt, want in (([], 2), (["--no-follow-children"], 1)):
                jpath = os.path.join(work, "follow%d.json" % len(opt))
                rc, o, e = run([ht, "run", "-o", out + str(len(opt)), "--json",
                                jpath] + opt + ["--", prog], cwd=work)
                got = len(load_json_objects(jpath)) if os.path.exists(jpath) \
                    else 0
                if got != want:
                    problems.append("%s: %d process reports, expected %d" % (
                        " ".join(opt) or "default", got, want))
        elif name == "same-as-bare":
            # Allocator edge cases (failures, errno, odd alignments, the
            # new_handler): the program prints what each call returned,
            # which must not change under heaptrail, exact or sampling;
            # its "expect in use" line, from what it kept, is what the
            # exact report must count.
            for pname in SAME_AS_BARE:
                spec = self.specs[pname]
                bare_rc, bare_out = self.bare(spec, "fp")
                m = re.search(rb"expect in use: (\d+) bytes in (\d+) blocks",
                              bare_out)
                if not m:
                    problems.append("%s: no 'expect in use' line" % pname)
                    continue
                want = (int(m.group(1)), int(m.group(2)))
                for opts in ([], ["--sample", "4096"]):
                    tag = "%s %s" % (pname, " ".join(opts) or "exact")
                    jpath = os.path.join(work, "%s%d.json" % (pname, len(opts)))
                    rc, o, e = run([ht, "run", "-o", os.path.join(
                        work, "%s%d" % (pname, len(opts))), "--json", jpath]
                        + opts + ["--", self.binary(spec, "fp")], cwd=work)
                    if rc != bare_rc:
                        problems.append("%s: status %d, bare %d (%s)" % (
                            tag, rc, bare_rc, short(e)))
                    if o != bare_out:
                        problems.append("%s: stdout differs from the bare "
                                        "run: %s" % (tag, first_difference(
                                            o, bare_out)))
                    if opts:
                        continue
                    objs = load_json_objects(jpath) \
                        if os.path.exists(jpath) else []
                    t = objs[0].get("totals", {}) if objs else {}
                    got = (t.get("in_use_bytes"), t.get("in_use_blocks"))
                    if got != want:
                        problems.append("%s: in use %s bytes in %s blocks, "
                                        "the program kept %d in %d" % (
                                            (tag,) + got + want))
        elif name == "fault-signal":
            # A fault or an uncatchable signal is refused as a dump, check
            # or stop signal, by the CLI and by the agent; the program
            # dies of its fault as bare, instead of dumping in a loop.
            spec = self.specs["fault_segv"]
            bare_rc, bare_out = self.bare(spec, "fp")
            if bare_rc != -11:
                problems.append("bare run: status %d, expected SIGSEGV" %
                                bare_rc)
            rc, o, e = run([ht, "run", "-o", out, "--signal", "11", "--",
                            self.binary(spec, "fp")], cwd=work)
            one_line_error(rc, e, "signal", "run --signal 11")
            for opt in ("signal=11", "signal=SIGSEGV", "stop_signal:SIGBUS",
                        "leak_check_signal=11"):
                env = dict(os.environ, LD_PRELOAD=self.agent(),
                           HEAPTRAIL_OUTPUT=work,
                           HEAPTRAIL_OPTIONS="sample=1," + opt)
                try:
                    r = subprocess.run([self.binary(spec, "fp")], env=env,
                                       cwd=work, capture_output=True,
                                       timeout=20)
                    rc, o, e = r.returncode, r.stdout, r.stderr
                except subprocess.TimeoutExpired:
                    problems.append("%s: still running after 20 s" % opt)
                    continue
                if rc != bare_rc or o != bare_out:
                    problems.append("%s: status %d, bare %d" % (
                        opt, rc, bare_rc))
                if b"ignoring option '%s'" % opt.encode() not in e:
                    problems.append("%s: not refused on stderr: %s" % (
                        opt, short(e)))
        elif name == "cancel-in-dump":
            # a pthread_cancel pending while the agent dumps on that
            # thread acts after the dump, not inside it
            spec = self.specs["cancel_in_dump"]
            rc, o, e = run([ht, "run", "-o", out, "--signal", "USR1",
                            "--final", "--", self.build_prog(spec, "fp")],
                           cwd=work)
            if rc != 0 or o != b"thread cancelled\ndone\n":
                problems.append("status %d, stdout %r" % (rc, short(o)))
            names = os.listdir(out) if os.path.isdir(out) else []
            sig = [n for n in names if n.endswith(".signal.heap")]
            final = [n for n in names if n.endswith(".final.heap")]
            if len(sig) != 2 or len(final) != 1:
                problems.append("%d signal dumps and %d final, expected 2 "
                                "and 1: %s" % (len(sig), len(final),
                                               sorted(names)))
        elif name == "other-allocator":
            problems += self.other_allocator(work)
        elif name == "leaks-pid":
            problems += self.leaks_pid(work, out)
        elif name == "stop-transparent":
            # Leak checks stop the other threads while they sleep, poll,
            # read, wait on a futex...: each call must return what it
            # returns bare, neither early nor late; with ptrace (the
            # default), with the signal fallback, and under strace -f
            # (ptrace taken: the fallback again).
            spec = self.specs["stop_blocking_calls"]
            prog = self.build_prog(spec, "fp")
            bare_rc, bare_out = self.bare(spec, "fp")
            want = sorted(bare_out.decode().split("\n"))
            if bare_rc != 0:
                problems.append("bare run: status %d, output %r" %
                                (bare_rc, short(bare_out)))
            runs = [("ptrace", [], {}),
                    ("signal", [], {"HEAPTRAIL_OPTIONS": "stop_ptrace=0"})]
            # (strace comes with scripts/install-deps --test: its absence
            # is a failure, not a quiet skip)
            if not shutil.which("strace"):
                problems.append("strace is not installed "
                                "(scripts/install-deps --test)")
            else:
                runs.append(("strace", ["strace", "-f", "-o", os.devnull],
                             {}))
            # The fallback's signal can still hit a thread in the instant
            # it wakes from its call (rare): up to three tries there.
            for i, (what, wrap_cmd, extra) in enumerate(runs):
                env = dict(RUN_ENV, **extra)
                for attempt in range(1 if what == "ptrace" else 3):
                    rc, o, e = run(wrap_cmd + [ht, "run", "-o", "%s%d-%d" % (
                        out, i, attempt), "--", prog], cwd=work, env=env)
                    got = sorted(o.decode().split("\n"))
                    if rc == bare_rc and got == want:
                        break
                if rc != bare_rc or got != want:
                    problems.append("%s: status %d, stdout %r; bare: %d, %r "
                                    "(%s)" % (what, rc, short(o), bare_rc,
                                              short(bare_out), e.decode(errors="replace")[-600:]))
                if what == "ptrace" and b"blocks the stop signal" in e:
                    problems.append("ptrace: a thread was not stopped: %s" %
                                    short(e, 400))
            # Threads still allocating at exit: "in use at exit" is what
            # the summary's kinds add up to (one snapshot for both).
            bprog = self.build_prog(self.specs["stop_busy_exit"], "fp")
            for i, opts in enumerate(("", "leak_kinds=0")):
                jpath = os.path.join(work, "busy%d.json" % i)
                env = dict(RUN_ENV, HEAPTRAIL_OPTIONS=opts)
                rc, o, e = run([ht, "run", "-o", "%sb%d" % (out, i), "--json",
                                jpath, "--", bprog], cwd=work, env=env)
                objs = load_json_objects(jpath) if os.path.exists(jpath) \
                    else []
                if rc != 0 or len(objs) != 1:
                    problems.append("busy exit (%s): status %d, %d reports" %
                                    (opts or "classified", rc, len(objs)))
                    continue
                tot = objs[0]["totals"]
                summ = objs[0]["summary"]
                kinds = [k for k in summ if k != "suppressed"]
                got = [sum(summ[k]["bytes"] for k in kinds) +
                       summ["suppressed"]["bytes"],
                       sum(summ[k]["blocks"] for k in kinds) +
                       summ["suppressed"]["blocks"]]
                if got != [tot["in_use_bytes"], tot["in_use_blocks"]]:
                    problems.append("busy exit (%s): in use at exit %d/%d, "
                                    "the summary adds up to %d/%d" % (
                                        opts or "classified",
                                        tot["in_use_bytes"],
                                        tot["in_use_blocks"], got[0], got[1]))
            # Children forked while a thread walks the loaded objects exit
            # (none blocks on the walk's lock) and each writes its report.
            fspec = self.specs["stop_fork_threads"]
            fprog = self.build_prog(fspec, "fp")
            bare_rc, bare_out = self.bare(fspec, "fp")
            jpath = os.path.join(work, "fork.json")
            rc, o, e = run([ht, "run", "-o", out + "f", "--json", jpath, "--",
                            fprog], cwd=work)
            nrep = len(load_json_objects(jpath)) if os.path.exists(jpath) \
                else 0
            if bare_out != b"30 of 30 children exited\n" or o != bare_out \
                    or rc != bare_rc or nrep != 31:
                problems.append("fork from threads: status %d, stdout %r, %d "
                                "reports; bare: %d, %r; 31 reports expected"
                                % (rc, short(o), nrep, bare_rc,
                                   short(bare_out)))
            # The process ends in the middle of a stop: nothing lingers.
            eprog = self.build_prog(self.specs["stop_exit_two"], "fp")
            for i in range(6):
                rc, o, e = run([ht, "run", "-o", "%se%d" % (out, i), "--",
                                eprog], cwd=work, timeout=20)
                if rc != 6:
                    problems.append("two threads exit: status %d, expected "
                                    "6 (%s)" % (rc, short(e, 300)))
                    break
            # A zombie main thread (pthread_exit) is skipped, in both ways.
            zprog = self.build_prog(self.specs["stop_main_exited"], "fp")
            for i, opts in enumerate(("", "stop_ptrace=0")):
                env = dict(RUN_ENV, HEAPTRAIL_OPTIONS=opts)
                rc, o, e = run([ht, "run", "-o", "%sz%d" % (out, i), "--",
                                zprog], cwd=work, env=env)
                if rc != 0 or o != b"check 0\n" or b"blocks the stop" in e:
                    problems.append("main thread exited (%s): status %d, "
                                    "stdout %r, stderr %s" % (
                                        opts or "ptrace", rc, short(o),
                                        short(e, 300)))
        elif name == "gen-suppressions":
            # The suppression heaptrail prints, fed back, hides the leak.
            prog = self.build_prog(leak, "fp")
            rc, o, e = run([ht, "run", "-o", out + "1", "--gen-suppressions",
                            "--", prog], cwd=work)
            supp = [l.split("suppression:", 1)[1].strip()
                    for l in e.decode("utf-8", "replace").split("\n")
                    if "suppression: leak:" in l]
            if not supp:
                problems.append("--gen-suppressions printed no suppression")
            else:
                spath = os.path.join(work, "gen.supp")
                with open(spath, "w") as f:
                    f.write("\n".join(supp) + "\n")
                jpath = os.path.join(work, "gen.json")
                run([ht, "run", "-o", out + "2", "--suppressions", spath,
                     "--json", jpath, "--", prog], cwd=work)
                obj = load_json_objects(jpath)[0]
                kinds = ht_kinds(obj)
                if kinds["definitely_lost"] != [0, 0] or \
                        kinds["suppressed"][1] == 0:
                    problems.append("with the generated suppressions: %s" %
                                    show_kinds(kinds))
        elif name == "agent-files":
            problems += self.agent_files(work, out)
        elif name == "timeline-step":
            # After 300 idle ms, the row for just before the second 4 MiB
            # block (the unchanged figures, a millisecond before) comes
            # first, then the row with it: a step, not a slope.
            prog = self.build_prog(self.specs["timeline_step"], "fp")
            rc, o, e = run([ht, "run", "-q", "--sample", "1", "--timeline",
                            "10", "-o", out, "--", prog], cwd=work)
            tl = [f for f in os.listdir(out) if f.endswith(".timeline")] \
                if os.path.isdir(out) else []
            rows = []
            if rc != 0 or len(tl) != 1:
                problems.append("status %d, timelines %r: %s" % (
                    rc, tl, short(e)))
            else:
                with open(os.path.join(out, tl[0])) as f:
                    rows = [[int(x) for x in l.split()] for l in f
                            if not l.startswith("#")]
            step = [i for i in range(1, len(rows) - 1)
                    if rows[i][0] - rows[i - 1][0] >= 250]
            if rows and len(step) != 1:
                problems.append("no single idle gap of 250 ms or more "
                                "in the rows %r" % rows[:12])
            elif rows:
                i = step[0]
                before, prev, after = rows[i], rows[i - 1], rows[i + 1]
                if before[1:3] != prev[1:3] or after[0] != before[0] + 1 \
                        or after[1] - before[1] != 4 << 20 \
                        or after[2] - before[2] != 1:
                    problems.append("rows around the idle gap: %r %r %r" %
                                    (prev, before, after))
        elif name == "threads-seen":
            # The time triggers run on the program's own allocating
            # thread: under --every and --timeline it sees the threads it
            # sees bare (a ticker thread of the agent's made it one more).
            prog = self.build_prog(self.specs["threads_seen"], "fp")
            _, bare_out, _ = run([prog], cwd=work)
            for sample in ("512k", "1"):
                d = "%s-%s" % (out, sample)
                rc, o, e = run([ht, "run", "-q", "--sample", sample,
                                "--every", "100ms", "--timeline", "10",
                                "-o", d, "--", prog], cwd=work)
                if rc != 0 or o != bare_out or bare_out != b"threads 1\n":
                    problems.append("sample %s: status %d, stdout %r, bare "
                                    "%r" % (sample, rc, short(o),
                                            short(bare_out)))
                files = os.listdir(d) if os.path.isdir(d) else []
                every = [f for f in files if f.endswith(".every.heap")]
                tl = [f for f in files if f.endswith(".timeline")]
                rows = []
                if len(tl) == 1:
                    with open(os.path.join(d, tl[0])) as f:
                        rows = [l for l in f if not l.startswith("#")]
                # 300 ms of events: about 3 `every` dumps, 30 rows
                if not every or len(rows) < 5:
                    problems.append("sample %s: %d every dumps, %d timeline "
                                    "rows (timelines %r)" % (
                                        sample, len(every), len(rows), tl))
        elif name == "report-lost":
            # The exit report cannot be written: the agent says why and,
            # with --error-exitcode, the run fails (it used to pass).
            prog = self.build_prog(self.specs["report_lost"], "fp")
            modes = ["rlimit3", "rmdir"]
            if os.geteuid() == 0:
                modes += ["setuid", "chroot"]
            for mode in modes:
                d = out + "-" + mode
                rc, o, e = run([ht, "run", "-q", "-o", d, "--error-exitcode=42",
                                "--", prog, mode], cwd=work)
                if o != ("done %s\n" % mode).encode():
                    problems.append("%s: stdout %r" % (mode, short(o)))
                if rc != 42:
                    problems.append("%s: status %d, expected 42 (no report "
                                    "was written)" % (mode, rc))
                if b"cannot write the leak report" not in e:
                    problems.append("%s: the agent did not say the report "
                                    "was lost: %r" % (mode, short(e)))
            # A soft limit of 3 under a higher hard one: the agent borrows
            # descriptors up to the hard limit and the report is written.
            rc, o, e = run([ht, "run", "-q", "-o", out + "-soft3",
                            "--error-exitcode=42", "--", prog, "soft3"],
                           cwd=work)
            if rc != 42 or b"definitely lost: 100 bytes in 1 block" not in e:
                problems.append("soft3: status %d, expected 42 with the leak "
                                "reported: %r" % (rc, short(e, 400)))
        elif name in HOST_TESTS:
            problems += getattr(self, "host_" + name.replace("-", "_"))(
                work, out, one_line_error)
        elif name == "output-paths":
            problems += self.output_paths(work, out)
        elif name == "output-modes":
            problems += self.output_modes(work, out)
        elif name == "usage-errors":
            for cmd in ([ht, "run"], [ht, "no-such-command"],
                        [ht, "report", os.path.join(work, "missing")]):
                rc, o, e = run(cmd, cwd=work)
                if rc == 0 or not stderr_lines(e):
                    problems.append("%s: status %d, stderr %r" % (
                        " ".join(cmd[1:]), rc, short(e)))
            rc, o, e = run([ht, "report", os.path.join(work, "missing")],
                           cwd=work)
            one_line_error(rc, e, "missing", "report of a missing directory")
        return problems, []

    def output_modes(self, work, out):
        """Every file the CLI writes (run --json, which holds the
        program's argv; pprof, flame, collapsed -o; timeline --svg) is
        0600 whatever the
        umask, a new file as well as one that existed (0644) before."""
        ht = self.heaptrail
        problems = []
        prog = self.build_prog(self.specs["leak_one"], "fp")
        for umask in ("022", "000"):
            def ht_run(args):
                return run(["/bin/sh", "-c", 'umask %s; exec "$@"' % umask,
                            "sh", ht] + args, cwd=work)
            d = "%s-%s" % (out, umask)
            j = os.path.join(work, "run-%s.json" % umask)
            rc, o, e = ht_run(["run", "-q", "--final", "--timeline", "5",
                               "-o", d, "--json", j, "--", prog, "secret"])
            dumps = sorted(f for f in os.listdir(d) if f.endswith(".heap")) \
                if os.path.isdir(d) else []
            tl = [f for f in os.listdir(d) if f.endswith(".timeline")] \
                if os.path.isdir(d) else []
            if not dumps or not tl:
                raise Failure("run: status %d, dumps %r, timeline %r: %s" % (
                    rc, dumps, tl, short(e)))
            dump, timeline = os.path.join(d, dumps[0]), os.path.join(d, tl[0])
            outputs = [("run --json", j)]
            for what, args in (("pprof -o", ["pprof", dump, "-o"]),
                               ("flame -o", ["flame", dump, "-o"]),
                               ("collapsed -o", ["collapsed", dump, "-o"]),
                               ("timeline --svg", ["timeline", timeline,
                                                   "--svg"])):
                for old in (False, True):
                    f = os.path.join(work, "%s-%s-%s" % (
                        what.split()[0], umask, "old" if old else "new"))
                    if old:
                        with open(f, "w") as fh:
                            fh.write("old\n")
                        os.chmod(f, 0o644)
                    rc, o, e = ht_run(args + [f])
                    if rc != 0:
                        problems.append("umask %s: %s: status %d: %s" % (
                            umask, what, rc, short(e)))
                        continue
                    outputs.append(("%s (%s file)" % (
                        what, "an existing" if old else "a new"), f))
            for what, f in outputs:
                mode = os.stat(f).st_mode & 0o777 if os.path.exists(f) \
                    else None
                if mode is None:
                    problems.append("umask %s: %s wrote nothing" % (umask,
                                                                   what))
                elif mode != 0o600:
                    problems.append("umask %s: %s is %03o, expected 600" % (
                        umask, what, mode))
        return problems

    def output_paths(self, work, out):
        """-o naming what is not a plain file: a symlink gets the output in
        the file it names, a FIFO or a device is written through (a full
        device's ENOSPC is an error), none is replaced by a regular file;
        run --json into a missing directory is refused before the program
        runs."""
        import stat
        import threading
        ht = self.heaptrail
        problems = []
        rc, o, e = run([ht, "run", "-q", "--final", "-o", out, "--",
                        self.build_prog(self.specs["leak_one"], "fp")],
                       cwd=work)
        dumps = [f for f in os.listdir(out) if f.endswith(".heap")] \
            if os.path.isdir(out) else []
        if len(dumps) != 1:
            raise Failure("run --final: %d dumps, status %d: %s" % (
                len(dumps), rc, short(e)))
        dump = os.path.join(out, dumps[0])
        _, want_collapsed, _ = run([ht, "collapsed", dump], cwd=work)
        if not want_collapsed:
            raise Failure("collapsed %s printed nothing" % dump)
        # a symlink
        target, link = os.path.join(work, "target.svg"), \
            os.path.join(work, "link.svg")
        with open(target, "w") as f:
            f.write("old\n")
        os.symlink("target.svg", link)
        rc, _, e = run([ht, "flame", dump, "-o", link], cwd=work)
        if rc != 0 or not os.path.islink(link):
            problems.append("flame -o SYMLINK: status %d, %s: %s" % (
                rc, "still a symlink" if os.path.islink(link) else
                "the link was replaced", short(e)))
        with open(target) as f:
            if "<svg" not in f.read(4096):
                problems.append("flame -o SYMLINK: the file it names has "
                                "no SVG")
        # a FIFO, with a reader
        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo)
        got = []

        def reader():
            with open(fifo, "rb") as f:
                got.append(f.read())
        t = threading.Thread(target=reader, daemon=True)
        t.start()
        rc, _, e = run([ht, "collapsed", dump, "-o", fifo], cwd=work)
        t.join(10)
        if t.is_alive() and stat.S_ISFIFO(os.lstat(fifo).st_mode):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        # (a FIFO replaced by a file leaves the daemon reader blocked on the
        # old one, which ends with the runner)
        if rc != 0 or not stat.S_ISFIFO(os.lstat(fifo).st_mode):
            problems.append("collapsed -o FIFO: status %d, FIFO %s: %s" % (
                rc, "kept" if stat.S_ISFIFO(os.lstat(fifo).st_mode) else
                "replaced by a file", short(e)))
        elif got != [want_collapsed]:
            problems.append("collapsed -o FIFO: the reader got %d bytes, "
                            "stdout has %d" % (len(got[0]) if got else -1,
                                               len(want_collapsed)))
        # devices (root only: mknod)
        if os.geteuid() == 0:
            full, null = os.path.join(work, "full"), os.path.join(work, "null")
            os.mknod(full, 0o600 | stat.S_IFCHR, os.makedev(1, 7))
            os.mknod(null, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            rc, _, e = run([ht, "pprof", dump, "-o", full], cwd=work)
            lines = stderr_lines(e)
            if rc == 0 or len(lines) != 1 or "space" not in lines[0]:
                problems.append("pprof -o a full device: status %d, stderr "
                                "%r (expected one line: no space left)" % (
                                    rc, short(e)))
            rc, _, e = run([ht, "run", "-q", "-o", out + "-null", "--json",
                            null, "--", "/bin/true"], cwd=work)
            if rc != 0:
                problems.append("run --json DEVICE: status %d: %s" % (
                    rc, short(e)))
            for node in (full, null):
                if not stat.S_ISCHR(os.lstat(node).st_mode):
                    problems.append("%s was replaced by a regular file" %
                                    os.path.basename(node))
        elif os.environ.get("CI") == "true":
            problems.append("not root: the device-node half of this test "
                            "did not run")
        # run --json into a directory that does not exist
        missing = os.path.join(work, "missing", "x.json")
        rc, o, e = run([ht, "run", "-o", out + "-json", "--json", missing,
                        "--", "/bin/sh", "-c", "echo the program ran"],
                       cwd=work)
        lines = stderr_lines(e)
        if rc != 2 or len(lines) != 1 or missing not in lines[0]:
            problems.append("run --json MISSING/x.json: status %d, stderr %r"
                            " (expected 2 and one line naming it)" % (
                                rc, short(e)))
        if b"the program ran" in o:
            problems.append("run --json MISSING/x.json: the program ran "
                            "before the output was refused")
        return problems

    def agent_files(self, work, out):
        """Names planted by whoever can write to the output directory, and
        descriptors the program closes and reuses, cannot make the agent
        write into anything but its own new files, and those are 0600."""
        prog = self.build_prog(self.specs["hostile_files"], "fp")
        ht = self.heaptrail
        problems = []
        d = out + "-plant"
        os.makedirs(d)
        env = dict(RUN_ENV, HEAPTRAIL_OPTIONS="run=t3st_Run-1")
        rc, o, e = run([ht, "run", "-q", "--final", "-o", d, "--", prog,
                        "plant", d], cwd=work, env=env)
        if rc != 0 or o != b"planted 6\n":
            problems.append("plant: status %d, stdout %r, stderr %r" % (
                rc, short(o), short(e)))
        for n in range(6):
            with open(os.path.join(d, "victim-%d" % n)) as f:
                got = f.read()
            if got != "victim\n":
                problems.append("victim-%d was written through a planted "
                                "symlink: %r" % (n, short(got.encode())))
        made = [f for f in os.listdir(d) if f.startswith("heaptrail.")
                and not os.path.islink(os.path.join(d, f))]
        leaks = [f for f in os.listdir(d) if f.endswith(".leaks")]
        if len(leaks) != 1 or not os.path.isfile(os.path.join(d, leaks[0])) \
                or os.path.islink(os.path.join(d, leaks[0])):
            problems.append("no regular report file among %r" % leaks)
        for f in made:
            mode = os.stat(os.path.join(d, f)).st_mode & 0o777
            if mode != 0o600:
                problems.append("%s has mode %o, expected 600" % (f, mode))
        if not any(f.endswith(".heap") for f in made):
            problems.append("no final heap dump among %r" % made)
        # Each file names the run it belongs to (the agent's run option).
        for f in made:
            with open(os.path.join(d, f), errors="replace") as fh:
                text = fh.read()
            if f.endswith(".leaks") and "\nrun t3st_Run-1\n" not in text:
                problems.append("%s has no line 'run t3st_Run-1'" % f)
            if f.endswith(".heap") and " run=t3st_Run-1\n" not in text:
                problems.append("%s has no 'run=t3st_Run-1' in its "
                                "heaptrail-dump line" % f)
        left = [f for f in os.listdir(d) if "tmp" in f and
                not os.path.islink(os.path.join(d, f))]
        if left:
            problems.append("temporary files left behind: %r" % left)
        # The program closes every descriptor and reuses the lowest for its
        # own file while the timeline ticks every 10 ms.
        bare_dir = os.path.join(work, "bare")
        os.makedirs(bare_dir)
        _, bare_out, _ = run([prog, "fds", bare_dir], cwd=work)
        d = out + "-fds"
        os.makedirs(d)
        rc, o, e = run([ht, "run", "-q", "--timeline", "10", "-o", d, "--",
                        prog, "fds", d], cwd=work)
        if o != bare_out or rc != 0:
            problems.append("fds: status %d, stdout %r, bare %r" % (
                rc, short(o), short(bare_out)))
        tl = [f for f in os.listdir(d) if f.endswith(".timeline")]
        if len(tl) != 1:
            problems.append("fds: timelines %r" % tl)
        else:
            path = os.path.join(d, tl[0])
            if os.stat(path).st_mode & 0o777 != 0o600:
                problems.append("%s is not mode 600" % tl[0])
            with open(path) as f:
                rows = [l for l in f if not l.startswith("#")]
            if len(rows) < 5:
                problems.append("fds: %d timeline rows over 300 ms at 10 ms "
                                "(rows must go on after close_range)" %
                                len(rows))
        return problems

    def other_allocator(self, work):
        """Debian's jemalloc and tcmalloc preloaded too. `heaptrail run`
        puts the agent first: the program prints what it does bare with
        that allocator, and alloc_apis' leaks (checked against valgrind by
        its vg: test) are all found. With the other allocator first the
        agent sees nothing, and must say so once on stderr and in the
        report."""
        problems = []
        found = False
        spec = self.specs["alloc_apis"]
        prog = self.build_prog(spec, "fp")
        for lib in ("libjemalloc.so.2", "libtcmalloc_minimal.so.4"):
            path = os.path.join("/usr/lib/x86_64-linux-gnu", lib)
            if not os.path.exists(path):
                continue
            found = True
            env = dict(os.environ, LD_PRELOAD=path)
            r = subprocess.run([prog], env=env, cwd=work, capture_output=True,
                               timeout=60)
            out = os.path.join(work, lib)
            jpath = out + ".json"
            h = subprocess.run([self.heaptrail, "run", "-o", out, "--json",
                                jpath, "--", prog], env=env, cwd=work,
                               capture_output=True, timeout=120)
            if (h.returncode, h.stdout) != (r.returncode, r.stdout):
                problems.append("%s: status %d and stdout differ from the bare "
                                "run's (%d)" % (lib, h.returncode, r.returncode))
            objs = load_json_objects(jpath) if os.path.exists(jpath) else []
            if len(objs) != 1:
                problems.append("%s: %d reports" % (lib, len(objs)))
                continue
            for func, b, n, _ in spec.leaks.get(0, []):
                got = [0, 0]
                for rec in records_of(objs[0]):
                    if any(f.get("function") == func for f in rec["stack"]):
                        got[0] += rec["bytes"]
                        got[1] += rec["blocks"]
                if got != [b, n]:
                    problems.append("%s first: %s holds %d/%d, expected %d/%d"
                                    % (lib, func, got[0], got[1], b, n))
            if b"not heaptrail's" in h.stderr:
                problems.append("%s first: a warning about another allocator"
                                % lib)
            # the other allocator first, as a user might preload them
            out2 = out + "-first"
            os.makedirs(out2, exist_ok=True)
            env2 = dict(os.environ, LD_PRELOAD=path + ":" + self.agent(),
                        HEAPTRAIL_OUTPUT=out2, HEAPTRAIL_OPTIONS="sample=1")
            r2 = subprocess.run([prog], env=env2, cwd=work,
                                capture_output=True, timeout=60)
            if r2.stdout != r.stdout:
                problems.append("%s before the agent: stdout differs" % lib)
            warned = r2.stderr.count(b"not heaptrail's but that of " +
                                     path.encode())
            if warned != 1:
                problems.append("%s before the agent: warned %d times on "
                                "stderr, expected once: %s" % (
                                    lib, warned, short(r2.stderr)))
            rc, o, e = run([self.heaptrail, "report", "--json", out2], cwd=work)
            objs = [wrap(json.loads(o))[0]] if rc == 0 and o.strip() else []
            if not objs or objs[0].get("allocator_bypassed") != path:
                problems.append("%s before the agent: the report does not "
                                "name it as allocator_bypassed" % lib)
            rc, o, e = run([self.heaptrail, "report", out2], cwd=work)
            if b"warning: the program's malloc was that of" not in o + e:
                problems.append("%s before the agent: no warning in the text "
                                "report" % lib)
        if not found:
            raise Skip("neither libjemalloc2 nor libtcmalloc-minimal4 is "
                       "installed")
        return problems

    # -- the CLI never hurts the host (issue 11); each one_line_error
    # -- check means: non-zero status, exactly one stderr line naming it

    def host_start(self, args, work, env=None, opts=None):
        """Starts `heaptrail run ... host_signals ARGS`; returns the Popen
        and the program's pid once it printed "ready"."""
        prog = self.build_prog(self.specs["host_signals"], "fp")
        e = dict(RUN_ENV)
        if opts is not None:
            e["HEAPTRAIL_OPTIONS"] = opts
        self.host_starts = getattr(self, "host_starts", 0) + 1
        p = subprocess.Popen([self.heaptrail, "run", "-q", "-o",
                              os.path.join(work, "out-%s-%d" % (
                                  args[0], self.host_starts)), "--",
                              prog] + args, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=work, env=e)
        line = p.stdout.readline()
        if line != b"ready\n":
            p.kill()
            raise Failure("host_signals %s did not start: %r" % (args, line))
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            kids = f.read().split()
        return p, int(kids[0])

    def host_forward_signals(self, work, out, one_line_error):
        """SIGTERM sent to heaptrail run (by timeout, kill, a service
        manager) reaches the program, and heaptrail exits as it did."""
        problems = []
        p, child = self.host_start(["term"], work)
        try:
            os.kill(p.pid, signal.SIGTERM)
            o, e = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
            try:
                os.kill(child, signal.SIGKILL)
                problems.append("the program was still running after "
                                "heaptrail run ended")
            except ProcessLookupError:
                pass
        if p.returncode != 3:
            problems.append("status %d, expected 3 (the program's, after its "
                            "SIGTERM handler)" % p.returncode)
        if o.count(b"got SIGTERM\n") != 1:
            problems.append("stdout %r, expected 'got SIGTERM' once" % o)
        # a SIGTERM the program sends its own process group reaches it
        # once, bare and under heaptrail run (which is in the group too);
        # each in a session of its own, so the group is just these
        prog = self.build_prog(self.specs["host_signals"], "fp")
        for label, cmd in (("bare", [prog, "selfterm"]),
                           ("heaptrail run", [self.heaptrail, "run", "-q", "-o",
                                              os.path.join(work, "out-selfterm"),
                                              "--", prog, "selfterm"])):
            q = subprocess.run(cmd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=work, env=RUN_ENV,
                               timeout=60, start_new_session=True)
            if q.returncode != 0 or q.stdout != b"terms 1\n":
                problems.append("%s, SIGTERM to its own group: status %d, "
                                "stdout %r, expected 'terms 1'" %
                                (label, q.returncode, q.stdout))
        return problems

    def host_run_bad_values(self, work, out, one_line_error):
        """Bad profiling values stop heaptrail run before the program
        starts, with one line naming the option."""
        problems = []
        marker = os.path.join(work, "ran")
        for opt, val in (("--sample", "banana"), ("--sample", "0"),
                         ("--interval", "12q"), ("--every", "soon"),
                         ("--signal", "11"), ("--signal", "NOSUCHSIG"),
                         ("--timeline", "-5"), ("--timeline", "9999999")):
            rc, o, e = run([self.heaptrail, "run", "-o", out + opt + val, opt,
                            val, "--", "/bin/sh", "-c", "touch " + marker],
                           cwd=work)
            one_line_error(rc, e, opt, "run %s %s" % (opt, val))
            if os.path.exists(marker):
                problems.append("run %s %s started the program" % (opt, val))
                os.unlink(marker)
        for opt, val in (("--sample", "512k"), ("--every", "500ms"),
                         ("--signal", "USR2"), ("--timeline", "0")):
            rc, o, e = run([self.heaptrail, "run", "-q", "-o", out + opt + val,
                            opt, val, "--", "/bin/true"], cwd=work)
            if rc != 0 or b"ignoring" in e:
                problems.append("run %s %s: status %d: %s" % (opt, val, rc,
                                                            short(e)))
        return problems

    def host_outdir_owned(self, work, out, one_line_error):
        """A run directory belongs to one run: -o DIR with an earlier run's
        files is refused; the default directory is made fresh, 0700, and
        one that already exists (or a symlink) is refused."""
        problems = []
        rc, o, e = run([self.heaptrail, "run", "-q", "-o", out, "--",
                        "/bin/true"], cwd=work)
        if rc != 0:
            return ["first run: status %d: %s" % (rc, short(e))]
        rc, o, e = run([self.heaptrail, "run", "-q", "-o", out, "--",
                        "/bin/sh", "-c", "echo ran"], cwd=work)
        one_line_error(rc, e, "another run", "run -o DIR of an earlier run")
        if o:
            problems.append("the program ran into an earlier run's directory")
        # the default directory, named after the pid: plant a symlink at
        # every name the next pids would get, then run
        victim = os.path.join(work, "victim")
        os.mkdir(victim)
        with open("/proc/sys/kernel/ns_last_pid") as f:
            last = int(f.read())
        planted = set()
        for pid in range(last + 1, last + 3000):
            name = os.path.join(work, "heaptrail-true-%d" % pid)
            os.symlink(victim, name)
            planted.add(pid)
        rc, o, e = run([self.heaptrail, "run", "--", "/bin/true"], cwd=work)
        if os.listdir(victim):
            problems.append("heaptrail wrote into a planted symlink: %s" %
                            os.listdir(victim))
        lines = stderr_lines(e)
        if rc == 0:
            made = [d for d in os.listdir(work) if d.startswith(
                "heaptrail-true-") and not os.path.islink(os.path.join(work, d))]
            if not made:
                problems.append("status 0 and no fresh directory")
            for d in made:
                mode = os.stat(os.path.join(work, d)).st_mode & 0o777
                if mode != 0o700:
                    problems.append("%s has mode %o, expected 700" % (d, mode))
        else:
            one_line_error(rc, e, "already exists", "run with a planted "
                           "default directory")
        # and without a planted one, the fresh directory is 0700
        fresh = os.path.join(work, "fresh")
        os.mkdir(fresh)
        rc, o, e = run([self.heaptrail, "run", "-q", "--", "/bin/true"],
                       cwd=fresh)
        made = os.listdir(fresh)
        if rc != 0 or len(made) != 1:
            problems.append("default directory: status %d, made %s" % (rc,
                                                                      made))
        else:
            mode = os.stat(os.path.join(fresh, made[0])).st_mode & 0o777
            if mode != 0o700:
                problems.append("%s has mode %o, expected 700" % (made[0], mode))
        return problems

    def host_bad_leak_file(self, work, out, one_line_error):
        """A garbage .leaks file in the directory is named on one line; the
        program's own report is still printed, and --error-exitcode fails
        the run (a report it cannot read is one nobody checked)."""
        problems = []
        prog = self.build_prog(self.specs["host_signals"], "fp")
        for opts, want in (([], 0), (["--error-exitcode=9"], 9)):
            d = out + str(len(opts))
            rc, o, e = run([self.heaptrail, "run", "-o", d] + opts +
                           ["--", prog, "garbage"], cwd=work)
            if rc != want:
                problems.append("%s: status %d, expected %d" % (
                    " ".join(opts) or "no option", rc, want))
            bad = [l for l in stderr_lines(e) if "heaptrail.1.leaks" in l]
            if len(bad) != 1:
                problems.append("%d lines name the garbage file, expected 1: %r"
                                % (len(bad), short(e, 400)))
            if b"leak_a_block" not in e or b"40 bytes" not in e:
                problems.append("the program's own leak is not reported: %r"
                                % short(e, 400))
        rc, o, e = run([self.heaptrail, "report", out + "0"], cwd=work)
        if rc == 0 or b"leak_a_block" not in o or \
                len([l for l in stderr_lines(e) if "heaptrail.1" in l]) != 1:
            problems.append("report DIR: status %d, stdout %r, stderr %r" % (
                rc, short(o), short(e)))
        return problems

    def host_missing_report(self, work, out, one_line_error):
        """--error-exitcode: a process that left no report fails the run."""
        problems = []
        rc, o, e = run([self.heaptrail, "run", "-q", "-o", out,
                        "--error-exitcode=9", "--", "/bin/sh", "-c",
                        "kill -9 $$"], cwd=work)
        if rc != 9:
            problems.append("killed program: status %d, expected 9" % rc)
        if not any("no report" in l or "before it could write" in l
                   for l in stderr_lines(e)):
            problems.append("no line says which process has no report: %r"
                            % short(e))
        return problems

    def host_leaks_signal_rules(self, work, out, one_line_error):
        """leak_check_signal given as key:value, or twice (the last
        well-formed value counts): a sigqueue of that signal with
        heaptrail's value (an older heaptrail's request; heaptrail asks by
        ptrace now) writes a leak check and the program lives on; the same
        sigqueue of the signal not chosen is the program's, whose default
        action ends it, as bare."""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sigqueue.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        magic = 0x48540000  # FMT_SIGVAL_MAGIC (src/format/options.h)
        problems = []
        for opts, sig, other in (
                ("leak_check_signal:40", 40, 41),
                ("leak_check_signal=40,leak_check_signal=41", 41, 40),
                ("leak_check_signal=41,leak_check_signal=banana", 41, 40)):
            p, child = self.host_start(["serve"], work, opts=opts)
            outdir = os.path.join(work, "out-serve-%d" % self.host_starts)
            check = os.path.join(outdir, "heaptrail.%d.check-1.leaks" % child)
            try:
                if libc.sigqueue(child, sig, magic):
                    problems.append("%s: sigqueue: %s" % (
                        opts, os.strerror(ctypes.get_errno())))
                end = time.time() + 10
                while not os.path.exists(check) and time.time() < end:
                    time.sleep(0.02)
                if not os.path.exists(check):
                    problems.append("%s: signal %d with heaptrail's value wrote no "
                                    "leak check (%s holds %s)" % (
                                        opts, sig, outdir, sorted(os.listdir(outdir))))
                if p.poll() is not None:
                    problems.append("%s: signal %d with heaptrail's value ended the "
                                    "program (status %d)" % (opts, sig, p.returncode))
                    continue
                libc.sigqueue(child, other, magic)
                p.communicate(timeout=30)
                if p.returncode not in (-other, 128 + other):
                    problems.append("%s: signal %d, not the one chosen: status %d, "
                                    "want death by it as bare" % (opts, other,
                                                                  p.returncode))
                if os.path.exists(check.replace("check-1", "check-2")):
                    problems.append("%s: signal %d wrote a leak check" % (opts, other))
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return problems

    def host_leaks_refuses(self, work, out, one_line_error):
        """heaptrail leaks PID does not kill a program that reset its
        signal dispositions behind the agent's back (raw rt_sigaction):
        no signal is sent (the agent is asked by ptrace), so the check
        is written and the program lives on."""
        problems = []
        p, child = self.host_start(["rawreset"], work)
        try:
            rc, o, e = run([self.heaptrail, "leaks", str(child)], cwd=work)
            if rc != 0:
                problems.append("leaks PID of a program with default "
                                "dispositions: status %d: %s" % (rc, short(e)))
            o2, e2 = p.communicate(b"x\n", timeout=30)
            if p.returncode != 0 or o2 != b"done\n":
                problems.append("the program ended with status %d, stdout %r"
                                % (p.returncode, o2))
        finally:
            if p.poll() is None:
                p.kill()
        return problems

    def host_leaks_after_reset(self, work, out, one_line_error):
        """A program that reset every disposition to SIG_DFL with signal():
        the agent keeps its handler, so heaptrail leaks PID works and the
        program lives on; a plain kill of the leak check signal from
        outside still takes the default action (it dies of it, as bare)."""
        problems = []
        sig = signal.SIGRTMAX - 2
        p, child = self.host_start(["reset"], work)
        try:
            rc, o, e = run([self.heaptrail, "leaks", "--json", str(child)],
                           cwd=work)
            if rc != 0:
                problems.append("heaptrail leaks: status %d: %s" % (
                    rc, short(e)))
            if p.poll() is not None:
                problems.append("the program died of heaptrail leaks")
            os.kill(child, sig)
            o2, e2 = p.communicate(timeout=30)
            if p.returncode not in (-sig, 128 + sig) or b"done" in o2:
                problems.append("kill -%d from outside: the run ended with "
                                "status %d, stdout %r, expected death by "
                                "the signal" % (sig, p.returncode, o2))
        finally:
            if p.poll() is None:
                p.kill()
        return problems

    def host_own_handler(self, work, out, one_line_error):
        """A program's own handler on the leak check signal: sigaction's
        oldact and signal()'s return give back its own dispositions (not
        the agent's), heaptrail leaks PID does not run its handler, and a
        kill from outside does, once per signal."""
        problems = []
        sig = signal.SIGRTMAX - 2
        p, child = self.host_start(["own"], work)
        try:
            rc, o, e = run([self.heaptrail, "leaks", "--json", str(child)],
                           cwd=work)
            if rc != 0:
                problems.append("heaptrail leaks: status %d: %s" % (
                    rc, short(e)))
            for i in range(2):
                os.kill(child, sig)
                line = p.stdout.readline()
                if line != b"hit\n":
                    problems.append("kill %d: the program's handler did not "
                                    "run (read %r)" % (i + 1, line))
                    break
            o2, e2 = p.communicate(b"", timeout=30)
            if p.returncode != 0 or o2 != (b"roundtrip ok 0\nhandler ran 2\n"
                                           b"done\n"):
                problems.append("the program ended with status %d, stdout %r"
                                % (p.returncode, o2))
        finally:
            if p.poll() is None:
                p.kill()
        return problems

    def host_hostile_inputs(self, work, out, one_line_error):
        """Every analyzer command, given /dev/zero, a FIFO without a writer
        or a directory holding them: one line, non-zero, no hang; and an
        output that cannot be written leaves no partial file."""
        problems = []
        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo)
        d = os.path.join(work, "dir")
        os.mkdir(d)
        for n in ("heaptrail.7.leaks", "heaptrail.7.timeline",
                  "heaptrail.7.1.every.heap", "heaptrail.7.2.every.heap",
                  "heaptrail.7.3.every.heap"):
            os.mkfifo(os.path.join(d, n))
        cmds = []
        for src in ("/dev/zero", fifo):
            for c in ("top", "collapsed", "callgraph", "report", "timeline"):
                cmds.append([c, src])
            cmds.append(["flame", "-o", os.path.join(work, "f.svg"), src])
            cmds.append(["pprof", "-o", os.path.join(work, "p.pb.gz"), src])
            cmds.append(["diff", src, src])
            cmds.append(["growth", src, src, src])
        cmds += [["report", d], ["timeline", d], ["growth", d]]
        for c in cmds:
            try:
                rc, o, e = run([self.heaptrail] + c, cwd=work, timeout=20)
            except Failure:
                problems.append("%s: no answer within 20 s" % " ".join(c))
                continue
            one_line_error(rc, e, os.path.basename(c[-1]) if c[-1] != d
                           else "heaptrail.7.", " ".join(c))
        return problems

    def leaks_pid(self, work, out):
        """`heaptrail leaks PID` on a running server, twice: everything, then
        only what increased."""
        prog = self.build_prog(self.specs["delta_leak_server"], "fp")
        problems = []
        p, child = self.server_under_heaptrail(prog, work, out)
        try:
            if child is None:
                return ["the server under heaptrail did not start"]
            checks = []
            for reqs, opt in ((5, []), (3, ["--increased"])):
                p.stdin.write(b"".join(b"req-%d\n" % i for i in range(reqs)))
                p.stdin.flush()
                time.sleep(0.3)  # the server reads and handles them
                rc, o, e = run([self.heaptrail, "leaks", "--json"] + opt +
                               [str(child)], cwd=work)
                if rc != 0:
                    return ["heaptrail leaks %s: status %d: %s" % (
                        " ".join(opt), rc, short(e))]
                checks.append(wrap(json.loads(o))[0])
            first = ht_kinds(checks[0])["definitely_lost"]
            if first != [240, 5]:
                problems.append("first check: definitely lost %d/%d, "
                                "expected 240/5" % tuple(first))
            inc = [r for r in records_of(checks[1])
                   if r["kind"] == "definitely_lost"]
            names = {f.get("function") for r in inc
                     for f in r["stack"][:1]}
            grown = [(r.get("increase") or {}).get("bytes") for r in inc]
            if names != {"log_request"} or grown != [144]:
                problems.append("second check: increased records %s with "
                                "increases %s, expected log_request +144" %
                                (sorted(names), grown))
        finally:
            p.stdin.close()
            p.wait(timeout=30)
        if p.returncode != 0:
            problems.append("the server exited with %d" % p.returncode)
        problems += self.leaks_pid_hostile(work, out + "-hostile")
        problems += self.leaks_pid_sampled(work, out + "-sampled", prog)
        return problems

    def server_under_heaptrail(self, prog, work, out, extra=()):
        """heaptrail run [extra] -o out -- prog, its stdin a pipe: (the
        Popen, the program's pid once the agent is in it, or None)."""
        p = subprocess.Popen([self.heaptrail, "run", "-q", "-o", out] +
                             list(extra) + ["--", prog], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, cwd=work)
        for _ in range(200):
            kids = children(p.pid)
            if kids and os.path.exists(out):
                try:
                    with open("/proc/%s/maps" % kids[0]) as f:
                        if "libheaptrail" in f.read():
                            return p, int(kids[0])
                except OSError:
                    pass
            time.sleep(0.02)
        return p, None

    def leaks_pid_sampled(self, work, out, prog):
        """`heaptrail leaks PID` on a sampled process answers at once with
        what is in use (it waited out its whole timeout: the agent wrote
        no check without leak kinds); on a process that ends before it
        can answer (stopped, then killed), it says so at once."""
        problems = []
        p, child = self.server_under_heaptrail(prog, work, out, ["--sample", "64k"])
        try:
            if child is None:
                return ["sampled: the server under heaptrail did not start"]
            t0 = time.time()
            rc, o, e = run([self.heaptrail, "leaks", "--timeout", "30", "--json",
                            str(child)], cwd=work)
            took = time.time() - t0
            if rc != 0 or took > 10:
                problems.append("leaks on a sampled process: status %d after %.1f s: %s" % (
                    rc, took, short(e)))
            else:
                obj = wrap(json.loads(o))[0]
                if (obj.get("check") or {}).get("number") != 1 or classified(obj):
                    problems.append("leaks on a sampled process: check %r, classified %s" % (
                        obj.get("check"), classified(obj)))
            os.kill(child, signal.SIGSTOP)
            waiter = subprocess.Popen([self.heaptrail, "leaks", "--timeout", "60",
                                       str(child)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, cwd=work)
            time.sleep(0.5)
            os.kill(child, signal.SIGKILL)
            t0 = time.time()
            try:
                _, e = waiter.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                waiter.kill()
                _, e = waiter.communicate()
            took = time.time() - t0
            if waiter.returncode == 0 or took > 10 or b"ended before" not in e:
                problems.append("leaks on a process killed while it waited: status %d "
                                "%.1f s after the kill: %s" % (waiter.returncode, took, short(e)))
        finally:
            p.stdin.close()
            p.wait(timeout=30)
        return problems

    def leaks_pid_hostile(self, work, out):
        """`heaptrail leaks PID` where only a thread with a 16 KiB stack can
        take the check and a live block has a PROT_NONE page."""
        prog = self.build_prog(self.specs["leaks_pid_hostile"], "fp")
        p = subprocess.Popen([self.heaptrail, "run", "-q", "-o", out, "--",
                              prog], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, cwd=work)
        problems = []
        try:
            child = None
            for _ in range(200):
                kids = children(p.pid)
                if kids:
                    try:
                        with open("/proc/%d/status" % int(kids[0])) as f:
                            threads = [l for l in f if l.startswith("Threads:")]
                    except OSError:
                        threads = []
                    if threads and int(threads[0].split()[1]) >= 2:
                        child = int(kids[0])
                        break
                time.sleep(0.02)
            if child is None:
                return ["hostile: the program under heaptrail did not start"]
            # main blocks the check signal (SIGRTMAX-2) after it made the thread
            bit = 1 << (signal.SIGRTMAX - 2 - 1)
            if not wait_until(lambda: int(proc_field("/proc/%d/task/%d/status" % (
                    child, child), "SigBlk") or "0", 16) & bit):
                return ["hostile: its main thread never blocked the check signal"]
            rc, o, e = run([self.heaptrail, "leaks", "--json", str(child)],
                           cwd=work)
            if rc != 0:
                problems.append("hostile: heaptrail leaks: status %d: %s" %
                                (rc, short(e)))
            else:
                lost = ht_kinds(wrap(json.loads(o))[0])["definitely_lost"]
                if lost != [100, 1]:
                    problems.append("hostile: definitely lost %d/%d, "
                                    "expected 100/1" % tuple(lost))
        finally:
            o, _ = p.communicate(b"", timeout=60)
        if p.returncode != 0 or o != b"done\n":
            problems.append("hostile: the program ended with %d, stdout %r" %
                            (p.returncode, o))
        return problems


def children(pid):
    """The pids of pid's children (strings; [] once it is gone)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return f.read().split()
    except OSError:
        return []
