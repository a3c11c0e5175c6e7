"""The prof: tests: heap profiling (sampling, heap dumps, timeline), read
by heapprof, jeprof and pprof (see tests/run_tests.py)."""

from .harness import *  # noqa: F401,F403
from .specs import *  # noqa: F401,F403
from .e2e import *  # noqa: F401,F403


class Prof:
    """Suite's prof: tests."""

    # -- heap profiles: the prof: tests (see the module comment)

    def agent(self):
        return os.path.join(self.build, "libheaptrail.so")

    def require_export(self, symbol):
        def do():
            rc, out, _ = run(["nm", "-D", "--defined-only", self.agent()],
                             env=os.environ)
            return rc == 0 and bool(re.search(
                rb"\s%s$" % symbol.encode(), out, re.M))
        if not self.exports.get(symbol, do):
            raise Failure("libheaptrail.so does not export %s" % symbol)

    def tool(self, name):
        """The path of jeprof, pprof (built by tests/tools/get-pprof) or
        Debian's libjemalloc.so.2; Failure when it cannot be had."""
        def do():
            if name == "jeprof":
                path = shutil.which("jeprof")
                if not path:
                    raise Failure("jeprof not found (it comes with "
                                  "libjemalloc-dev: scripts/install-deps "
                                  "--test)")
                return path
            if name == "pprof":
                rc, out, err = run([os.path.join(TOOLS, "get-pprof"),
                                    self.build], env=os.environ, timeout=600)
                if rc != 0:
                    raise Failure(short(err, 300).strip() or
                                  "get-pprof: status %d" % rc)
                return out.decode().strip().split("\n")[-1]
            found = sorted(glob.glob("/usr/lib/*/libjemalloc.so.2") +
                           glob.glob("/usr/lib/libjemalloc.so.2"))
            if not found:
                raise Failure("libjemalloc.so.2 not found (libjemalloc2: "
                              "scripts/install-deps --test)")
            return found[0]
        return self.tools.get(name, do)

    def symbols(self, binary):
        return self.syms.get(binary, lambda: heapprof.Symbols(binary))

    def prof_work(self, spec, tag):
        return os.path.join(self.e2e, "prof", spec.name + tag)

    def prof_run(self, spec, tag, options=None, args=(), cli=None,
                 during=None):
        """Runs a @prof program (built with frame pointers) with the agent:
        under LD_PRELOAD with HEAPTRAIL_OPTIONS=options (None: unset) and
        HEAPTRAIL_OUTPUT=WORK/out, or, with cli (a list of flags), as
        `heaptrail run -o WORK/out CLI -- PROG`.  during(proc, outdir) is
        called while it runs.  Returns {"status", "stdout", "stderr",
        "outdir", "work", "binary", "pid"}: pid is the program's (under
        the CLI: read from the names of the files the agent wrote)."""
        binary = self.build_prog(spec, "fp")
        work = fresh_dir(self.prof_work(spec, tag))
        outdir = os.path.join(work, "out")
        env = dict(RUN_ENV)
        if options is not None:
            env["HEAPTRAIL_OPTIONS"] = options
        if cli is None:
            os.makedirs(outdir)
            env.update(LD_PRELOAD=self.agent(), HEAPTRAIL_OUTPUT=outdir)
            cmd = [binary] + list(args)
        else:
            cmd = [self.heaptrail, "run", "-o", outdir] + list(cli) + \
                ["--", binary] + list(args)
        try:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, cwd=work, env=env)
        except OSError as e:
            raise Failure("cannot run %s: %s" % (cmd[0], e.strerror))
        try:
            if during:
                during(p, outdir)
            out, err = p.communicate(timeout=PROG_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failure("timed out after %ds: %s" % (PROG_TIMEOUT,
                                                       " ".join(cmd)))
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        with open(os.path.join(work, "stderr"), "wb") as f:
            f.write(err)
        pid = p.pid
        if cli is not None:
            pids = {m.group(1) for m in map(re.compile(
                r"^heaptrail\.(\d+)\.").match, os.listdir(outdir)
                if os.path.isdir(outdir) else []) if m}
            pid = int(pids.pop()) if len(pids) == 1 else None
        return {"status": p.returncode, "stdout": out, "stderr": err,
                "outdir": outdir, "work": work, "binary": binary, "pid": pid}

    def bare_args(self, spec, args):
        binary = self.build_prog(spec, "fp")
        rc, out, _ = run([binary] + list(args), cwd=self.bin_dir("fp"))
        return rc, out

    def reader_estimates(self, binary, path, prof, funcs, problems,
                         tolerance=None):
        """Estimated in-use bytes of funcs (and "total") from one dump, by
        heapprof (pprof's maths), jeprof --text and pprof -top (cum of
        each function); jeprof and pprof must agree with heapprof within
        a byte or two per line of the dump (pprof truncates each line,
        jeprof keeps floats).  {reader: {func or "total": bytes}}."""
        ours = heapprof.by_function(prof, self.symbols(binary), funcs)
        est = {"heapprof": {f: ours.get(f, [0] * 4)[1] for f in funcs}}
        est["heapprof"]["total"] = prof.total_inuse()
        index = "inuse_space" if prof.has_alloc else None
        for reader, top in (("jeprof", self.jeprof_top(binary, path)),
                            ("pprof", self.pprof_top(binary, path,
                                                     index=index))):
            rows = {name: cum for _, cum, name in top["rows"]}
            est[reader] = {f: rows.get(f, 0) for f in funcs}
            est[reader]["total"] = top["total"]
        slack = tolerance if tolerance is not None else \
            2 + 2 * len(prof.samples)
        name = os.path.basename(path)
        for reader in ("jeprof", "pprof"):
            for f in list(funcs) + ["total"]:
                if abs(est[reader][f] - est["heapprof"][f]) > slack:
                    problems.append("%s: %s says %s holds %d bytes, the "
                                    "runner's reader %d" % (
                                        name, reader, f, est[reader][f],
                                        est["heapprof"][f]))
        return est

    def jeprof_top(self, binary, dump, base=None):
        """`jeprof --text --show_bytes`: {"total", "rows": [(flat, cum,
        function)]} in jeprof's order (by flat)."""
        cmd = [self.tool("jeprof"), "--text", "--show_bytes",
               "--nodefraction=0", "--edgefraction=0"]
        if base:
            cmd.append("--base=" + base)
        rc, out, err = run(cmd + [binary, dump], cwd=os.path.dirname(dump))
        text = out.decode("utf-8", "replace")
        tm = re.search(r"^Total: (-?[\d.]+) B$", text, re.M)
        if rc != 0 or not tm:
            raise Failure("jeprof --text %s%s: status %d: %s" % (
                "--base=%s " % os.path.basename(base) if base else "",
                os.path.basename(dump), rc, short(err + out, 300)))
        rows = [(int(m.group(1)), int(m.group(2)), m.group(3))
                for m in map(JEPROF_ROW.match, text.split("\n")) if m]
        return {"total": int(float(tm.group(1))), "rows": rows,
                "text": text}

    def pprof_top(self, binary, dump, base=None, index=None):
        """`pprof -top -unit=B`: {"total", "rows": [(flat, cum, function)]}
        in pprof's order (by flat)."""
        cmd = [self.tool("pprof"), "-top", "-unit=B", "-nodefraction=0",
               "-edgefraction=0"]
        if index:
            cmd.append("-sample_index=" + index)
        if base:
            cmd += ["-base", base]
        env = dict(RUN_ENV, PPROF_TMPDIR=os.path.dirname(dump))
        rc, out, err = run(cmd + [binary, dump], cwd=os.path.dirname(dump),
                           env=env)
        text = out.decode("utf-8", "replace")
        tm = re.search(r" of (-?\d+)B total", text)
        if rc != 0 or not tm:
            raise Failure("pprof -top %s%s: status %d: %s" % (
                "-base %s " % os.path.basename(base) if base else "",
                os.path.basename(dump), rc, short(err + out, 300)))
        rows = [(int(m.group(1)), int(m.group(2)), m.group(3))
                for m in map(PPROF_ROW.match, text.split("\n")) if m]
        return {"total": int(tm.group(1)), "rows": rows, "text": text}

    def test_prof(self, name):
        return getattr(self, "prof_" + name.replace("-", "_"))()

    def prof_readers(self):
        """The oracle itself, without heaptrail: jemalloc's profiler on
        prof_accuracy at S = 512 KiB, its dump converted to the legacy
        layout; heapprof, jeprof and pprof agree, and the shares are the
        true ones within 3 points (jemalloc counts its size classes, so
        its total is not the requested bytes)."""
        spec = self.specs["prof_accuracy"]
        binary = self.build_prog(spec, "fp")
        work = fresh_dir(self.prof_work(spec, ".jemalloc"))
        env = dict(RUN_ENV, LD_PRELOAD=self.tool("jemalloc"),
                   MALLOC_CONF="prof:true,prof_accum:true,lg_prof_sample:19,"
                               "prof_prefix:" + os.path.join(work, "jeprof"))
        rc, out, err = run([binary], cwd=work, env=env)
        problems, details = [], []
        if rc != 0:
            raise Failure("under jemalloc: status %d: %s" % (rc, short(err)))
        truth = accuracy_truth(out)
        dumps = glob.glob(os.path.join(work, "jeprof.*.heap"))
        if len(dumps) != 1:
            raise Failure("jemalloc wrote %d dumps, expected 1" % len(dumps))
        legacy = os.path.join(work, "legacy.heap")
        heapprof.from_jemalloc(dumps[0], legacy)
        prof = read_dump(legacy, problems, 524288)
        if prof is None:
            return problems, details
        est = self.reader_estimates(binary, legacy, prof, ACCURACY_SITES,
                                    problems)
        for reader, e in sorted(est.items()):
            details.append("%s: %s" % (reader, e))
            check_shares(reader, e, truth, problems, total=False)
        return problems, details

    def prof_accuracy(self):
        """prof_accuracy three times at the default S: shares within 3
        points, total within 5 %, by all three readers."""
        return self.accuracy_runs(None, 512 * 1024)

    def prof_accuracy_auto(self):
        """The same at sample=auto: S starts at 8 KiB and is raised (the
        recorded blocks thinned) as the 2 GiB heap grows, to its ceiling
        of 512 KiB; the dump must be unbiased at the S it states, by all
        three readers, the freed site's allocated column included."""
        problems, details = self.accuracy_runs("sample=auto,timeline=5", 512 * 1024)
        # the timeline follows S too: its last "sample=" is the dumps'
        for i in range(3):
            out = os.path.join(self.prof_work(self.specs["prof_accuracy"], ".%d.auto" % i), "out")
            tl = glob.glob(os.path.join(out, "*.timeline"))
            said = []
            if len(tl) == 1:
                with open(tl[0]) as f:
                    said = re.findall(r"sample=(\d+)", "".join(l for l in f if l.startswith("#")))
            details.append("run %d: the timeline's S: %s" % (i + 1, said))
            if not said or int(said[-1]) != 512 * 1024 or int(said[0]) != 8192:
                problems.append("run %d: the timeline says S %s, want 8192 first and "
                                "524288 last" % (i + 1, said or "nothing"))
        return problems, details

    def accuracy_runs(self, options, period):
        self.require_export("heaptrail_dump")
        spec = self.specs["prof_accuracy"]
        bare_rc, bare_out = self.bare(spec, "fp")
        truth = accuracy_truth(bare_out)
        problems, details = [], []
        headers = []
        for i in range(3):
            label = "run %d" % (i + 1)
            r = self.prof_run(spec, ".%d%s" % (i, ".auto" if options else ""), options)
            if r["status"] != bare_rc or r["stdout"] != bare_out:
                problems.append("%s: status %d, stdout %s the bare run's" % (
                    label, r["status"], "differs from"
                    if r["stdout"] != bare_out else "equal to"))
            dumps = list_dumps(r["outdir"], problems, r["pid"])
            api = [d for d in dumps["seq"] if d["kind"] == "api"]
            if len(api) != 1:
                problems.append("%s: %d API dumps in %s, expected 1" % (
                    label, len(api), r["outdir"]))
                continue
            path = api[0]["path"]
            prof = read_dump(path, problems, period)
            if prof is None:
                continue
            headers.append(prof.header)
            if not prof.has_alloc:
                problems.append("%s: the header's allocated pair equals the "
                                "in-use pair although scratch freed %d bytes "
                                "(pprof then offers no inuse_space and "
                                "refuses -base against other dumps)" % (
                                    label, truth["scratch"][0]))
            est = self.reader_estimates(r["binary"], path, prof,
                                        ACCURACY_SITES, problems)
            for reader, e in sorted(est.items()):
                details.append("%s %s: %s" % (label, reader, e))
                check_shares("%s: %s" % (label, reader), e, truth, problems)
            # The fourth site: freed, so only in the allocated columns.
            got = heapprof.by_function(prof, self.symbols(r["binary"]),
                                       ACCURACY_SITES + ("scratch",))
            n, b, n2, b2 = got.get("scratch", [0] * 4)
            want = truth["scratch"][0]
            details.append("%s scratch: %d in use, %d allocated (true %d)" %
                           (label, b, b2, want))
            if b != 0:
                problems.append("%s: scratch has %d bytes in use, all were "
                                "freed" % (label, b))
            if abs(b2 - want) > 0.15 * want:
                problems.append("%s: scratch allocated %d bytes (estimated), "
                                "true %d: off by more than 15 %%" % (
                                    label, b2, want))
        if len(headers) == 3 and len(set(headers)) == 1:
            problems.append("the three runs sampled exactly the same blocks "
                            "(%d: %d): every process draws the same random "
                            "numbers" % headers[0][:2])
        return problems, details

    def prof_exact(self):
        """prof_accuracy at sample=1: every reader says the true bytes."""
        self.require_export("heaptrail_dump")
        spec = self.specs["prof_accuracy"]
        bare_rc, bare_out = self.bare(spec, "fp")
        truth = accuracy_truth(bare_out)
        problems, details = [], []
        r = self.prof_run(spec, ".exact", options="sample=1")
        if r["status"] != bare_rc or r["stdout"] != bare_out:
            problems.append("status %d, stdout %s the bare run's" % (
                r["status"], "differs from" if r["stdout"] != bare_out
                else "equal to"))
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        api = [d for d in dumps["seq"] if d["kind"] == "api"]
        if len(api) != 1:
            raise Failure("%d API dumps in %s, expected 1" % (len(api),
                                                               r["outdir"]))
        path = api[0]["path"]
        prof = read_dump(path, problems, 1)
        if prof is None:
            return problems, details
        est = self.reader_estimates(r["binary"], path, prof, ACCURACY_SITES,
                                    problems, tolerance=0)
        for reader, e in sorted(est.items()):
            details.append("%s: %s" % (reader, e))
            for f in ACCURACY_SITES:
                if e[f] != truth[f][0]:
                    problems.append("%s: %s %d bytes, true %d" % (
                        reader, f, e[f], truth[f][0]))
        got = heapprof.by_function(prof, self.symbols(r["binary"]),
                                   ACCURACY_SITES + ("scratch",))
        for f in ACCURACY_SITES + ("scratch",):
            n, b, n2, b2 = got.get(f, [0] * 4)
            tb, tn = truth[f]
            want = (0, 0, tn, tb) if f == "scratch" else (tn, tb, tn, tb)
            if (n, b, n2, b2) != want:
                problems.append("%s: %d: %d [%d: %d] in the dump, expected "
                                "%d: %d [%d: %d]" % ((f, n, b, n2, b2) + want))
        sites = sum(truth[f][0] for f in ACCURACY_SITES)
        if not sites <= prof.total_inuse() <= sites + (1 << 20):
            problems.append("%d bytes in use in all, the sites hold %d" % (
                prof.total_inuse(), sites))
        return problems, details

    def cache_signal(self, sig):
        """A during() for prof_run: once the program's first dump is there
        (so the agent is set up), sends it signal sig."""
        def during(p, outdir):
            deadline = time.time() + 20
            while time.time() < deadline and p.poll() is None:
                names = os.listdir(outdir) if os.path.isdir(outdir) else []
                for m in map(DUMP_NAME.match, names):
                    if m and m.group("kind") in ("every", "interval"):
                        os.kill(int(m.group("pid")), sig)
                        return
                time.sleep(0.01)
            raise Failure("no interval or every dump within 20 s: signal "
                          "%d not sent" % sig)
        return during

    def prof_cache(self):
        """Every trigger at once, under LD_PRELOAD."""
        self.require_export("heaptrail_dump")
        spec = self.specs["prof_cache"]
        r = self.prof_run(spec, "", "interval=128m,every=100ms,peak=1,"
                          "signal=%d,final=1,timeline=50" % CACHE_SIGNAL,
                          during=self.cache_signal(CACHE_SIGNAL))
        return self.check_cache_run(spec, r, 512 * 1024)

    def prof_run_flags(self):
        """The same triggers through heaptrail run's flags."""
        self.require_export("heaptrail_dump")
        spec = self.specs["prof_cache"]
        r = self.prof_run(spec, ".cli", cli=[
            "--sample", "256k", "--interval", "128m", "--peak", "--every",
            "100ms", "--signal", str(CACHE_SIGNAL), "--final",
            "--timeline", "50"],
            during=self.cache_signal(CACHE_SIGNAL))
        return self.check_cache_run(spec, r, 256 * 1024)

    def check_cache_run(self, spec, r, period):
        problems, details = [], []
        bare_rc, bare_out = self.bare(spec, "fp")
        details.append("stderr: " + short(r["stderr"], 2000))
        if r["status"] != bare_rc:
            problems.append("status %d, bare run %d" % (r["status"], bare_rc))
        if r["stdout"] != bare_out:
            problems.append("stdout differs from the bare run: " +
                            first_difference(r["stdout"], bare_out))
        if r["pid"] is None:
            raise Failure("no files of one process in %s: %s" % (
                r["outdir"], sorted(os.listdir(r["outdir"]))))
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        details.append("dumps: " + " ".join(
            os.path.basename(d["path"]) for d in dumps["seq"] + dumps["peak"]))
        kinds = {}
        for d in dumps["seq"]:
            kinds.setdefault(d["kind"], []).append(d)
        for kind, least, most in (("interval", 2, None), ("every", 3, None),
                                  ("signal", 1, 1), ("api", 1, 1),
                                  ("final", 1, 1)):
            n = len(kinds.get(kind, []))
            if n < least or (most is not None and n > most):
                problems.append("%d %s dumps, expected %s" % (
                    n, kind, least if least == most else
                    "at least %d" % least))
        if len(dumps["peak"]) != 1:
            problems.append("%d peak dumps, expected exactly one" %
                            len(dumps["peak"]))
        sym = self.symbols(r["binary"])
        funcs = ("load_config", "cache_grow", "handle_request")
        profs = []
        for d in dumps["seq"] + dumps["peak"]:
            prof = read_dump(d["path"], problems, period)
            if prof is not None:
                profs.append((d, prof, heapprof.by_function(prof, sym,
                                                            funcs)))
        mib = 1 << 20
        # SEQ is time order: the cache never shrinks before the frees,
        # which start after the API dump.
        last = None
        api_seq = min([d["seq"] for d in dumps["seq"] if d["kind"] == "api"]
                      or [None])
        for d, prof, got in profs:
            if d["kind"] in ("final", "peak") or \
                    (api_seq is not None and d["seq"] > api_seq):
                continue
            raw = heapprof.by_function(prof, sym, funcs, raw=True)
            now = raw.get("cache_grow", [0] * 4)[1]
            if last is not None and now < last[1]:
                problems.append("cache_grow shrinks from %d sampled bytes in "
                                "%s to %d in %s: SEQ is not time order" % (
                                    last[1], last[0], now,
                                    os.path.basename(d["path"])))
            last = (os.path.basename(d["path"]), now)
        for d, prof, got in profs:
            name = os.path.basename(d["path"])
            live = {f: got.get(f, [0] * 4)[1] for f in funcs}
            details.append("%s: %s, total %d" % (name, live,
                                                 prof.total_inuse()))
            if d["kind"] == "final":
                if live["cache_grow"] or live["load_config"]:
                    problems.append("%s: %s in use at exit, after the frees"
                                    % (name, live))
            elif d["kind"] == "api":
                for f, want in (("load_config", 96 * mib),
                                ("cache_grow", 50 * mib)):
                    if abs(live[f] - want) > 0.35 * want:
                        problems.append("%s: %s %d bytes (estimated), true "
                                        "%d" % (name, f, live[f], want))
            elif d["kind"] == "peak":
                total = prof.total_inuse()
                if not 0.6 * 146 * mib <= total <= 1.4 * 154 * mib:
                    problems.append("%s: %d bytes in use (estimated); the "
                                    "peak is 146 to 154 MiB" % (name, total))
        timeline = os.path.join(r["outdir"], "heaptrail.%d.timeline" %
                                r["pid"])
        rows = read_timeline(timeline, problems)
        if rows is not None and len(rows) < 3:
            problems.append("%s: %d rows over a run of a second" % (
                os.path.basename(timeline), len(rows)))
        # What grew: the first dump against the API dump (full cache).
        seq = [(d, prof) for d, prof, _ in profs
               if d["kind"] not in ("peak", "final")]
        api = [(d, prof) for d, prof in seq if d["kind"] == "api"]
        if not api or seq[0][0]["kind"] == "api":
            problems.append("no dump before the API dump to compare with")
            return problems, details
        # The earliest dump taken after start-up (load_config) was over:
        # the first in which something was freed (the first request's
        # scratch). A loaded machine can delay start-up past a tick, and a
        # dump in the middle of load_config has it growing too.
        early = [(d, p) for d, p in seq if p.header[:2] != p.header[2:] and
                 d["seq"] < api[0][0]["seq"]] or seq
        (first, fprof), (lastd, lprof) = early[0], api[0]
        index = "inuse_space" if fprof.has_alloc and lprof.has_alloc \
            else None
        if index is None:
            problems.append("%s or %s has in-use and allocated pairs that "
                            "read the same in its header: pprof reads it "
                            "as a different profile type" % (
                                os.path.basename(first["path"]),
                                os.path.basename(lastd["path"])))
        for reader, alone, diff in (
                ("jeprof", lambda: self.jeprof_top(r["binary"],
                                                   lastd["path"]),
                 lambda: self.jeprof_top(r["binary"], lastd["path"],
                                         base=first["path"])),
                ("pprof", lambda: self.pprof_top(r["binary"], lastd["path"],
                                                 index=index),
                 lambda: self.pprof_top(r["binary"], lastd["path"],
                                        base=first["path"], index=index))):
            for what, want, top in (("alone", "load_config", alone),
                                    ("--base", "cache_grow", diff)):
                try:
                    t = top()
                except Failure as e:
                    problems.append(str(e))
                    continue
                head = t["rows"][0][2] if t["rows"] else None
                details.append("%s %s:\n%s" % (reader, what,
                                               "\n".join(t["text"].split(
                                                   "\n")[:8])))
                if head != want:
                    problems.append("%s %s %s: first function %s, expected "
                                    "%s" % (reader, os.path.basename(
                                        lastd["path"]), what, head, want))
        return problems, details

    def prof_timeline(self):
        """prof_cache in exact mode with a 10 ms timeline and a peak dump."""
        spec = self.specs["prof_cache"]
        r = self.prof_run(spec, ".timeline", "sample=1,timeline=10,peak=1")
        problems, details = [], []
        if r["status"] != 0:
            problems.append("status %d" % r["status"])
        mib = 1 << 20
        path = os.path.join(r["outdir"], "heaptrail.%d.timeline" % r["pid"])
        rows = read_timeline(path, problems)
        if rows:
            details.append("%d rows, last %s" % (len(rows), rows[-1]))
            live = [row[1] for row in rows]
            top = max(live)
            details.append("live bytes at most %d" % top)
            if not 0.9 * 146 * mib <= top <= 1.1 * 154 * mib:
                problems.append("live bytes peak at %d, the program's peak "
                                "is 146 MiB (+8 in flight)" % top)
            blocks = max(row[2] for row in rows)
            if not 96 + 400 <= blocks <= 1000:
                problems.append("live blocks peak at %d, expected 496 to "
                                "560 (+ libc's)" % blocks)
            if len(rows) < 20:
                problems.append("%d rows over a run of a second at 10 ms" %
                                len(rows))
            else:
                fifth = len(rows) // 5
                early = sum(live[:fifth]) / fifth
                late = sum(live[-fifth:]) / fifth
                if late - early < 25 * mib:
                    problems.append("live bytes do not grow: %d in the first "
                                    "fifth, %d in the last" % (early, late))
            allocated = rows[-1][3]
            if not 0.9 * 546 * mib <= allocated <= 546 * mib + 16 * mib:
                problems.append("last row: %d bytes allocated, the program "
                                "allocates 546 MiB" % allocated)
            if not 0 < max(row[4] for row in rows) < 1 << 30:
                problems.append("RSS %d: the program touches no block" %
                                max(row[4] for row in rows))
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        if len(dumps["peak"]) != 1:
            problems.append("%d peak dumps, expected 1" % len(dumps["peak"]))
        else:
            prof = read_dump(dumps["peak"][0]["path"], problems, 1)
            if prof is not None:
                got = prof.total_inuse()
                details.append("peak dump: %d bytes" % got)
                if not 146 * mib / 1.1 <= got <= 155 * mib:
                    problems.append("the peak dump holds %d bytes; the peak "
                                    "is 146 MiB (+8 in flight) and the dump "
                                    "is rewritten at each 10 %% of growth" %
                                    got)
        return problems, details

    def prof_transparent(self):
        """The agent's timers (every, timeline) must not reach the program:
        prof_cache's sleeps are not cut short (EINTR) under them."""
        spec = self.specs["prof_cache"]
        bare_rc, bare_out = self.bare(spec, "fp")
        r = self.prof_run(spec, ".transparent", "every=50ms,timeline=10")
        problems = []
        if r["status"] != bare_rc:
            problems.append("status %d, bare run %d" % (r["status"], bare_rc))
        if r["stdout"] != bare_out:
            problems.append("stdout differs from the bare run: " +
                            first_difference(r["stdout"], bare_out))
        for line in stderr_lines(r["stderr"]):
            if "interrupted" in line:
                problems.append("%s (the agent's timer signal interrupts "
                                "the program's system calls)" % line.strip())
        return problems, ["stderr: " + short(r["stderr"], 2000)]

    def prof_api(self):
        for sym in ("heaptrail_dump", "heaptrail_reset",
                    "heaptrail_set_active"):
            self.require_export(sym)
        spec = self.specs["prof_api"]
        explicit = os.path.join(self.prof_work(spec, ""), "explicit.heap")
        r = self.prof_run(spec, "", "sample=1", args=[explicit])
        problems = check_lines(r, API_OUTPUT)
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        api = [d for d in dumps["seq"] if d["kind"] == "api"]
        if len(api) != 1:
            problems.append("%d automatic API dumps, expected 1" % len(api))
        details = []
        if os.path.exists(explicit) and len(api) == 1:
            self.check_api_dumps(r["binary"], explicit, api[0]["path"],
                                 problems, details)
        elif not os.path.exists(explicit):
            problems.append("heaptrail_dump(path) wrote no %s" % explicit)
        return problems, details

    def prof_mallctl(self):
        self.require_export("mallctl")
        spec = self.specs["prof_mallctl"]
        work = self.prof_work(spec, "")
        one, two = (os.path.join(work, f) for f in ("one.heap", "two.heap"))
        r = self.prof_run(spec, "", "sample=1", args=[one, two])
        problems = check_lines(r, MALLCTL_OUTPUT)
        dumps = list_dumps(r["outdir"], problems, r["pid"])
        api = [d for d in dumps["seq"] if d["kind"] == "api"]
        if len(api) != 1:
            problems.append("%d automatic dumps (prof.dump without a name),"
                            " expected 1" % len(api))
        details = []
        for f in (one, two):
            if not os.path.exists(f):
                problems.append("prof.dump wrote no %s" % f)
        if os.path.exists(one) and len(api) == 1:
            self.check_api_dumps(r["binary"], one, api[0]["path"], problems,
                                 details)
        if os.path.exists(two):
            read_dump(two, problems, 1 << 19)
        return problems, details

    def prof_mallctl_jemalloc(self):
        """The program is right for jemalloc: under jemalloc's profiler it
        prints the same and its dumps appear."""
        spec = self.specs["prof_mallctl"]
        binary = self.build_prog(spec, "fp")
        work = fresh_dir(self.prof_work(spec, ".jemalloc"))
        one, two = (os.path.join(work, f) for f in ("one.heap", "two.heap"))
        rc, out, err = run([binary, one, two], cwd=work, env=dict(
            RUN_ENV, LD_PRELOAD=self.tool("jemalloc"),
            MALLOC_CONF="prof:true,lg_prof_sample:0,prof_prefix:" +
                        os.path.join(work, "jeprof")))
        problems = check_lines({"status": rc, "stdout": out, "stderr": err},
                               MALLCTL_OUTPUT)
        details = []
        auto = glob.glob(os.path.join(work, "jeprof.*.heap"))
        if len(auto) != 1:
            problems.append("%d automatic dumps, expected 1" % len(auto))
        if not os.path.exists(two):
            problems.append("no %s" % two)
        else:
            with open(two) as f:
                head = f.readline().strip()
            if head != "heap_v2/524288":
                problems.append("%s: header %r after prof.reset = 19" % (
                    two, head))
        if not os.path.exists(one):
            problems.append("no %s" % one)
        else:
            legacy = one + ".legacy"
            heapprof.from_jemalloc(one, legacy)
            prof = read_dump(legacy, problems, 1)
            if prof is not None:
                got = heapprof.by_function(prof, self.symbols(binary),
                                           API_FUNCS, raw=True)
                details.append("%s: %s" % (one, got))
                if got.get("kept_across_reset", [0])[0] != 3 or \
                        got.get("while_inactive"):
                    problems.append("%s: %s, expected 3 blocks of "
                                    "kept_across_reset and no "
                                    "while_inactive" % (one, got))
        return problems, details

    def prof_api_bare(self):
        rc, out = self.bare_args(self.specs["prof_api"], ["x.heap"])
        want = b"heaptrail: not loaded\ndone: 9 blocks kept and freed\n"
        if (rc, out) != (0, want):
            return ["without the agent: status %d, stdout %r" % (
                rc, short(out))], []
        return [], []

    def prof_mallctl_bare(self):
        rc, out = self.bare_args(self.specs["prof_mallctl"], ["a", "b"])
        want = b"mallctl: not available\ndone: 9 blocks kept and freed\n"
        if (rc, out) != (0, want):
            return ["without the agent: status %d, stdout %r" % (
                rc, short(out))], []
        return [], []

    def check_api_dumps(self, binary, before, after, problems, details):
        """The dump before the reset and the one after (prof_api and
        prof_mallctl, exact mode)."""
        sym = self.symbols(binary)
        for path, want in (
                (before, {"while_inactive": (0, 0, 0, 0),
                          "kept_across_reset": (3, 3000, 3, 3000),
                          "churn_before_reset": (0, 0, 10, 5000),
                          "after_reset": (0, 0, 0, 0)}),
                (after, {"while_inactive": (0, 0, 0, 0),
                         "kept_across_reset": (3, 3000, None, None),
                         "churn_before_reset": (0, 0, 0, 0),
                         "after_reset": (2, 1400, 2, 1400)})):
            prof = read_dump(path, problems, 1)
            if prof is None:
                continue
            got = heapprof.by_function(prof, sym, API_FUNCS, raw=True)
            details.append("%s: %s" % (os.path.basename(path), got))
            for f, w in want.items():
                g = got.get(f, [0] * 4)
                if any(x is not None and x != y for x, y in zip(w, g)):
                    problems.append("%s: %s %d: %d [%d: %d], expected %s" % (
                        os.path.basename(path), f, g[0], g[1], g[2], g[3],
                        "%s: %s [%s: %s]" % tuple(
                            "*" if x is None else x for x in w)))

    def prof_aliases(self):
        """jemalloc's MALLOC_CONF vocabulary in HEAPTRAIL_OPTIONS."""
        self.require_export("heaptrail_dump")
        spec = self.specs["prof_cache"]
        prefix = os.path.join(self.prof_work(spec, ".aliases"), "out", "jp")
        r = self.prof_run(spec, ".aliases", ",".join([
            "prof:true", "prof_active:true", "lg_prof_sample:0",
            "lg_prof_interval:27", "prof_gdump:true", "prof_final:true",
            "prof_leak:true", "prof_accum:true", "prof_prefix:" + prefix]),
            args=["5"])
        problems, details = [], []
        if r["status"] != 0:
            problems.append("status %d" % r["status"])
        # Every name is accepted: the agent says nothing (the program's
        # own note about interrupted sleeps is prof:transparent's).
        said = [l for l in stderr_lines(r["stderr"])
                if not l.startswith("prof_cache:")]
        if said:
            problems.append("stderr: %r" % short("\n".join(said)))
        dumps = list_dumps(r["outdir"], problems, r["pid"], prefix="jp")
        kinds = [d["kind"] for d in dumps["seq"]]
        details.append("dumps: %s" % sorted(os.listdir(r["outdir"])))
        for kind, least in (("interval", 3), ("api", 1), ("final", 1)):
            if kinds.count(kind) < least:
                problems.append("%d jp.PID.SEQ.%s.heap dumps, expected at "
                                "least %d" % (kinds.count(kind), kind, least))
        if len(dumps["peak"]) != 1:
            problems.append("%d jp.PID.peak.heap (prof_gdump), expected 1" %
                            len(dumps["peak"]))
        for d in dumps["seq"] + dumps["peak"]:
            read_dump(d["path"], problems, 1)
        return problems, details

    def prof_bad_options(self):
        """Malformed options: reported once each, ignored, the rest kept."""
        spec = self.specs["exit_status"]
        bare_rc, bare_out = self.bare(spec, "fp")
        bad = ["sample=banana", "nope=1", "every=soon", "lg_prof_sample:x"]
        binary = self.build_prog(spec, "fp")
        work = fresh_dir(os.path.join(self.e2e, "prof", "bad-options"))
        rc, out, err = run([binary], cwd=work, env=dict(
            RUN_ENV, LD_PRELOAD=self.agent(), HEAPTRAIL_OUTPUT=work,
            HEAPTRAIL_OPTIONS=",".join(bad[:1] + ["final=1"] + bad[1:])))
        problems = []
        if rc != bare_rc:
            problems.append("status %d, bare run %d" % (rc, bare_rc))
        if out != bare_out:
            problems.append("stdout differs from the bare run: " +
                            first_difference(out, bare_out))
        lines = stderr_lines(err)
        if len(lines) != len(bad):
            problems.append("%d stderr lines for %d bad options: %r" % (
                len(lines), len(bad), short(err, 400)))
        for opt in bad:
            n = sum(1 for l in lines if opt in l)
            if n != 1:
                problems.append("%d stderr lines name %r" % (n, opt))
        finals = [f for f in os.listdir(work) if f.endswith(".final.heap")]
        if len(finals) != 1:
            problems.append("final=1 between the bad options: %d final "
                            "dumps" % len(finals))
        else:
            read_dump(os.path.join(work, finals[0]), problems, 512 * 1024)
        return problems, []


# ---------------------------------------------------------------- heap dumps

ACCURACY_SITES = ("site_large", "site_medium", "site_small")
API_FUNCS = ("while_inactive", "kept_across_reset", "churn_before_reset",
             "after_reset")
CACHE_SIGNAL = 12   # SIGUSR2: kills the program if the agent ignores it

API_OUTPUT = """heaptrail_set_active(0) -> 1
heaptrail_set_active(1) -> 0
heaptrail_dump(path) -> 0
heaptrail_reset() -> 0
heaptrail_dump(NULL) -> 0
heaptrail_dump(bad path) -> negative
done: 9 blocks kept and freed
"""

MALLCTL_OUTPUT = """opt.prof read -> 0, true
prof.active read -> 0, true
prof.active = false -> 0
prof.active = true -> 0
prof.dump = file -> 0
prof.reset -> 0
prof.dump -> 0
prof.reset = 19 -> 0
prof.lg_sample read -> 0, 19
prof.dump = file -> 0
prof.no_such_name -> ENOENT
done: 9 blocks kept and freed
"""

# PREFIX.PID.SEQ.KIND.heap and PREFIX.PID.peak.heap
DUMP_NAME = re.compile(r"^(?P<prefix>.+?)\.(?P<pid>\d+)\.(?:(?P<seq>\d+)\."
                       r"(?P<kind>[a-z]+)|peak)\.heap$")
DUMP_KINDS = ("interval", "every", "signal", "api", "final")
# jeprof --text --show_bytes: flat flat% sum% cum cum% function
JEPROF_ROW = re.compile(r"^\s*(-?\d+)\s+\S+%\s+\S+%\s+(-?\d+)\s+\S+%\s+"
                        r"(.+?)\s*$")
# pprof -top -unit=B: the same columns, bytes with a "B" (0 without)
PPROF_ROW = re.compile(r"^\s*(-?\d+)B?\s+\S+%\s+\S+%\s+(-?\d+)B?\s+\S+%\s+"
                       r"(.+?)\s*$")


def list_dumps(outdir, problems, pid, prefix="heaptrail"):
    """The dumps in outdir: {"seq": [{"path", "seq", "kind", "pid"}] in
    SEQ order, "peak": [...]}; names that break the scheme (SEQ under 4
    digits or repeated, an unknown kind, another pid, leftovers such as
    temporary files) are problems."""
    seq, peak, seen = [], [], set()
    try:
        names = sorted(os.listdir(outdir))
    except OSError as e:
        problems.append("%s: %s" % (outdir, e.strerror))
        return {"seq": seq, "peak": peak}
    for name in names:
        m = DUMP_NAME.match(name)
        path = os.path.join(outdir, name)
        if not m:
            if not re.match(r"^[^.]+\.\d+\.(leaks|timeline)$", name):
                problems.append("unexpected file %s in the output directory"
                                % name)
            continue
        if m.group("prefix") != prefix:
            problems.append("%s: a dump named %s.*, expected %s.*" % (
                name, m.group("prefix"), prefix))
            continue
        d = {"path": path, "pid": int(m.group("pid")), "kind": "peak",
             "seq": None}
        if pid is not None and d["pid"] != pid:
            problems.append("%s: pid %d, the program's is %d" % (
                name, d["pid"], pid))
        if m.group("seq") is None:
            peak.append(d)
            continue
        d["seq"], d["kind"] = int(m.group("seq")), m.group("kind")
        if len(m.group("seq")) < 4:
            problems.append("%s: SEQ has fewer than 4 digits" % name)
        if d["kind"] not in DUMP_KINDS:
            problems.append("%s: unknown kind %r" % (name, d["kind"]))
        if d["seq"] in seen:
            problems.append("%s: SEQ %d used twice" % (name, d["seq"]))
        seen.add(d["seq"])
        seq.append(d)
    seq.sort(key=lambda d: d["seq"])
    return {"seq": seq, "peak": peak}


def read_dump(path, problems, period=None):
    """heapprof.parse(path), its problems (at most 3) added to problems;
    None when it is not a dump at all."""
    name = os.path.basename(path)
    try:
        prof = heapprof.parse(path)
    except (OSError, heapprof.FormatError) as e:
        problems.append("%s: %s" % (name, e))
        return None
    for p in prof.problems[:3]:
        problems.append("%s: %s" % (name, p))
    if period is not None and prof.period != period:
        problems.append("%s: header says S=%s, expected %d" % (
            name, prof.period, period))
    return prof


def read_timeline(path, problems):
    """[(ms, live bytes, live blocks, allocated bytes, rss)]: a '#' header
    line first, then rows of five integers, time increasing, allocated
    bytes never decreasing; None when the file is missing."""
    name = os.path.basename(path)
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except OSError as e:
        problems.append("%s: %s" % (name, e.strerror))
        return None
    if not lines[0].startswith("#"):
        problems.append("%s: first line %r is not a '#' header" % (
            name, lines[0][:80]))
    rows = []
    for i, line in enumerate(lines[1:], 2):
        if not line.strip() or line.startswith("#"):
            continue
        w = line.split()
        if len(w) != 5 or not all(re.match(r"^\d+$", x) for x in w):
            problems.append("%s:%d: %r is not five integers" % (name, i,
                                                                line[:80]))
            return rows
        row = tuple(int(x) for x in w)
        if rows and row[0] <= rows[-1][0]:
            problems.append("%s:%d: time %d after %d" % (name, i, row[0],
                                                         rows[-1][0]))
        if rows and row[3] < rows[-1][3]:
            problems.append("%s:%d: bytes allocated fall from %d to %d" % (
                name, i, rows[-1][3], row[3]))
        rows.append(row)
    if not rows:
        problems.append("%s: no rows" % name)
    return rows


def accuracy_truth(stdout):
    """prof_accuracy's own account: {site: (bytes, blocks)}."""
    truth = {}
    for line in stdout.decode().split("\n"):
        m = re.match(r"^(\w+) (\d+) bytes in (\d+) blocks", line)
        if m:
            truth[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    if not all(f in truth for f in ACCURACY_SITES + ("scratch",)):
        raise Failure("prof_accuracy printed %r" % short(stdout))
    return truth


def check_shares(label, est, truth, problems, total=True):
    """Each site's share of the three within 3 points of the truth; with
    total, their sum within 5 % of the true bytes."""
    true_sum = sum(truth[f][0] for f in ACCURACY_SITES)
    got_sum = sum(est[f] for f in ACCURACY_SITES)
    if got_sum <= 0:
        problems.append("%s: nothing at the three sites" % label)
        return
    for f in ACCURACY_SITES:
        share = 100.0 * est[f] / got_sum
        want = 100.0 * truth[f][0] / true_sum
        if abs(share - want) > 3:
            problems.append("%s: %s %.1f %% of the sites' bytes, true %.1f %%"
                            % (label, f, share, want))
    if total and abs(got_sum - true_sum) > 0.05 * true_sum:
        problems.append("%s: the sites hold %d bytes (estimated), true %d: "
                        "off by %.1f %%" % (label, got_sum, true_sum,
                                            100.0 * (got_sum / true_sum - 1)))


def check_lines(r, want):
    """A prof_api/prof_mallctl run: status 0 and the expected results."""
    problems = []
    if r["status"] != 0:
        problems.append("status %d: %s" % (r["status"], short(r["stderr"])))
    got = r["stdout"].decode("utf-8", "replace").split("\n")
    exp = want.split("\n")
    for i in range(max(len(got), len(exp))):
        g = got[i] if i < len(got) else "<end>"
        e = exp[i] if i < len(exp) else "<end>"
        if g != e:
            problems.append("said %r, expected %r" % (g, e))
    return problems
