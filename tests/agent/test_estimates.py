"""Sampled figures with their uncertainty, and growth's verdict in the
noise (issue 17), on a running server: tests/progs/est_server.c
(4 worker threads of churn, a warm 10 MB cache whose entries turn over,
bursts, and two leaks: leak_session 150 KB/s, leak_token 24 KB/s). It
dumps its heap every second (heaptrail_dump) and writes beside each dump
the bytes it holds by its own count.

    estimates:server  25 runs of 30 s, 9 at a time, of the server made busy
                      (its churn_fast thread: 100,000 allocations a
                      second, 200 MB/s; issue 32; they mostly sleep:
                      about 2 s of CPU each): 20 with the defaults of a
                      profiling run (`heaptrail run --every 60m`, no
                      --sample: sample=auto), 5 at --sample 512k.
                      With the defaults, every dump's S must be 64k
                      or finer (auto's rule: 2,000 samples of a 10 MB
                      heap want 5 KB, so it starts at 8 KiB, and its
                      budget in time lets the churn be sampled at 8 KiB
                      on a quiet machine; a loaded one makes each
                      sample dearer (CI saw 16k with all 25 at once,
                      and 256k once beside a build); with the budget
                      in samples, 2,000 a
                      second, S rose to 128k and leak_token was "too few
                      samples"),
                      `heaptrail growth` must name both leaks
                      growing in at least 19 of the 20 runs and never
                      call the cache, the churn or the bursts growing;
                      leak_session's slope must have a median within
                      10 % of 150 KB/s, and its 90 % interval hold
                      150 KB/s in at least 15 of 20 runs. At 512k (the agent's
                      default: a 24 KB/s leak brings about 1.4 samples in
                      30 s, so no method can see it), growth must never
                      call the cache or the churn growing, must call
                      each leak either growing or "too few samples", and
                      must then say what would make it sure (a leak
                      may also have no sample at all: then it is not
                      listed, rightly). And the
                      90 % interval `heaptrail top` gives for the live
                      heap must hold the program's own figure in 78 % to
                      98 % of the default runs' API dumps looked at
                      (every other one: 300 dumps; they are correlated,
                      hence the band).

    estimates:attach  10 of the busy server started bare, attached with
                      the defaults and --every 1s for 30 s: growth names
                      both leaks in at least 9 of 10, and never calls
                      the cache (replaced while watched), the churn or
                      the bursts growing

    estimates:onset   tests/progs/attach_onset.c started bare,
                      attached with the defaults and --every 1s for 55 s:
                      a 25.6 KB/s leak from the start and a 1 MB/s one
                      from 15 s on, both growing, the fast one at its
                      rate since it started and said to start later

Why auto sees what 512k cannot: growth needs some tens of samples of a
leak over the run to call it (the slope's noise shrinks as sqrt(S / T),
growth.c); 24 KB/s for 30 s is 720 KB, 88 samples at 8 KiB, 1.4 at
512 KiB. `growth` at 512k says as much ("a run about N times longer, or
--sample 64k", or only the smaller S when N would be over 100).
"""
import os
import re
import statistics
import subprocess
import threading
import time

import run_tests as rt
from run_tests import Failure
import common

RUNS, RUNS_DEFAULT, SECONDS, BATCH = 20, 5, 30, 9
LEAKS = ("leak_session", "leak_token")
NOT_LEAKS = ("cache_put", "handle_request", "burst_buffer", "churn_fast")
GROWTH_ROW = re.compile(r"^\s*(\d+|-|all)\s+(growing|grew, then flat|fluctuating|flat|"
                        r"shrinking|too few samples|replacing)\s+([+-]?\d+)/s\s+(±\d+|\+\d+/-\d+)\s+"
                        r"([+-]?\d+)/s\s+[\d.]+\s+-?\d+\s+->\s+-?\d+\s+(\S+)\s*$")
TOP_TOTAL = re.compile(r"in-use space (\d+) \(sampled every (\d+) bytes on average: estimates "
                       r"(?:±(\d+)|\+(\d+)/-(\d+)) at 90 %, from (\d+) samples\)")


def build(suite):
    work = os.path.join(suite.build, "e2e", "analyze", "estimates")
    os.makedirs(work, exist_ok=True)
    prog = os.path.join(work, "est_server")
    with common._lock:
        rc, _, err = rt.run([suite.cc, "-g", "-O1", "-pthread", "-I",
                             os.path.join(common.ROOT, "include"), "-o", prog,
                             os.path.join(common.HERE, "progs", "est_server.c")])
        if rc != 0:
            raise Failure("cc est_server.c: %s" % rt.short(err))
    return work, prog


def growth_rows(suite, out):
    rc, text, err = rt.run([suite.heaptrail, "growth", "--bytes", "-n", "100", out])
    text = text.decode()
    if rc != 0:
        raise Failure("heaptrail growth %s: status %d: %s" % (out, rc, rt.short(err)))
    rows = {}
    for line in text.split("\n"):
        m = GROWTH_ROW.match(line)
        if m:
            pm = [int(x) for x in re.findall(r"\d+", m.group(4))]
            rows[m.group(6)] = (m.group(2), int(m.group(3)), pm[0], pm[-1])
    return rows, text


def live_interval(suite, dump):
    """(estimate, low, high, samples) of the live heap from heaptrail top."""
    rc, out, err = rt.run([suite.heaptrail, "top", "--bytes", "-n", "1", dump])
    m = TOP_TOTAL.search(out.decode().split("\n")[0])
    if rc != 0 or not m:
        raise Failure("heaptrail top %s: status %d, no interval in %r" % (
            dump, rc, rt.short(out + err, 300)))
    est = int(m.group(1))
    up, down = (int(m.group(3)),) * 2 if m.group(3) else (int(m.group(4)), int(m.group(5)))
    return est, est - down, est + up, int(m.group(6))


def test_server(suite):
    work, prog = build(suite)
    runs = [("auto-%02d" % i, "auto") for i in range(RUNS)] + \
           [("s512k-%02d" % i, "512k") for i in range(RUNS_DEFAULT)]
    procs = []
    t0 = time.time()
    # BATCH at a time: the budget in time is the thread's, and 25 busy
    # programs at once on 2 cores (with the suite's other worker) make
    # every sample dearer than on any machine a service runs on
    for first in range(0, len(runs), BATCH):
        batch = []
        for name, sample in runs[first:first + BATCH]:
            out = rt.fresh_dir(os.path.join(work, name))
            acc = os.path.join(work, name + ".acc")
            # the defaults: a profiling run given no --sample. --every
            # makes it one; a period longer than the run keeps its dumps
            # from meeting the program's own (one dump at a time: the
            # other is refused, EBUSY, and a dump would lack its
            # accounting line)
            flags = ["--every", "60m"] if sample == "auto" else ["--sample", sample]
            p = subprocess.Popen([suite.heaptrail, "run", "-q"] + flags + ["-o", out, "--",
                                  prog, str(SECONDS), acc, "busy"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, env=rt.RUN_ENV)
            batch.append((name, sample, out, acc, p))
        for name, sample, out, acc, p in batch:
            try:
                _, err = p.communicate(timeout=SECONDS + 90)
            except subprocess.TimeoutExpired:
                for q in batch:
                    q[4].kill()
                    q[4].communicate()
                raise Failure("%s: timed out" % name)
            if p.returncode != 0:
                raise Failure("%s: heaptrail run: status %d: %s" % (name, p.returncode,
                                                                    rt.short(err)))
        procs += batch
    problems, details = [], []
    details.append("%d runs of %d s in %.0f s" % (len(runs), SECONDS, time.time() - t0))

    named, wrong, slopes, periods = 0, [], [], set()
    for name, sample, out, acc, p in procs:
        if sample == "auto":
            for f in os.listdir(out):
                if f.endswith(".heap"):
                    with open(os.path.join(out, f)) as h:
                        m = re.search(r"@ heap_v2/(\d+)", h.readline())
                    periods.add(int(m.group(1)) if m else None)
        rows, text = growth_rows(suite, out)
        for site in NOT_LEAKS:
            if rows.get(site, ("",))[0] == "growing":
                wrong.append("%s: %s called growing" % (name, site))
        if sample == "auto":
            if all(rows.get(l, ("",))[0] == "growing" for l in LEAKS):
                named += 1
            else:
                details.append("%s: leaks %s\n%s" % (name, [rows.get(l) for l in LEAKS], text))
            if "leak_session" in rows:
                slopes.append(rows["leak_session"][1:])
        else:
            for l in LEAKS:
                # absent: not one sample in the run, growth cannot know of it
                if l in rows and rows[l][0] not in ("growing", "too few samples"):
                    wrong.append("%s (512k): %s is %r, want growing or too few samples" % (
                        name, l, rows.get(l)))
            if any(v[0] == "too few samples" for k, v in rows.items() if k != "(all)") and \
                    not re.search(r"to be sure, (a run about \d+ times longer, or --sample \d+k?"
                                  r"|--sample \d+k? \(now 524288\): a longer run alone would "
                                  r"have to be over 100 times this one)", text):
                wrong.append("%s (512k): too few samples, and no advice" % name)
            if name.endswith("-00"):
                details.append("%s:\n%s" % (name, text))
    problems += wrong
    if named < RUNS - 1:
        problems.append("both leaks named growing in %d of %d runs, want at least %d" % (
            named, RUNS, RUNS - 1))
    details.append("both leaks named in %d of %d runs with the defaults" % (named, RUNS))
    details.append("S of the default runs' dumps: %s" % sorted(periods, key=str))
    if not periods or not all(p and 1 < p <= 65536 for p in periods):
        problems.append("the default runs' dumps have S %s, want auto's, 64k or finer" %
                        sorted(periods, key=str))
    if slopes:
        # each slope's own 90 % interval should hold the true rate about
        # 9 times in 10 (at least 15 of 20 here), and the median be close
        held = sum(1 for s, up, down in slopes if s - down <= 150000 <= s + up)
        med = statistics.median(s for s, _, _ in slopes)
        if held < RUNS * 3 // 4 or not 0.9 * 150000 <= med <= 1.1 * 150000:
            problems.append("leak_session slopes %s B/s (median %d): their intervals hold "
                            "the program's 150000 B/s in %d of %d" % (
                                sorted(slopes), med, held, len(slopes)))
        details.append("leak_session slope: median %d B/s, range %d to %d; its 90 %% "
                       "interval holds 150000 in %d of %d runs" % (
                           med, min(s for s, _, _ in slopes), max(s for s, _, _ in slopes),
                           held, len(slopes)))

    # the live heap's 90 % intervals against the program's own count
    jobs = []
    for name, sample, out, acc, p in procs:
        if sample != "auto":
            continue
        dumps = sorted(f for f in os.listdir(out) if f.endswith(".api.heap"))
        with open(acc) as f:
            held = [tuple(map(int, l.split()[1:])) for l in f if l.strip()]
        if len(dumps) != len(held):
            problems.append("%s: %d dumps, %d accounting lines" % (name, len(dumps), len(held)))
            continue
        jobs += [(os.path.join(out, d), h) for d, h in zip(dumps, held)][::2]
    results, lock = [], threading.Lock()

    def worker():
        while True:
            with lock:
                if not jobs:
                    return
                dump, held = jobs.pop()
            r = live_interval(suite, dump)
            with lock:
                results.append((dump, held, r))
    errors = []

    def guarded():
        try:
            worker()
        except Failure as e:
            errors.append(str(e))
    threads = [threading.Thread(target=guarded) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise Failure(errors[0])
    inside = 0
    widths = []
    for dump, (before, after), (est, lo, hi, nsamp) in results:
        # the program's figure just before heaptrail_dump() is the
        # dump's (an exact run: the same but for libc's 1,728 bytes);
        # after it, the other threads have moved on
        if lo <= before <= hi:
            inside += 1
        widths.append((hi - lo) / 2 / max(est, 1))
    cover = inside / max(len(results), 1)
    details.append("live heap: the 90 %% interval holds the program's figure in %d of %d "
                   "dumps (%.1f %%); half-width median %.1f %% of the estimate" % (
                       inside, len(results), 100 * cover,
                       100 * statistics.median(widths) if widths else 0))
    # the dumps of one run share most of their samples, so the 300 are
    # worth far fewer independent trials: a wide band, which a 68 % or a
    # 99 % interval still falls out of (seen: 87.3 to 90.3 % in most runs,
    # 81.0 % once, with another test running beside it)
    if not 0.78 <= cover <= 0.98:
        problems.append("the 90 %% intervals hold the live heap in %.1f %% of %d dumps, "
                        "want 78 %% to 98 %%" % (100 * cover, len(results)))
    return problems, details


ATTACH_RUNS, ATTACH_SECONDS = 10, 30


def test_attach(suite):
    """The busy server started bare, attached with the defaults (sample
    auto) and --every 1s for 30 s, then detached: growth over those dumps
    names both leaks in at least 9 of 10 runs, and never calls the cache
    (whose entries from before the attach are replaced while it is
    watched: the heap is flat), the churn or the bursts growing."""
    work, prog = build(suite)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("HEAPTRAIL_OPTIONS", None)
    procs, problems, details = [], [], []
    try:
        for i in range(ATTACH_RUNS):
            acc = os.path.join(work, "attach-%02d.acc" % i)
            procs.append(subprocess.Popen([prog, str(ATTACH_SECONDS + 15), acc, "busy"],
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, env=env))
        time.sleep(2)  # the cache is full, the churn under way
        outs = []
        for i, p in enumerate(procs):
            out = os.path.join(work, "attach-%02d" % i)
            rt.fresh_dir(out)
            os.rmdir(out)
            rc, _, err = rt.run([suite.heaptrail, "attach", "--every", "1s", "-o", out,
                                 str(p.pid)], timeout=60)
            if rc != 0:
                raise Failure("attach %d: status %d: %s" % (p.pid, rc, rt.short(err)))
            outs.append(out)
        time.sleep(ATTACH_SECONDS)
        for p in procs:
            rc, _, err = rt.run([suite.heaptrail, "detach", str(p.pid)], timeout=60)
            if rc != 0:
                problems.append("detach %d: status %d: %s" % (p.pid, rc, rt.short(err)))
        named = 0
        for i, out in enumerate(outs):
            rows, text = growth_rows(suite, out)
            for site in NOT_LEAKS:
                if rows.get(site, ("",))[0] == "growing":
                    problems.append("attach-%02d: %s called growing:\n%s" % (i, site, text))
            if all(rows.get(l, ("",))[0] == "growing" for l in LEAKS):
                named += 1
            else:
                details.append("attach-%02d: leaks %s\n%s" % (i, [rows.get(l) for l in LEAKS],
                                                              text))
            if i == 0:
                details.append(text)
        details.append("both leaks named in %d of %d attached runs" % (named, ATTACH_RUNS))
        if named < ATTACH_RUNS - 1:
            problems.append("both leaks named growing in %d of %d attached runs, want at "
                            "least %d" % (named, ATTACH_RUNS, ATTACH_RUNS - 1))
        for p in procs:
            _, err = p.communicate(timeout=60)
            if p.returncode != 0 or err:
                problems.append("est_server %d: status %d, stderr %r" % (p.pid, p.returncode,
                                                                       err[:200]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return problems, details


def test_onset(suite):
    """tests/progs/attach_onset.c started bare: a 25.6 KB/s leak
    from the start, a 1,024,000 B/s one from 15 s on, churn beside them;
    attached with the defaults and --every 1s for 55 s: growth names
    both growing, the fast one with its rate since it started (within
    15 %) under "started later", the slow one within 30 % (or within
    one and a half times its 90 % interval)."""
    work = os.path.join(suite.build, "e2e", "analyze", "estimates")
    os.makedirs(work, exist_ok=True)
    prog = os.path.join(work, "attach_onset")
    rc, _, err = rt.run([suite.cc, "-g", "-O1", "-pthread", "-o", prog,
                         os.path.join(common.HERE, "progs", "attach_onset.c")])
    if rc:
        raise Failure("cc attach_onset.c: %s" % rt.short(err))
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("HEAPTRAIL_OPTIONS", None)
    p = subprocess.Popen([prog, "61", "15"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env)
    problems, text = [], ""
    try:
        if p.stdout.readline() != b"ready\n":
            raise Failure("attach_onset did not start")
        out = os.path.join(work, "onset")
        rt.fresh_dir(out)
        os.rmdir(out)
        rc, _, err = rt.run([suite.heaptrail, "attach", "--every", "1s", "-o", out,
                             str(p.pid)], timeout=60)
        if rc != 0:
            raise Failure("attach: status %d: %s" % (rc, rt.short(err)))
        # 55 s: on a loaded machine the budget in time coarsens S, and
        # the slow leak's slope needs the samples (at 40 s, CI-like load
        # left it "too few samples" once in six full runs)
        time.sleep(55)
        rc, _, err = rt.run([suite.heaptrail, "detach", str(p.pid)], timeout=60)
        if rc != 0:
            problems.append("detach: status %d: %s" % (rc, rt.short(err)))
        rows, text = growth_rows(suite, out)
        fast, slow = rows.get("cache_result"), rows.get("lose_connection")
        if not fast or fast[0] != "growing" or not 0.85 * 1024000 <= fast[1] <= 1.15 * 1024000:
            problems.append("cache_result %s, want growing at 1024000 B/s" % (fast,))
        if not re.search(r"^started later .*\n(.*\n)*\s+1\s+from [\d.]+ s .*cache_result$",
                         text, re.M):
            problems.append("cache_result not said to have started later")
        # a slow leak's slope is noisy: within 30 %, or its 90 % interval
        # (half as wide again: one run in ten falls outside it) holds the rate
        if not slow or slow[0] != "growing" or not (
                0.7 * 25600 <= slow[1] <= 1.3 * 25600 or
                slow[1] - 1.5 * slow[3] <= 25600 <= slow[1] + 1.5 * slow[2]):
            problems.append("lose_connection %s, want growing at 25600 B/s" % (slow,))
        rest, err = p.communicate(timeout=30)
        if p.returncode != 0 or rest != b"done\n" or err:
            problems.append("attach_onset: status %d, output %r, stderr %r"
                            % (p.returncode, rest, err[:200]))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return problems, [text]


def test_no_sample(suite):
    """examples/leaky holds about 4 KiB at exit: at --sample 1m the exit
    report usually has no sampled block in use, and must not say "about
    0 bytes (±0)": none sampled means, at 90 %, fewer than S ln 10 bytes
    (the chance that B bytes bring no sample is exp(-B / S)). Its "total
    heap usage" counts are what the samples stand for, and say "about"
    (at --sample 1 they are exact, and do not)."""
    import math
    leaky = os.path.join(suite.build, "examples", "leaky")
    bound = "{:,}".format(int(1048576 * math.log(10) + 0.5))
    problems = []
    seen = 0
    for i in range(5):
        out = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "no-sample-%d" % i))
        os.rmdir(out)
        rc, _, err = rt.run([suite.heaptrail, "run", "--sample", "1m", "-o", out, "--", leaky])
        text = err.decode(errors="replace")
        line = [l for l in text.split("\n") if "in use at exit" in l]
        if rc != 0 or len(line) != 1:
            problems.append("run %d: status %d, %r" % (i, rc, rt.short(err, 300)))
            continue
        usage = [l for l in text.split("\n") if "total heap usage:" in l]
        if len(usage) != 1 or not re.search(r"total heap usage: about [\d,]+ allocs", usage[0]):
            problems.append("run %d: %r, want 'total heap usage: about N allocs'" % (i, usage))
        if "from 0 samples" in line[0] or "±0 " in line[0]:
            problems.append("run %d: %s" % (i, line[0].strip()))
        if "no block sampled" in line[0]:
            seen += 1
            if "under about %s bytes, at 90 %%" % bound not in line[0]:
                problems.append("run %d: %s, want under about %s bytes" % (
                    i, line[0].strip(), bound))
    rc, _, err = rt.run([suite.heaptrail, "run", "--sample", "1", "-o",
                         rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "no-sample-x")),
                         "--", leaky])
    if not re.search(r"total heap usage: [\d,]+ allocs", err.decode(errors="replace")):
        problems.append("--sample 1: no exact 'total heap usage: N allocs' line: %r" %
                        rt.short(err, 300))
    if not seen and not problems:
        problems.append("no run without a sampled block: the case is not exercised")
    return problems, []


def collect(suite):
    return [("estimates:server", lambda: test_server(suite)),
            ("estimates:attach", lambda: test_attach(suite)),
            ("estimates:onset", lambda: test_onset(suite)),
            ("estimates:no-sample", lambda: test_no_sample(suite))]
