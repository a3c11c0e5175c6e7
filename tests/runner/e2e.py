"""The vg:, ht:, kinds: and delta: tests: each end-to-end program built,
run bare, under valgrind and under heaptrail (see tests/run_tests.py)."""

from .harness import *  # noqa: F401,F403
from .specs import *  # noqa: F401,F403
from .valgrind import *  # noqa: F401,F403


class E2E:
    """Suite's building and running of the programs, and the matrix tests."""

    # -- building

    def bin_dir(self, variant):
        return os.path.join(self.e2e, variant)

    def binary(self, spec, variant):
        return os.path.join(self.bin_dir(variant), spec.name)

    def compile(self, cmd, out, inputs):
        """Runs cmd unless out exists and was built by the same command
        from the same inputs."""
        stamp = out + ".stamp"
        headers = sorted(os.path.join(PROGS, f) for f in os.listdir(PROGS)
                         if f.endswith(".h"))
        key = sha256_files(inputs + headers, json.dumps(
            [cmd, compiler_id(cmd)]))
        if os.path.exists(out) and os.path.exists(stamp):
            with open(stamp) as f:
                if f.read() == key:
                    return
        os.makedirs(os.path.dirname(out), exist_ok=True)
        rc, _, err = run(cmd, env=os.environ, timeout=300)
        if rc != 0:
            raise Failure("build failed: %s\n%s" % (" ".join(cmd),
                                                     short(err, 2000)))
        with open(stamp, "w") as f:
            f.write(key)

    def build_prog(self, spec, variant):
        def do():
            flags = ["-static", "-g", "-O1"] if variant == "static" \
                else VARIANTS[variant]
            out_dir = self.bin_dir(variant)
            for src, lib in spec.libs:
                self.compile([self.cc] + flags + ["-fPIC", "-shared", "-I",
                             PROGS, "-o", os.path.join(out_dir, lib), src],
                             os.path.join(out_dir, lib), [src])
            out = self.binary(spec, variant)
            cc = self.cxx if spec.cxx else self.cc
            self.compile([cc] + flags + ["-Wall", "-I", PROGS, "-o", out,
                                         spec.src] + spec.srcs +
                         ["-pthread"] + spec.link, out,
                         [spec.src] + spec.srcs)
            return out
        return self.builds.get((spec.name, variant), do)

    # -- running

    def command(self, spec, variant):
        return [self.binary(spec, variant)] + spec.args

    def bare(self, spec, variant):
        """The program run on its own: (status, stdout)."""
        def do():
            self.build_prog(spec, variant)
            rc, out, _ = run(self.command(spec, variant), spec.stdin,
                             cwd=self.bin_dir(variant))
            return rc, out
        return self.bares.get((spec.name, variant), do)

    def valgrind(self, spec, variant):
        """Memcheck's view: {"status", "stdout", "procs": [...]}, each proc
        {"pid", "ppid", "args", "in_use": [bytes, blocks], "records"}."""
        def do():
            binary = self.build_prog(spec, variant)
            libs = [os.path.join(self.bin_dir(variant), l)
                    for _, l in spec.libs]
            supps = ["--suppressions=" + f for f in spec.vg_supps]
            key = vg_cache_key([binary] + libs + spec.vg_supps,
                               [supps, spec.args, spec.stdin.decode()])
            cache = os.path.join(self.e2e, "vgcache", key + ".json")
            if self.use_cache and os.path.exists(cache):
                with open(cache) as f:
                    return json.load(f)
            logs = fresh_dir(os.path.join(self.e2e, "vg", variant,
                                          spec.name))
            cmd = VALGRIND + supps + \
                ["--log-file=" + os.path.join(logs, "vg.%p")] + \
                self.command(spec, variant)
            rc, out, _ = run(cmd, spec.stdin, cwd=self.bin_dir(variant),
                             timeout=VG_TIMEOUT)
            result = {"status": rc, "stdout": out.decode("utf-8", "replace"),
                      "procs": parse_vg_logs(logs)}
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            with open(cache + ".tmp", "w") as f:
                json.dump(result, f)
            os.rename(cache + ".tmp", cache)
            return result
        return self.vgs.get((spec.name, variant), do)

    def ht_main_run(self, spec, variant):
        """The heaptrail run that ht:, kinds: and delta: share, with the
        program's suppressions."""
        extra = []
        for f in spec.supps:
            extra += ["--suppressions", f]
        return self.ht_runs.get((spec.name, variant), lambda: (
            self.heaptrail_run(spec, variant, "", extra)))

    def heaptrail_run(self, spec, variant, tag, extra=()):
        """heaptrail run -o OUT --json OUT.json -- PROG; returns
        (status, stdout, stderr, outdir, json path)."""
        if not os.path.exists(self.heaptrail):
            raise Failure("%s not found (build it with make)" %
                          self.heaptrail)
        self.build_prog(spec, variant)
        work = fresh_dir(os.path.join(self.e2e, "ht", variant,
                                      spec.name + tag))
        outdir = os.path.join(work, "out")
        jpath = os.path.join(work, "out.json")
        # HT_E2E_GUARD=SIZE: every run with --guard SIZE, to show the guard
        # changes no answer (docs/testing.md)
        guard = os.environ.get("HT_E2E_GUARD")
        cmd = [self.heaptrail, "run", "-o", outdir, "--json", jpath] + \
            (["--guard", guard] if guard else []) + \
            list(extra) + ["--"] + self.command(spec, variant)
        rc, out, err = run(cmd, spec.stdin, cwd=self.bin_dir(variant))
        with open(os.path.join(work, "stderr"), "wb") as f:
            f.write(err)
        return rc, out, err, outdir, jpath

    # -- the tests

    def test_vg(self, spec, variant):
        problems, details = [], []
        bare_rc, bare_out = self.bare(spec, variant)
        vg = self.valgrind(spec, variant)
        if vg["status"] != bare_rc:
            problems.append("status %d under valgrind, %d bare" %
                            (vg["status"], bare_rc))
        if vg["stdout"].encode() != bare_out:
            problems.append("stdout differs under valgrind: " +
                            first_difference(vg["stdout"].encode(), bare_out))
        root = spec.procs.get(0, {})
        if root.get("exit") is not None and bare_rc != root["exit"]:
            problems.append("exits %d, expected %d" % (bare_rc, root["exit"]))
        procs = with_depth(vg["procs"])
        details.append("valgrind: " + ", ".join(
            "pid %d depth %d args %s: %d bytes in %d blocks" % (
                p["pid"], p["depth"], p["args"], p["in_use"][0],
                p["in_use"][1]) for p in procs))
        if len(procs) != len(spec.procs):
            problems.append("%d processes under valgrind, expected %d" %
                            (len(procs), len(spec.procs)))
        for depth, want in sorted(spec.procs.items()):
            match = [p for p in procs if p["depth"] == depth and
                     (want["args"] is None or p["args"] == want["args"])]
            if len(match) != 1:
                problems.append("depth %d: %d matching processes" %
                                (depth, len(match)))
                continue
            p = match[0]
            label = "depth %d" % depth
            if want["in_use"] and tuple(p["in_use"]) != want["in_use"]:
                problems.append("%s: in use %d bytes in %d blocks, expected"
                                " %d in %d" % ((label,) + tuple(p["in_use"])
                                               + want["in_use"]))
            details.append("%s: %s" % (label, show_kinds(p["kinds"])))
            if depth in spec.kinds:
                if p["kinds"] is None:
                    problems.append("%s: no LEAK SUMMARY" % label)
                else:
                    for kind in SUMMARY_KINDS:
                        got = tuple(p["kinds"].get(kind, (0, 0)))
                        exp = spec.kinds[depth].get(kind, (0, 0))
                        if got != exp:
                            problems.append(
                                "%s: %s %d bytes in %d blocks, expected %d"
                                " in %d" % ((label, kind) + got + exp))
            if depth in spec.heuristics and \
                    p["heuristics"] != {k: list(v) for k, v in
                                        spec.heuristics[depth].items()}:
                problems.append("%s: reachable via heuristic %s, expected "
                                "%s" % (label, p["heuristics"],
                                        spec.heuristics[depth]))
            check_records(label, p["records"], spec, depth, problems)
            if depth == 0:
                check_checks("valgrind", p["checks"], spec, problems)
        return problems, details

    def test_ht(self, spec, variant):
        problems, details = [], []
        bare_rc, bare_out = self.bare(spec, variant)
        vg = self.valgrind(spec, variant)
        rc, out, err, _, jpath = self.ht_main_run(spec, variant)
        details.append("heaptrail stderr:\n" + short(err, 4000))
        text = err.decode("utf-8", "replace").split("\n")
        for regex in spec.ht_stderr:
            if not any(re.search(regex, l, re.I) for l in text):
                problems.append("no line of heaptrail's report matches %r" %
                                regex)
        if rc != bare_rc:
            problems.append("status %d, bare run %d" % (rc, bare_rc))
        if out != bare_out:
            problems.append("stdout differs from the bare run: " +
                            first_difference(out, bare_out))
        ht_procs, pairs = match_procs(vg, load_json_objects(jpath),
                                      problems)
        matched_pids = {h["pid"] for _, h, _ in pairs}
        matched = [h for _, h, _ in pairs]
        for v, h, label in pairs:
            check_process(label, h["obj"], v, spec, problems)
            t = h["obj"].get("totals") or {}
            details.append("%s: allocs/frees/bytes allocated: heaptrail %s/"
                           "%s/%s, valgrind %s" % (label, t.get("allocs"),
                                                   t.get("frees"),
                                                   t.get("bytes_allocated"),
                                                   "/".join(map(str,
                                                       v["usage"] or []))))
        for h in ht_procs:
            if h["pid"] in matched_pids and not any(h is m for m in matched):
                # The image a process had before it exec'd: valgrind says
                # nothing about it (no exit), so there is nothing to check.
                details.append("pre-exec image pid %s %s" % (h["pid"],
                                                             h["args"]))
            elif h["pid"] not in matched_pids:
                problems.append("unexpected heaptrail process pid %s %s" %
                                (h["pid"], h["args"]))
        # The root process's exit is the program's exit.
        roots = [h for h in matched if h["depth"] == 0]
        # (a negative status: killed by that signal)
        want_exit = {"signal": -bare_rc} if bare_rc < 0 else {"status": bare_rc}
        for h in roots:
            if h["obj"].get("exit") != want_exit:
                problems.append("root exit %s, bare run status %d" %
                                (h["obj"].get("exit"), bare_rc))
        return problems, details

    def test_kinds(self, spec, variant):
        """Per process, heaptrail's four kinds (and suppressed) against
        valgrind's LEAK SUMMARY, and the @leak checks that name a kind."""
        problems, details = [], []
        vg = self.valgrind(spec, variant)
        _, _, _, _, jpath = self.ht_main_run(spec, variant)
        objs = load_json_objects(jpath)
        _, pairs = match_procs(vg, objs, problems)
        for v, h, label in pairs:
            o = h["obj"]
            if not classified(o):
                problems.append("%s: not classified: summary %s" % (
                    label, sorted((o.get("summary") or {}).keys())))
                continue
            if v["kinds"] is None:
                problems.append("%s: valgrind printed no LEAK SUMMARY" %
                                label)
                continue
            got = ht_kinds(o)
            want = {k: list(v["kinds"].get(k, [0, 0]))
                    for k in SUMMARY_KINDS}
            details.append("%s: heaptrail %s" % (label, show_kinds(got)))
            details.append("%s: valgrind  %s" % (label, show_kinds(want)))
            ht_dtv = dtv_bytes(records_of(o))
            vg_dtv = dtv_bytes(v["records"])
            for kind in SUMMARY_KINDS:
                gb, gn = got[kind]
                wb, wn = want[kind]
                if gn != wn or gb - ht_dtv.get(kind, 0) != \
                        wb - vg_dtv.get(kind, 0):
                    dtv = ""
                    if ht_dtv.get(kind) or vg_dtv.get(kind):
                        dtv = " (DTV bytes not compared: heaptrail %d, " \
                              "valgrind %d)" % (ht_dtv.get(kind, 0),
                                                vg_dtv.get(kind, 0))
                    problems.append("%s: %s %d bytes in %d blocks, valgrind"
                                    " %d in %d%s" % (label, kind, gb, gn, wb,
                                                     wn, dtv))
            # The records hold the summary, kind by kind.
            rsum = {}
            for r in records_of(o):
                if r["kind"] not in KINDS:
                    problems.append("%s: a record of kind %r" %
                                    (label, r["kind"]))
                    continue
                b, n = rsum.get(r["kind"], (0, 0))
                rsum[r["kind"]] = (b + r["bytes"], n + r["blocks"])
            for kind in KINDS:
                if rsum.get(kind, (0, 0)) != tuple(got[kind]):
                    problems.append("%s: %s records add up to %d bytes in %d"
                                    " blocks, the summary says %d in %d" % (
                                        (label, kind) + rsum.get(kind, (0, 0))
                                        + tuple(got[kind])))
            check_records(label, records_of(o), spec, v["depth"], problems,
                          which="kinds", dtv_exact=False)
        return problems, details

    def test_delta(self, spec, variant):
        """The leak checks the program asked for while it ran: one file
        heaptrail.PID.check-N.leaks each, read with report --json."""
        problems, details = [], []
        vg_roots = [p for p in with_depth(self.valgrind(spec, variant)
                                          ["procs"]) if p["depth"] == 0]
        vg_checks = vg_roots[0]["checks"] if len(vg_roots) == 1 else []
        _, _, _, outdir, jpath = self.ht_main_run(spec, variant)
        roots = [o for o in with_depth([dict(o) for o in
                                        load_json_objects(jpath)])
                 if o["depth"] == 0]
        if len(roots) != 1:
            raise Failure("%d root processes in the JSON report" %
                          len(roots))
        pid = roots[0]["pid"]
        nchecks = max(n for n, _, _, _, _ in spec.checks)
        pattern = re.compile(r"^heaptrail\.%d\.check-(\d+)\.leaks$" % pid)
        found = sorted(int(m.group(1)) for m in
                       map(pattern.match, os.listdir(outdir)) if m)
        if found != list(range(1, nchecks + 1)):
            problems.append("check files %s in %s, expected 1 to %d" % (
                found, outdir, nchecks))
        checks = []
        for n in range(1, nchecks + 1):
            path = os.path.join(outdir, "heaptrail.%d.check-%d.leaks" %
                                (pid, n))
            if not os.path.exists(path):
                checks.append(None)
                continue
            rc, out, err = run([self.heaptrail, "report", "--json", path])
            if rc != 0:
                problems.append("report --json %s: status %d: %s" % (
                    os.path.basename(path), rc, short(err)))
                checks.append(None)
                continue
            try:
                objs = wrap(json.loads(out))
            except ValueError as e:
                raise Failure("report --json %s: not JSON: %s" % (path, e))
            if len(objs) != 1:
                problems.append("%s: %d processes" % (path, len(objs)))
            details.append("check %d: %s" % (n, short(out, 4000)))
            # The summary holds every block at the time of the check, as
            # valgrind's LEAK SUMMARY does, not only the records shown.
            if n <= len(vg_checks):
                got, want = ht_kinds(objs[0]), vg_checks[n - 1]["kinds"]
                for kind in SUMMARY_KINDS:
                    if tuple(got[kind]) != tuple(want.get(kind, (0, 0))):
                        problems.append("check %d: summary %s %d bytes in %d"
                                        " blocks, valgrind %d in %d" % (
                                            (n, kind) + tuple(got[kind]) +
                                            tuple(want.get(kind, (0, 0)))))
            recs = []
            for r in records_of(objs[0]):
                inc = record_increase(r)
                if inc is None:
                    problems.append("check %d: a %s record without its "
                                    "increase" % (n, r["kind"]))
                    inc = (0, 0)
                recs.append(dict(r, increase={"bytes": inc[0],
                                              "blocks": inc[1]}))
            checks.append({"records": recs})
        check_checks("heaptrail", checks, spec, problems)
        return problems, details


def check_process(label, obj, vg, spec, problems):
    """One heaptrail process object against valgrind's view of it."""
    if obj.get("heaptrail") != 1:
        problems.append("%s: \"heaptrail\" is %r, expected 1" %
                        (label, obj.get("heaptrail")))
    totals = obj.get("totals") or {}
    # valgrind's "total heap usage": N allocs, M frees (a realloc to 0 is a
    # free, a failed allocation is nothing)
    usage = (totals.get("allocs"), totals.get("frees"))
    if not spec.usage_varies and vg.get("usage") and usage != tuple(vg["usage"][:2]):
        problems.append("%s: %s allocs, %s frees, valgrind %d allocs, %d frees" %
                        ((label,) + usage + tuple(vg["usage"][:2])))
    got = (totals.get("in_use_bytes"), totals.get("in_use_blocks"))
    records = obj.get("records") or []
    ht_dtv = sum(dtv_bytes(records_of(obj)).values())
    vg_dtv = sum(dtv_bytes(vg["records"]).values())
    if got[1] != vg["in_use"][1] or \
            got[0] is None or got[0] - ht_dtv != vg["in_use"][0] - vg_dtv:
        dtv = ""
        if ht_dtv or vg_dtv:
            dtv = " (DTV bytes not compared: heaptrail %d, valgrind %d)" % (
                ht_dtv, vg_dtv)
        problems.append("%s: in use %s bytes in %s blocks, valgrind %d in %d"
                        "%s" % ((label,) + got + tuple(vg["in_use"]) +
                                (dtv,)))
    summary = obj.get("summary") or {}
    if classified(obj):
        # The four kinds and what was suppressed are all that is in use.
        kinds = ht_kinds(obj)
        ssum = (sum(b for b, _ in kinds.values()),
                sum(n for _, n in kinds.values()))
        shown = (ssum[0] - kinds["suppressed"][0],
                 ssum[1] - kinds["suppressed"][1])
        what = "the four kinds and suppressed"
    else:
        ssum = ((summary.get("in_use") or {}).get("bytes"),
                (summary.get("in_use") or {}).get("blocks"))
        shown = got
        what = "summary.in_use"
    if ssum != got:
        problems.append("%s: %s add up to %s bytes in %s blocks, totals say"
                        " %s in %s" % ((label, what) + ssum + got))
    rsum = (sum(r.get("bytes", 0) for r in records),
            sum(r.get("blocks", 0) for r in records))
    if rsum != shown:
        problems.append("%s: records add up to %d bytes in %d blocks, "
                        "expected %s in %s" % ((label,) + rsum + shown))
    # Blocks from one stack are one record (valgrind merges them too).
    seen = {}
    for r in records:
        key = (r.get("kind"), tuple(f.get("pc") for f in r.get("stack") or []))
        seen[key] = seen.get(key, 0) + 1
    dups = sum(n - 1 for n in seen.values() if n > 1)
    if dups:
        problems.append("%s: %d records repeat another record's kind and "
                        "stack instead of being merged" % (label, dups))
    depth = vg["depth"]
    want = spec.procs.get(depth)
    if want and want["exit"] is not None:
        # exit=-N: killed by signal N
        want_exit = {"signal": -want["exit"]} if want["exit"] < 0 else \
            {"status": want["exit"]}
        if obj.get("exit") != want_exit:
            problems.append("%s: exit %s, expected %s" %
                            (label, obj.get("exit"), want_exit))
    check_records(label, records_of(obj), spec, depth, problems,
                  which="plain", dtv_exact=False)


def classified(obj):
    """Whether a process object carries the four kinds (its summary has
    more than "in_use")."""
    return all(k in (obj.get("summary") or {}) for k in KINDS)


def ht_kinds(obj):
    summary = obj.get("summary") or {}
    return {k: [(summary.get(k) or {}).get("bytes", 0),
                (summary.get(k) or {}).get("blocks", 0)]
            for k in SUMMARY_KINDS}


def show_kinds(kinds):
    if not kinds:
        return "no LEAK SUMMARY"
    return ", ".join("%s %d/%d" % ((k,) + tuple(kinds.get(k, (0, 0))))
                     for k in SUMMARY_KINDS)


def records_of(obj):
    return [dict(r, bytes=r.get("bytes", 0), blocks=r.get("blocks", 0),
                 stack=r.get("stack") or [], kind=r.get("kind"))
            for r in obj.get("records") or []]


def dtv_bytes(records):
    """{kind: bytes} of glibc's DTV blocks (see the module comment)."""
    out = {}
    for r in records:
        if any(base_name(f.get("function") or "") in DTV_FUNCS
               for f in r["stack"]):
            out[r["kind"]] = out.get(r["kind"], 0) + r["bytes"]
    return out


def record_increase(r):
    """(bytes, blocks) a record of an "increased" leak check grew by, from
    its "increase": {"bytes", "blocks"}; None when it has none."""
    inc = r.get("increase")
    if isinstance(inc, dict) and "bytes" in inc and "blocks" in inc:
        return inc["bytes"], inc["blocks"]
    return None


def check_checks(label, checks, spec, problems):
    """The @check directives against the leak checks seen ([{"records",
    "increase"?}] in order, None for one that could not be read)."""
    for n, kind, want_b, want_n, func in spec.checks:
        if n > len(checks):
            problems.append("%s: %d leak checks, expected at least %d" % (
                label, len(checks), n))
            continue
        c = checks[n - 1]
        if c is None:
            continue
        recs = [r for r in c["records"] if r["kind"] == kind]
        if "increase" in c and c["increase"]:    # valgrind's summary
            got = tuple(c["increase"].get(kind, (0, 0)))
        else:
            got = (sum(r["increase"]["bytes"] for r in recs),
                   sum(r["increase"]["blocks"] for r in recs))
        if got != (want_b, want_n):
            problems.append("%s: check %d: %s increased by %d bytes in %d "
                            "blocks, expected %d in %d" % (
                                label, n, kind, got[0], got[1], want_b,
                                want_n))
        if func:
            others = [r for r in recs if not names([r], func)]
            if others or not recs:
                problems.append("%s: check %d: %d %s records, %d without %s"
                                % (label, n, len(recs), kind, len(others),
                                   func))


def match_procs(vg, objs, problems):
    """Pairs valgrind's processes with heaptrail's process objects by
    depth and arguments: (heaptrail's, [(vg proc, ht proc, label)])."""
    ht_procs = with_depth([{"pid": o.get("pid"), "ppid": o.get("ppid"),
                            "args": list(o.get("command") or [])[1:],
                            "obj": o} for o in objs])
    pairs = []
    for v in with_depth(vg["procs"]):
        label = " ".join(["depth %d" % v["depth"]] + v["args"])
        cands = [h for h in ht_procs if h["depth"] == v["depth"]
                 and h["args"] == v["args"]]
        if len(cands) != 1:
            problems.append("%s: %d heaptrail processes match (pids %s)"
                            % (label, len(cands),
                               [h["pid"] for h in ht_procs]))
            continue
        pairs.append((v, cands[0], label))
    return ht_procs, pairs


def wrap(data):
    return data if isinstance(data, list) else [data]


def load_json_objects(path):
    try:
        with open(path) as f:
            objs = wrap(json.load(f))
    except OSError as e:
        raise Failure("no JSON from heaptrail: %s: %s" % (path, e.strerror))
    except ValueError as e:
        raise Failure("%s: not JSON: %s" % (path, e))
    if "unclassified" in FAKE:
        objs = [unclassify(o) for o in objs]
    return objs


def unclassify(obj):
    """The process object of a heaptrail that does not classify: its
    summary has only "in_use", its records no kind (RUN_TESTS_FAKE=
    unclassified, for the meta: test that the kinds: tests then fail)."""
    if not isinstance(obj, dict):
        return obj
    summary = obj.get("summary") or {}
    obj = dict(obj, summary={k: v for k, v in summary.items()
                             if k == "in_use"})
    obj["records"] = [{k: v for k, v in r.items() if k != "kind"}
                      for r in obj.get("records") or []]
    return obj


def with_depth(procs):
    """Adds "depth": how many ancestors of a process are in the list.
    An exec keeps the pid, so a pid may appear twice; depth follows ppid
    only."""
    pids = {p["pid"]: p for p in procs}

    def depth(p, seen=()):
        parent = pids.get(p["ppid"])
        if parent is None or parent is p or p["pid"] in seen:
            return 0
        return 1 + depth(parent, seen + (p["pid"],))
    for p in procs:
        p["depth"] = depth(p)
    return procs
