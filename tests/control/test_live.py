"""live: the live endpoint, `heaptrail run --http ADDR` (issue 16).

Each test runs tests/progs/live_sites.c (a flat site of 100 x
1000 bytes, a site that grows by 4096 bytes every 20 ms while told to)
under `heaptrail run --http 127.0.0.1:PORT --signal 12`, and talks to
the endpoint with the real clients.

    live:pprof-top     Google's pprof fetches /debug/pprof/heap from the
                       running program; its -top (inuse_space and
                       alloc_space, exact mode) equals `heaptrail top
                       --bytes` on a dump the program writes on SIGUSR2
                       at the same moment (the program is idle)
    live:delta         /debug/pprof/heap?seconds=2 while grow_site grows:
                       pprof shows grow_site at 4096 bytes a block (its
                       in-use space is 4096 x its in-use objects, at least
                       20 blocks) and no flat_site (which did not change);
                       /metrics answers within 1 s meanwhile
    live:endpoints     the index page links every endpoint; /cmdline is
                       the program's argv joined by NULs; ?debug=1 is a
                       heap dump pprof reads; /allocs' default sample type
                       is alloc_space, /heap's inuse_space; 404 and 405
    live:promtool      `promtool check metrics` accepts /metrics, whose
                       live bytes equal the dump's in-use total, whose
                       flat_site series is 100000 (by construction) and
                       which gives the agent's own mappings (>= 4 KiB)
    live:prometheus    a real Prometheus (Debian's), scraping every 1 s,
                       returns heaptrail_live_bytes and grow_site's series
                       rising while the program grows, and flat_site's
                       series flat at 100000; every query of
                       contrib/grafana/heaptrail.json runs on it, with data
                       (but the growing sites', which need --every)
    live:symbol        pprof -symbolize=remote on ?debug=1 (a dump of bare
                       addresses) asks /debug/pprof/symbol for the names and
                       shows flat_site's 100000 bytes by name
    live:leaks         /debug/heaptrail/leaks after the program loses a block
                       of 777 bytes in lose_site: JSON with that definitely
                       lost record; the program runs on
    live:growth        --every 100ms while grow_site grows: the growth page
                       ranks grow_site growing and not flat_site, in
                       `heaptrail growth`'s words (units, ±, the sampling
                       note), and
                       /metrics has grow_site's growing series only
    live:hostile       while grow_site grows: 300 fuzzed requests (random
                       bytes, bad request lines, huge paths and headers, bad
                       content-lengths), 1 MiB of headers (431), 20 clients
                       that never read, 10 that send a byte a second, then
                       1000 connections held open at once, during which a
                       new request is still answered; afterwards /metrics
                       and /debug/pprof/heap answer, the program's output
                       is whole and it grew at least half as often as
                       its 20 ms period allows
    live:serve         `heaptrail serve --http unix:PATH PID` for a program
                       started with the agent preloaded (no `run`): the
                       socket is 0600, /metrics over it shows flat_site's
                       100000 bytes, SIGTERM ends serve (status 0, socket
                       removed) and the program runs on to its normal end
    live:attach        `heaptrail attach --sample 1 --http ADDR --for 6s PID`
                       on the program started bare: while attached, /metrics
                       shows grow_site rising between two scrapes, and no
                       flat_site (allocated before the attach); the endpoint
                       closes when --for ends; the program's output is whole
    live:push          --push to a receiver written here, every 300 ms: each
                       POST is /ingest with name, from <= until (each from
                       the until before, none in the future), spyName and
                       no format=, a multipart form as Go's mime/multipart
                       (Pyroscope's ingest handler) reads it: the files
                       profile (a gzip'd pprof with the four sample types),
                       sample_type_config (alloc_* cumulative) and, from the
                       second push on, prev_profile equal to the profile
                       pushed before; grow_site's in-use space rises from
                       the first push to the last
    live:push-down     --push to a closed port, and to one that accepts and
                       never answers: the program keeps its output and pace,
                       the failure is said once, heaptrail ends within 3 s
                       of the program
    live:quiet         tests/progs/live_quiet.c: a thread in nanosleep
                       and one that runs; ten scrapes of /metrics answer and
                       none cuts a sleep short (the request goes to the
                       running thread; sent to the process, the kernel picks
                       the sleeping main thread and nanosleep fails EINTR)
    live:remote        --http on a non-loopback address is refused
                       without --http-allow-remote (exit 2, program not run)

pprof, prometheus and promtool missing: those tests skip.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_tests  # noqa: E402
from run_tests import Failure, Skip  # noqa: E402
import test_pprof  # noqa: E402

PROG_SRC = os.path.join(os.path.dirname(HERE), "progs", "live_sites.c")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


_build_lock = threading.Lock()


def build_prog(suite):
    work = os.path.join(suite.build, "e2e", "analyze")
    os.makedirs(work, exist_ok=True)
    prog = os.path.join(work, "live_sites")
    with _build_lock:
        if not os.path.exists(prog) or os.path.getmtime(prog) < os.path.getmtime(PROG_SRC):
            subprocess.run([suite.cc, "-g", "-O1", "-fno-omit-frame-pointer", "-o",
                            prog + ".tmp", PROG_SRC], check=True)
            os.rename(prog + ".tmp", prog)
    return prog


def http(url, data=None, timeout=30):
    """(status, body bytes, content type)."""
    req = urllib.request.Request(url, data=data)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


class Live:
    """The program under `heaptrail run --http`, driven through stdin."""

    def __init__(self, suite, tag, extra=()):
        self.suite = suite
        self.prog = build_prog(suite)
        self.work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "live", tag))
        self.out = os.path.join(self.work, "out")
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.errf = open(os.path.join(self.work, "stderr"), "wb")
        self.p = subprocess.Popen(
            [suite.heaptrail, "run", "--signal", "12", "-o", self.out,
             "--http", "127.0.0.1:%d" % self.port] + list(extra) + ["--", self.prog],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errf,
            env=run_tests.RUN_ENV)
        line = self.p.stdout.readline()
        if line != b"ready\n":
            self.close()
            raise Failure("live_sites said %r, not ready: %s" % (line, self.stderr()))
        self.pid = None
        for _ in range(200):
            m = re.search(r"live endpoint for process (\d+)", self.stderr())
            if m:
                self.pid = int(m.group(1))
                break
            time.sleep(0.05)
        if not self.pid:
            self.close()
            raise Failure("no endpoint line on heaptrail's stderr: %s" % self.stderr())

    def stderr(self):
        with open(os.path.join(self.work, "stderr"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def say(self, cmd):
        self.p.stdin.write(cmd.encode() + b"\n")
        self.p.stdin.flush()

    def get(self, path, **kw):
        return http(self.base + path, **kw)

    def signal_dump(self):
        """The dump the agent writes on SIGUSR2 (the `signal` trigger)."""
        before = set(os.listdir(self.out))
        os.kill(self.pid, signal.SIGUSR2)
        for _ in range(400):
            new = [f for f in os.listdir(self.out)
                   if f not in before and f.endswith(".signal.heap")]
            if new:
                return os.path.join(self.out, new[0])
            time.sleep(0.025)
        raise Failure("no signal dump in %s" % self.out)

    def close(self):
        """Quits the program; returns (its stdout, heaptrail's status)."""
        try:
            self.say("quit")
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        out = self.p.stdout.read()
        self.p.stdout.close()
        self.errf.close()
        return out, self.p.returncode

    def close_checked(self, problems, grew=None):
        """close(), and the program's own output as it would be bare:
        "grew N" (N == grew when given) and status 0."""
        out, rc = self.close()
        want = b"grew %d\n" % grew if grew is not None else None
        if rc != 0 or (out != want if want else not out.startswith(b"grew ")):
            problems.append("the program's output %r, status %d" % (out, rc))


def pprof_url_top(suite, live, path, value, work):
    tool = test_pprof.pprof_tool(suite)
    env = dict(run_tests.RUN_ENV, PPROF_TMPDIR=work, PPROF_BINARY_PATH="/nonexistent",
               HOME=work)
    args = [tool, "-symbolize=none", "-top", "-unit=B", "-nodefraction=0",
            "-edgefraction=0", "-nodecount=1000000", "-sample_index=" + value,
            live.base + path]
    rc, out, err = run_tests.run(args, env=env, timeout=120, cwd=work)
    text = out.decode("utf-8", "replace")
    if rc != 0:
        raise Failure("pprof %s: status %d: %s" % (path, rc, run_tests.short(err + out, 300)))
    tm = re.search(r" of (-?\d+)B total", text)
    if not tm:
        raise Failure("pprof -top: no total in %s" % run_tests.short(text))
    rows = []
    for m in map(run_tests.PPROF_ROW.match, text.split("\n")):
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), re.sub(r" \(inline\)$", "", m.group(3))))
    return int(tm.group(1)), rows, text


def test_pprof_top(suite):
    test_pprof.pprof_tool(suite)
    live = Live(suite, "pprof-top")
    problems, logs = [], []
    try:
        for value in ("inuse_space", "alloc_space"):
            theirs = pprof_url_top(suite, live, "/debug/pprof/heap", value, live.work)
            dump = live.signal_dump()
            ours = test_pprof.heaptrail_top(suite, dump, value)
            logs += [theirs[2], ours[2]]
            p = test_pprof.compare_tops(ours, theirs, [])
            problems += ["%s: %s" % (value, x) for x in p]
            if not any(n == "flat_site" and f == 100000 for f, _, n in theirs[1]) and \
                    value == "inuse_space":
                problems.append("pprof does not show flat_site's 100000 bytes")
    finally:
        live.close_checked(problems, grew=0)
    return problems, logs


def test_delta(suite):
    test_pprof.pprof_tool(suite)
    live = Live(suite, "delta")
    problems, logs = [], []
    try:
        live.say("go")
        time.sleep(0.3)
        t0 = time.time()
        res = {}

        def fetch():
            res["delta"] = live.get("/debug/pprof/heap?seconds=2")
        th = threading.Thread(target=fetch)
        th.start()
        # the endpoint answers others while the delta waits
        time.sleep(0.5)
        t1 = time.time()
        st, _, _ = live.get("/metrics")
        other = time.time() - t1
        th.join()
        took = time.time() - t0
        live.say("stop")
        if st != 200 or other > 1:
            problems.append("/metrics during the delta: status %d after %.2f s" % (st, other))
        st, body, _ = res["delta"]
        if st != 200:
            raise Failure("?seconds=2: status %d: %r" % (st, body[:300]))
        if took < 2:
            problems.append("?seconds=2 answered after %.2f s" % took)
        pb = os.path.join(live.work, "delta.pb.gz")
        with open(pb, "wb") as f:
            f.write(body)
        rows = {}
        for value in ("inuse_space", "inuse_objects"):
            text = test_pprof.pprof(suite, "-top", "-unit=B", "-nodefraction=0",
                                    "-nodecount=1000", "-sample_index=" + value, pb,
                                    cwd=live.work)
            logs.append(text)
            rows[value] = {m.group(3): int(m.group(1))
                           for m in map(run_tests.PPROF_ROW.match, text.split("\n")) if m}
        space = rows["inuse_space"].get("grow_site", 0)
        objs = rows["inuse_objects"].get("grow_site", 0)
        if objs < 20 or space != 4096 * objs:
            problems.append("grow_site in the delta: %d bytes in %d objects (want 4096 a "
                            "block, at least 20)" % (space, objs))
        if "flat_site" in rows["inuse_space"]:
            problems.append("flat_site, which did not change, is in the delta: %d" %
                            rows["inuse_space"]["flat_site"])
    finally:
        live.close_checked(problems)
    return problems, logs


def test_endpoints(suite):
    live = Live(suite, "endpoints")
    problems, logs = [], []
    try:
        st, body, _ = live.get("/debug/pprof/")
        for link in ("heap", "allocs", "cmdline", "/metrics"):
            if st != 200 or ('href="%s' % link not in body.decode()
                             and 'href="/debug/pprof/%s' % link not in body.decode()):
                problems.append("index page (status %d) lacks a link to %s" % (st, link))
        st, body, _ = live.get("/debug/pprof/cmdline")
        if st != 200 or body != live.prog.encode():
            problems.append("cmdline: %d %r, want %r" % (st, body, live.prog))
        st, body, _ = live.get("/debug/pprof/heap?debug=1")
        txt = os.path.join(live.work, "debug1.heap")
        with open(txt, "wb") as f:
            f.write(body)
        if st != 200 or not body.startswith(b"heap profile:"):
            problems.append("?debug=1: %d %r" % (st, body[:80]))
        else:
            total, rows, text = test_pprof.heaptrail_top(suite, txt, "inuse_space")
            logs.append(text)
            if not any(n == "flat_site" and f == 100000 for f, _, n in rows):
                problems.append("?debug=1's dump has no flat_site of 100000 bytes")
        for path, want in (("/debug/pprof/heap", "inuse_space"),
                           ("/debug/pprof/allocs", "alloc_space")):
            st, body, ctype = live.get(path)
            pb = os.path.join(live.work, path.rsplit("/", 1)[1] + ".pb.gz")
            with open(pb, "wb") as f:
                f.write(body)
            if st != 200:
                problems.append("%s: status %d" % (path, st))
                continue
            prof = test_pprof.decode(pb)
            got = prof["strings"][prof["default_sample_type"]]
            if got != want:
                problems.append("%s: default sample type %s, want %s" % (path, got, want))
            if not any(m.get("build_id") for m in prof["mapping"]):
                problems.append("%s: no mapping carries a build-id" % path)
        st, _, _ = live.get("/nothing-here")
        if st != 404:
            problems.append("/nothing-here: status %d, want 404" % st)
        st, _, _ = live.get("/debug/pprof/heap", data=b"x")
        if st != 405:
            problems.append("POST /debug/pprof/heap: status %d, want 405" % st)
    finally:
        live.close_checked(problems, grew=0)
    return problems, logs


def metric_values(text):
    vals = {}
    for line in text.split("\n"):
        if line and not line.startswith("#"):
            name, v = line.rsplit(" ", 1)
            vals[name] = float(v)
    return vals


def test_promtool(suite):
    promtool = shutil.which("promtool")
    if not promtool:
        raise Skip("promtool not installed (Debian's prometheus package)")
    live = Live(suite, "promtool")
    problems, logs = [], []
    try:
        st, body, ctype = live.get("/metrics")
        dump = live.signal_dump()
        text = body.decode()
        logs.append(text)
        if st != 200 or not ctype.startswith("text/plain; version=0.0.4"):
            problems.append("/metrics: status %d, type %r" % (st, ctype))
        r = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True)
        if r.returncode != 0:
            problems.append("promtool check metrics: %s" % (r.stdout + r.stderr).decode())
        vals = metric_values(text)
        total, rows, toptext = test_pprof.heaptrail_top(suite, dump, "inuse_space")
        logs.append(toptext)
        if vals.get("heaptrail_live_bytes") != total:
            problems.append("heaptrail_live_bytes %s, the dump's total %d" % (
                vals.get("heaptrail_live_bytes"), total))
        if vals.get('heaptrail_site_live_bytes{site="flat_site"}') != 100000:
            problems.append("flat_site's series: %s, want 100000" %
                            vals.get('heaptrail_site_live_bytes{site="flat_site"}'))
        agent = vals.get("heaptrail_agent_mapped_bytes", 0)
        if not 4096 <= agent < 1 << 40:
            problems.append("the agent's own memory: %s" % agent)
        if vals.get("heaptrail_sampling_interval_bytes") != 1:
            problems.append("sampling interval %s, want 1 (exact mode)" %
                            vals.get("heaptrail_sampling_interval_bytes"))
    finally:
        live.close_checked(problems, grew=0)
    return problems, logs


def prom_query(base, query, start, end):
    url = "%s/api/v1/query_range?%s" % (base, urllib.parse.urlencode(
        {"query": query, "start": "%.3f" % start, "end": "%.3f" % end, "step": "1"}))
    st, body, _ = http(url)
    if st != 200:
        raise Failure("prometheus %s: %d %r" % (query, st, body[:300]))
    res = json.loads(body)["data"]["result"]
    return [float(v) for _, v in res[0]["values"]] if res else []


def test_prometheus(suite):
    prom = shutil.which("prometheus")
    if not prom:
        raise Skip("prometheus not installed (Debian's prometheus package)")
    live = Live(suite, "prometheus")
    problems, logs = [], []
    pport = free_port()
    cfg = os.path.join(live.work, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: heaptrail\n    static_configs:\n"
                "      - targets: ['127.0.0.1:%d']\n" % live.port)
    plog = open(os.path.join(live.work, "prometheus.log"), "wb")
    pr = subprocess.Popen([prom, "--config.file=" + cfg,
                           "--storage.tsdb.path=" + os.path.join(live.work, "tsdb"),
                           "--web.listen-address=127.0.0.1:%d" % pport],
                          stdout=plog, stderr=subprocess.STDOUT)
    pbase = "http://127.0.0.1:%d" % pport
    try:
        for _ in range(200):
            try:
                if http(pbase + "/-/ready", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise Failure("prometheus did not get ready")
        # its first scrape comes a few seconds after it is ready
        for _ in range(300):
            st, body, _ = http(pbase + "/api/v1/query?query=up")
            if st == 200 and json.loads(body)["data"]["result"]:
                break
            time.sleep(0.1)
        else:
            raise Failure("prometheus never scraped the endpoint")
        t0 = time.time()
        live.say("go")
        time.sleep(7)
        t1 = time.time()
        live.say("stop")
        time.sleep(1.5)
        heap = prom_query(pbase, "heaptrail_live_bytes", t0, t1)
        grow = prom_query(pbase, 'heaptrail_site_live_bytes{site="grow_site"}', t0, t1)
        flat = prom_query(pbase, 'heaptrail_site_live_bytes{site="flat_site"}', t0, t1)
        logs.append("live bytes %s\ngrow_site %s\nflat_site %s" % (heap, grow, flat))
        for name, vals in (("heaptrail_live_bytes", heap), ("grow_site", grow)):
            if len(vals) < 4 or not all(b >= a for a, b in zip(vals, vals[1:])) or \
                    vals[-1] - vals[0] < 4096 * 50:
                problems.append("%s is not rising over the run: %s" % (name, vals))
        if len(flat) < 4 or set(flat) != {100000.0}:
            problems.append("flat_site's series is not flat at 100000: %s" % flat)
        # the Grafana dashboard in the tree: every query is PromQL this
        # Prometheus takes, and each has data but the growing sites'
        # (no --every here: no growth verdicts)
        dash = json.load(open(os.path.join(HERE, "..", "..", "contrib", "grafana",
                                           "heaptrail.json")))
        for panel in dash["panels"]:
            for t in panel["targets"]:
                q = t["expr"].replace("$__rate_interval", "5s").replace(
                    "$job", ".*").replace("$instance", ".*")
                vals = prom_query(pbase, q, t0, t1)
                if not vals and "growing" not in q:
                    problems.append("dashboard panel %r: no data for %s" % (panel["title"], q))
    finally:
        pr.terminate()
        try:
            pr.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pr.kill()
        plog.close()
        live.close_checked(problems)
    return problems, logs


def test_symbol(suite):
    tool = test_pprof.pprof_tool(suite)
    live = Live(suite, "symbol")
    problems, logs = [], []
    try:
        env = dict(run_tests.RUN_ENV, PPROF_TMPDIR=live.work, HOME=live.work,
                   PPROF_BINARY_PATH="/nonexistent")
        rc, out, err = run_tests.run(
            [tool, "-symbolize=remote", "-top", "-unit=B", "-nodecount=1000",
             "-sample_index=inuse_space", live.base + "/debug/pprof/heap?debug=1"],
            env=env, timeout=120, cwd=live.work)
        text = out.decode("utf-8", "replace")
        logs += [text, err.decode("utf-8", "replace")]
        rows = {m.group(3): int(m.group(1))
                for m in map(run_tests.PPROF_ROW.match, text.split("\n")) if m}
        if rc != 0 or rows.get("flat_site") != 100000:
            problems.append("pprof -symbolize=remote: status %d, flat_site %s" % (
                rc, rows.get("flat_site")))
        st, body, _ = live.get("/debug/pprof/symbol")
        if st != 200 or body != b"num_symbols: 1\n":
            problems.append("GET /debug/pprof/symbol: %d %r" % (st, body))
    finally:
        live.close_checked(problems, grew=0)
    return problems, logs


def test_leaks(suite):
    live = Live(suite, "leaks")
    problems, logs = [], []
    try:
        live.say("lose")
        time.sleep(0.3)
        st, body, ctype = live.get("/debug/heaptrail/leaks")
        logs.append(body.decode("utf-8", "replace")[:3000])
        if st != 200 or ctype != "application/json":
            raise Failure("leaks: status %d, %s" % (st, ctype))
        rep = json.loads(body)
        lost = [r for r in rep["records"] if r["kind"] == "definitely_lost"]
        if len(lost) != 1 or lost[0]["bytes"] != 777 or \
                lost[0]["stack"][0]["function"] != "lose_site":
            problems.append("definitely lost records: %s" % json.dumps(lost)[:500])
        if rep["summary"]["definitely_lost"] != {"bytes": 777, "blocks": 1}:
            problems.append("summary: %s" % rep["summary"])
        st, body, _ = live.get("/debug/pprof/cmdline")
        if st != 200:
            problems.append("the endpoint stopped answering after the leak check: %d" % st)
    finally:
        live.close_checked(problems, grew=0)
    return problems, logs


def test_growth(suite):
    live = Live(suite, "growth", extra=("--every", "100ms"))
    problems, logs = [], []
    try:
        live.say("go")
        time.sleep(2)
        st, body, _ = live.get("/debug/heaptrail/growth")
        text = body.decode("utf-8", "replace")
        _, mbody, _ = live.get("/metrics")
        live.say("stop")
        metrics = mbody.decode()
        logs += [text, metrics]
        trend = {}
        for line in text.split("\n"):
            m = re.match(r"^\s*(\d+|-)\s+(growing|grew, then flat|fluctuating|flat|"
                         r"shrinking)\s.*\s(\S+)\s*$", line)
            if m:
                trend[m.group(3)] = m.group(2)
        # heaptrail growth's words: units, and the sampling note (--every
        # samples at auto), not raw byte counts
        head = text.split("\n")[0]
        if not re.match(r"^\d+ dumps of pid %d over [\d.]+ s, in-use space [\d.]+ (?:[KMG]i)?B "
                        r"-> [\d.]+ (?:[KMG]i)?B \(sampled: estimates" % live.pid, head):
            problems.append("growth page: heading %r is not heaptrail growth's" % head)
        if not re.search(r"^\s*1\s+growing\s+\+[\d.]+ (?:[KMG]i)?B/s\s+±", text, re.M):
            problems.append("growth page: grow_site's row lacks growth's units and ±")
        if st != 200 or trend.get("grow_site") != "growing":
            problems.append("growth page (status %d): grow_site is %s" % (
                st, trend.get("grow_site")))
        if trend.get("flat_site") == "growing":
            problems.append("growth page: flat_site is growing")
        vals = metric_values(metrics)
        g = vals.get('heaptrail_site_growing_bytes_per_second{site="grow_site"}')
        if not g or g <= 0:
            problems.append("/metrics: no growing series for grow_site (%s)" % g)
        if 'heaptrail_site_growing_bytes_per_second{site="flat_site"}' in vals:
            problems.append("/metrics: flat_site has a growing series")
    finally:
        live.close_checked(problems)
    return problems, logs


def fuzz_requests(rng, n):
    good = b"GET /debug/pprof/cmdline HTTP/1.1\r\nHost: x\r\n\r\n"
    out = []
    for i in range(n):
        kind = i % 6
        if kind == 0:
            out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600))))
        elif kind == 1:
            b = bytearray(good)
            for _ in range(rng.randrange(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            out.append(bytes(b))
        elif kind == 2:
            out.append(b"GET /" + b"a" * rng.randrange(1000, 20000) + b" HTTP/1.1\r\n\r\n")
        elif kind == 3:
            out.append(b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: " +
                       rng.choice([b"-1", b"99999999999999999999", b"abc", b"1000000",
                                   b"5"]) + b"\r\n\r\n0x1")
        elif kind == 4:
            out.append(b"GET /debug/pprof/heap?seconds=" +
                       rng.choice([b"-5", b"1e9", b"0x10", b"", b"99999"]) +
                       b"&debug=" + rng.choice([b"7", b"-1", b"1"]) + b" HTTP/1.0\r\n\r\n")
        else:
            out.append(b"GET / HTTP/1.1\r\n" + b"".join(
                b"X-%d: %s\r\n" % (k, bytes(rng.randrange(32, 127) for _ in range(50)))
                for k in range(rng.randrange(1, 400))) + b"\r\n")
    return out


def send_recv(port, data, timeout=15):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        got = b""
        while True:
            try:
                b = s.recv(65536)
            except OSError:
                break
            if not b:
                break
            got += b
        return got
    finally:
        s.close()


def test_hostile(suite):
    import random
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    live = Live(suite, "hostile")
    problems, logs = [], []
    held = []
    rng = random.Random(16)
    try:
        live.say("go")
        t_go = time.time()
        statuses = {}
        for req in fuzz_requests(rng, 300):
            got = send_recv(live.port, req)
            st = got.split(b" ", 2)[1] if got.startswith(b"HTTP/1.1 ") else b"none"
            statuses[st] = statuses.get(st, 0) + 1
        logs.append("fuzzed requests' statuses: %s" % sorted(statuses.items()))
        if b"200" not in statuses or b"400" not in statuses:
            problems.append("fuzzed requests: statuses %s (want some 200 and 400)" %
                            sorted(statuses.items()))
        got = send_recv(live.port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (1 << 20) + b"\r\n\r\n")
        logs.append("1 MiB of headers: %r" % got[:40])
        if got and not got.startswith(b"HTTP/1.1 431"):
            problems.append("1 MiB of headers answered %r" % got[:40])
        for _ in range(20):   # clients that never read
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            c.connect(("127.0.0.1", live.port))
            c.sendall(b"GET /debug/pprof/heap?debug=1 HTTP/1.1\r\n\r\n")
            held.append(c)
        slow = []
        for _ in range(10):   # a byte a second
            c = socket.create_connection(("127.0.0.1", live.port))
            slow.append(c)
            held.append(c)
        for k in range(3):
            for c in slow:
                try:
                    c.send(b"GET /"[k:k + 1])
                except OSError:
                    pass
            time.sleep(1)
        for _ in range(1000):
            try:
                held.append(socket.create_connection(("127.0.0.1", live.port), timeout=5))
            except OSError as e:
                problems.append("connection %d refused: %s" % (len(held), e))
                break
        t = time.time()
        st, body, _ = live.get("/debug/pprof/cmdline", timeout=20)
        logs.append("a request with %d connections open: %d after %.2f s" % (
            len(held), st, time.time() - t))
        if st != 200 or time.time() - t > 5:
            problems.append("with %d connections held, a request got %d after %.2f s" % (
                len(held), st, time.time() - t))
        for c in held:
            c.close()
        held = []
        time.sleep(0.5)
        for path in ("/metrics", "/debug/pprof/heap"):
            t = time.time()
            st, body, _ = live.get(path, timeout=20)
            if st != 200 or time.time() - t > 5:
                problems.append("after the attack %s: %d after %.2f s" % (
                    path, st, time.time() - t))
        live.say("stop")
        grew_for = time.time() - t_go
    finally:
        for c in held:
            c.close()
        out, rc = live.close()
    m = re.match(rb"grew (\d+)\n$", out)
    if rc != 0 or not m:
        problems.append("the program's output %r, status %d" % (out, rc))
    elif int(m.group(1)) < grew_for / 0.02 / 2:
        problems.append("the program grew %s times in %.1f s, less than half of one every "
                        "20 ms" % (m.group(1).decode(), grew_for))
    logs.append("grew %s in %.1f s" % (m.group(1).decode() if m else "?", grew_for))
    return problems, logs


def unix_get(path, req):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(path)
    s.sendall(req)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    return got


def test_serve(suite):
    prog = build_prog(suite)
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "live", "serve"))
    agent = os.path.join(os.path.dirname(suite.heaptrail), "libheaptrail.so")
    out = os.path.join(work, "out")
    os.makedirs(out, mode=0o700)
    env = dict(run_tests.RUN_ENV, LD_PRELOAD=agent, HEAPTRAIL_OUTPUT=out,
               HEAPTRAIL_OPTIONS="sample=1")
    p = subprocess.Popen([prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    problems, logs = [], []
    sock = os.path.join(work, "live.sock")
    srv = None
    try:
        if p.stdout.readline() != b"ready\n":
            raise Failure("live_sites did not start")
        srv = subprocess.Popen([suite.heaptrail, "serve", "--http", "unix:" + sock,
                                str(p.pid)], stderr=subprocess.PIPE, env=run_tests.RUN_ENV)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        mode = os.stat(sock).st_mode & 0o777
        if mode != 0o600:
            problems.append("the socket's mode is %o, want 600" % mode)
        for _ in range(50):   # bound a moment before it listens
            try:
                got = unix_get(sock, b"GET /metrics HTTP/1.0\r\n\r\n")
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        text = got.decode("utf-8", "replace")
        logs.append(text[:3000])
        if not got.startswith(b"HTTP/1.1 200") or \
                'heaptrail_site_live_bytes{site="flat_site"} 100000\n' not in text:
            problems.append("/metrics over the socket: %r" % text[:300])
        srv.send_signal(signal.SIGTERM)
        rc = srv.wait(timeout=20)
        err = srv.stderr.read().decode()
        logs.append(err)
        if rc != 0 or os.path.exists(sock):
            problems.append("serve after SIGTERM: status %d, socket left: %s" % (
                rc, os.path.exists(sock)))
    finally:
        if srv and srv.poll() is None:
            srv.kill()
            srv.wait()
        try:
            p.stdin.write(b"quit\n")
            p.stdin.close()
        except OSError:
            pass
        p.wait(timeout=60)
        pout = p.stdout.read()
    if p.returncode != 0 or pout != b"grew 0\n":
        problems.append("the program's output %r, status %d" % (pout, p.returncode))
    return problems, logs


def test_attach(suite):
    prog = build_prog(suite)
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "live", "attach"))
    p = subprocess.Popen([prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=run_tests.RUN_ENV)
    problems, logs = [], []
    port = free_port()
    att = None
    try:
        if p.stdout.readline() != b"ready\n":
            raise Failure("live_sites did not start")
        errf = open(os.path.join(work, "stderr"), "wb")
        att = subprocess.Popen([suite.heaptrail, "attach", "--sample", "1", "-o",
                                os.path.join(work, "out"), "--http", "127.0.0.1:%d" % port,
                                "--for", "6s", str(p.pid)], stderr=errf,
                               env=run_tests.RUN_ENV)
        base = "http://127.0.0.1:%d" % port
        vals = []
        for _ in range(100):
            with open(os.path.join(work, "stderr"), "rb") as f:
                if b"live endpoint" in f.read():
                    break
            if att.poll() is not None:
                break
            time.sleep(0.05)
        p.stdin.write(b"go\n")
        p.stdin.flush()
        for _ in range(2):
            time.sleep(1)
            st, body, _ = http(base + "/metrics")
            text = body.decode("utf-8", "replace")
            logs.append(text)
            if st != 200:
                raise Failure("/metrics while attached: %d %s" % (st, text[:300]))
            vals.append(metric_values(text))
        p.stdin.write(b"stop\n")
        p.stdin.flush()
        g = [v.get('heaptrail_site_live_bytes{site="grow_site"}', 0) for v in vals]
        if not (0 < g[0] < g[1]):
            problems.append("grow_site's series while attached: %s" % g)
        if any('heaptrail_site_live_bytes{site="flat_site"}' in v for v in vals):
            problems.append("flat_site, allocated before the attach, is in /metrics")
        rc = att.wait(timeout=60)
        errf.close()
        with open(os.path.join(work, "stderr"), "rb") as f:
            logs.append(f.read().decode("utf-8", "replace"))
        if rc != 0:
            problems.append("heaptrail attach --for: status %d" % rc)
        try:
            http(base + "/metrics", timeout=2)
            problems.append("the endpoint still answers after --for ended")
        except OSError:
            pass
    except Failure as e:
        if att is not None and att.poll() is not None and att.returncode == 1:
            with open(os.path.join(work, "stderr"), "rb") as f:
                err = f.read().decode("utf-8", "replace")
            if "ptrace" in err or "Yama" in err or "permission" in err.lower():
                raise Skip("attach is not permitted here: %s" % err.strip())
        raise
    finally:
        if att is not None and att.poll() is None:
            att.kill()
            att.wait()
        try:
            p.stdin.write(b"quit\n")
            p.stdin.close()
        except OSError:
            pass
        p.wait(timeout=60)
        pout = p.stdout.read()
    if p.returncode != 0 or not pout.startswith(b"grew "):
        problems.append("the program's output %r, status %d" % (pout, p.returncode))
    return problems, logs


class Receiver:
    """A local HTTP server that records every POST and answers 200."""

    def __init__(self):
        import http.server
        self.posts = []
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                rec.posts.append((self.path, dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        self.th = threading.Thread(target=self.srv.serve_forever)
        self.th.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
        self.th.join()


def parse_form(ctype, body):
    """The parts of a multipart/form-data body: name -> (filename, bytes),
    as Go's multipart.Reader sees them."""
    import email.parser
    import email.policy
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\nMIME-Version: 1.0\r\n\r\n" + body)
    if not msg.is_multipart():
        raise Failure("not a multipart body: %s" % ctype)
    parts = {}
    for part in msg.iter_parts():
        cd = part.get("Content-Disposition", "")
        if part.get_content_disposition() != "form-data":
            raise Failure("a part that is not form-data: %r" % cd)
        name = part.get_param("name", header="content-disposition")
        parts[name] = (part.get_filename(), part.get_payload(decode=True))
    return parts


def pb_values(path):
    prof = test_pprof.decode(path)
    types = [prof["strings"][t["type"]] for t in prof["sample_type"]]
    locs = {l["id"]: l for l in prof["location"]}
    grow = 0
    for smp in prof["sample"]:
        leaf = locs[smp["location_id"][0]]
        names = [test_pprof.fn_name(prof, ln["function_id"]) for ln in leaf["line"]]
        if "grow_site" in names:
            grow += smp["value"][types.index("inuse_space")]
    return types, grow


def test_push(suite):
    import urllib.parse as up
    rcv = Receiver()
    problems, logs = [], []
    try:
        live = Live(suite, "push", extra=("--push", "http://127.0.0.1:%d" % rcv.port,
                                          "--push-every", "300ms", "--push-name", "live-test"))
        try:
            live.say("go")
            time.sleep(1.6)
            live.say("stop")
        finally:
            out, rc = live.close()
        if rc != 0 or not out.startswith(b"grew "):
            problems.append("the program's output %r, status %d" % (out, rc))
    finally:
        rcv.close()
    posts = rcv.posts
    logs.append("%d pushes: %s" % (len(posts), [p[0] for p in posts]))
    if len(posts) < 3:
        return problems + ["%d pushes in 1.6 s at 300 ms" % len(posts)], logs
    prev_profile = None
    last_until = None
    grows = []
    for i, (path, headers, body) in enumerate(posts):
        u = up.urlsplit(path)
        q = dict(up.parse_qsl(u.query))
        where = "push %d" % i
        if u.path != "/ingest":
            problems.append("%s: path %s" % (where, u.path))
        if q.get("name") != "live-test" or "format" in q or not q.get("spyName"):
            problems.append("%s: query %s" % (where, q))
        if not (q.get("from", "").isdigit() and q.get("until", "").isdigit()
                and int(q["from"]) <= int(q["until"]) <= time.time() + 1
                and (not i or int(q["from"]) == last_until)):
            problems.append("%s: from %s until %s (the last until %s)" % (
                where, q.get("from"), q.get("until"), last_until))
        last_until = int(q.get("until", "0") or 0)
        ctype = headers.get("Content-Type", "")
        if not ctype.startswith("multipart/form-data; boundary="):
            problems.append("%s: content type %r" % (where, ctype))
            continue
        parts = parse_form(ctype, body)
        want = {"profile", "sample_type_config"} | ({"prev_profile"} if i else set())
        if set(parts) != want:
            problems.append("%s: parts %s, want %s" % (where, sorted(parts), sorted(want)))
            continue
        if parts["profile"][0] != "profile.pprof":
            problems.append("%s: profile's file name %r" % (where, parts["profile"][0]))
        pb = os.path.join(suite.build, "e2e", "live", "push", "push%d.pb.gz" % i)
        with open(pb, "wb") as f:
            f.write(parts["profile"][1])
        types, grow = pb_values(pb)
        grows.append(grow)
        if sorted(types) != ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"]:
            problems.append("%s: sample types %s" % (where, types))
        cfg = json.loads(parts["sample_type_config"][1])
        if cfg.get("alloc_space", {}).get("cumulative") is not True or \
                cfg.get("inuse_space", {}).get("cumulative") or \
                cfg.get("inuse_space", {}).get("units") != "bytes":
            problems.append("%s: sample_type_config %s" % (where, cfg))
        if i and parts["prev_profile"][1] != prev_profile:
            problems.append("%s: prev_profile is not the profile pushed before" % where)
        prev_profile = parts["profile"][1]
    logs.append("grow_site in-use space per push: %s" % grows)
    if not grows or not grows[-1] > grows[0]:
        problems.append("grow_site does not rise across the pushes: %s" % grows)
    return problems[:10], logs


def test_push_down(suite):
    problems, logs = [], []
    closed = free_port()
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)   # accepts (in the kernel) and never answers
    try:
        for tag, port in (("closed", closed), ("silent", hole.getsockname()[1])):
            live = Live(suite, "push-" + tag, extra=(
                "--push", "http://127.0.0.1:%d/" % port, "--push-every", "100ms"))
            try:
                live.say("go")
                t_go = time.time()
                time.sleep(2)
                live.say("stop")
                grew_for = time.time() - t_go
            finally:
                t = time.time()
                out, rc = live.close()
                took = time.time() - t
            err = live.stderr()
            logs.append("%s: %s" % (tag, err))
            m = re.match(rb"grew (\d+)\n$", out)
            if rc != 0 or not m:
                problems.append("%s: the program's output %r, status %d" % (tag, out, rc))
            elif int(m.group(1)) < grew_for / 0.02 / 2:
                problems.append("%s: the program grew %s times in %.1f s" % (
                    tag, m.group(1).decode(), grew_for))
            if took > 3:
                problems.append("%s: heaptrail ended %.1f s after the program was told "
                                "to quit" % (tag, took))
            if err.count("push to Pyroscope failed") != 1:
                problems.append("%s: the failure is said %d times" % (
                    tag, err.count("push to Pyroscope failed")))
    finally:
        hole.close()
    return problems, logs


def test_quiet(suite):
    src = os.path.join(os.path.dirname(HERE), "progs", "live_quiet.c")
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "live", "quiet"))
    prog = os.path.join(work, "live_quiet")
    subprocess.run([suite.cc, "-g", "-O1", "-pthread", "-o", prog, src], check=True)
    port = free_port()
    errf = open(os.path.join(work, "stderr"), "wb")
    p = subprocess.Popen([suite.heaptrail, "run", "-o", os.path.join(work, "out"), "--http",
                          "127.0.0.1:%d" % port, "--", prog], stdout=subprocess.PIPE,
                         stderr=errf, env=run_tests.RUN_ENV)
    problems, logs = [], []
    try:
        if p.stdout.readline() != b"ready\n":
            raise Failure("live_quiet did not start")
        ok = 0
        for _ in range(10):
            try:
                st, body, _ = http("http://127.0.0.1:%d/metrics" % port, timeout=10)
                ok += st == 200
            except OSError:
                pass
            time.sleep(0.15)
        if ok < 10:
            problems.append("%d of 10 scrapes answered" % ok)
    finally:
        p.wait(timeout=60)
        out = p.stdout.read()
        errf.close()
    logs.append(out.decode())
    if p.returncode != 0 or out != b"eintr 0\n":
        problems.append("the program's output %r, status %d (want no EINTR)" % (
            out, p.returncode))
    return problems, logs


def test_remote(suite):
    prog = build_prog(suite)
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "live", "remote"))
    rc, out, err = run_tests.run([suite.heaptrail, "run", "-o", os.path.join(work, "o"),
                                  "--http", "0.0.0.0:%d" % free_port(), "--", prog],
                                 stdin=b"quit\n", env=run_tests.RUN_ENV, timeout=60)
    problems = []
    if rc != 2 or out or b"--http-allow-remote" not in err:
        problems.append("0.0.0.0 without --http-allow-remote: status %d, stdout %r, %r" %
                        (rc, out, err))
    logs = [err.decode()]
    # bad addresses: a port past 65535 (getaddrinfo takes 99999 as 99999 - 65536)
    for flag, addr in (("--http", "127.0.0.1:99999"), ("--http", "127.0.0.1:8o80"),
                       ("--push", "http://127.0.0.1:70000"),
                       # an empty path: an abstract socket, which no file mode guards
                       ("--http", "unix:")):
        rc, out, err = run_tests.run([suite.heaptrail, "run", "-o", os.path.join(work, "p"),
                                      flag, addr, "--", prog], stdin=b"quit\n",
                                     env=run_tests.RUN_ENV, timeout=60)
        lines = run_tests.stderr_lines(err)
        want = b"socket path" if addr == "unix:" else b"port"
        if rc != 2 or out or len(lines) != 1 or want not in err:
            problems.append("%s %s: status %d, stdout %r, stderr %r (want one line about "
                            "the %s, exit 2)" % (flag, addr, rc, out, err, want.decode()))
        logs.append(err.decode())
    return problems, logs


def collect(suite):
    return [("live:pprof-top", lambda: test_pprof_top(suite)),
            ("live:delta", lambda: test_delta(suite)),
            ("live:endpoints", lambda: test_endpoints(suite)),
            ("live:promtool", lambda: test_promtool(suite)),
            ("live:prometheus", lambda: test_prometheus(suite)),
            ("live:symbol", lambda: test_symbol(suite)),
            ("live:leaks", lambda: test_leaks(suite)),
            ("live:growth", lambda: test_growth(suite)),
            ("live:hostile", lambda: test_hostile(suite)),
            ("live:serve", lambda: test_serve(suite)),
            ("live:attach", lambda: test_attach(suite)),
            ("live:push", lambda: test_push(suite)),
            ("live:push-down", lambda: test_push_down(suite)),
            ("live:quiet", lambda: test_quiet(suite)),
            ("live:remote", lambda: test_remote(suite))]
