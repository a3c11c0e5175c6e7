"""heaptrail html (issue 30): the page of a run, opened in Debian's
chromium through Playwright (tests/browser: playwright-core pinned in
package-lock.json, installed by `npm ci` into BUILD/browser the first
time, no browser download), checked against the CLI's own output on the
same directory. Every browser test fails on a console error, a page
error or any request besides the page itself.

    html:growth    tests/progs/growth_sites exact, with dumps and a
                   timeline: each growth row (rank, trend, slope, later
                   half, r2, first, last) is `heaptrail growth`'s, and only
                   leak_slowly is ranked; the flame graph's search for
                   leak_slowly matches `heaptrail top`'s cum of it in the
                   last dump, and so does the frame zoomed on (by mouse
                   and by keyboard), at full width; the root is top's
                   total; reversed, leak_slowly is next to the root with
                   the same bytes; compared with the first dump, its
                   frame is red with `heaptrail diff`'s old bytes and change;
                   the functions table is top's rows, and
                   sorts by cum; the timeline's peak is the timeline file's
                   highest live heap; one mark per dump; a drag over the chart picks the dumps
                   inside it, and the range of the first and last dumps opens
                   the last one's flame graph compared with the first; the
                   tabs move
                   with the arrow keys; the dark scheme changes colours
    html:growth-sampled  the same at --sample 64k: the rows with their
                   ±90% column, the heading and the notes are growth's
    html:leaks     examples/leaky (all four kinds) and
                   tests/e2e/progs/fork_leak (two processes): the leak
                   summary of each process is `heaptrail report --json`'s;
                   filtered by kind, the records are the JSON's of that
                   kind; the first record's suppression is the one
                   `report --gen-suppressions` prints
    html:pools     tests/progs/pools.c (an arena allocator with
                   valgrind's annotations): the pools table (names, lost
                   bytes) and the records filtered by each pool are
                   `report --json`'s
    html:bounded   5,000 distinct stacks (bench/analyze/gen.py): with
                   --min-share 0.01 the page keeps few frames, and every
                   node's children, their "n more" and its own bytes add
                   up to its value (nothing dropped unsaid); the page
                   holds no address outside itself
    html:live      `heaptrail run --http ADDR --every 200ms` on
                   tests/progs/live_sites while grow_site grows: the
                   page at / (text/html, its data at
                   /debug/heaptrail/page.json, the command from /proc)
                   takes new dumps without a
                   reload, the growth view and the flame graph's search
                   stay as the reader left them, grow_site is ranked
                   growing and flat_site is not, the search matches more
                   bytes of grow_site; the program's output is whole
    html:callers   tests/progs/wrapper_sites exact: a function
                   picked in the functions table (xalloc, main) shows its
                   callers and callees with the bytes of the pairs of
                   `heaptrail collapsed`'s stacks (each stack once), itself
                   as top's flat, and searches the flame graph for it;
                   xalloc's caller cache_fill holds the 5 x 8 KiB the
                   program keeps, leak_requests a multiple of 16 KiB;
                   the top-down and bottom-up tables, every node opened:
                   each row's total and self are those of collapsed's
                   stacks under its path, siblings largest first (or by
                   name when asked), bottom-up's first rows top's flat
    html:shape     tests/progs/alloc_shape.c exact: the summary's
                   size classes and temporary allocations are the
                   program's loop counts (read from its source), the
                   histogram sums to report --json's allocations, the last
                   dump has its shape line, `report` and `report --json`
                   say the same; at --sample 4096 the page says the
                   histogram is not available, no file has one and report
                   says nothing of temporaries
    html:attach    tests/progs/attach_target started bare:
                   `heaptrail attach --sample 1 --html FILE` waits, writes
                   nothing until `heaptrail detach PID` (another command),
                   then the page (0600): its growth rows are `heaptrail
                   growth`'s on the same directory, its functions table
                   `heaptrail top`'s of the final dump; with --for 1s the
                   page comes after heaptrail's own detach; a page into a
                   missing directory is refused before the attach
    html:area      tests/progs/area_sites.c exact (11 sites, three of them
                   through a wrapper): the chart of the largest sites
                   stacks the eight functions with the largest peak in
                   `heaptrail top --hide wrap_alloc` of the dumps, each
                   band that function's flat bytes in every dump, the
                   last the rest of the dump; the wrapper is no band, the
                   rows and the "folded" line are `heaptrail growth`'s
    html:cli       `heaptrail run --html FILE` writes the page (0600);
                   `html -o -`; a missing directory, an empty one and a
                   bad --min-share give one line and a non-zero status

SHOTS=DIR in the environment keeps screenshots of every view (1280x800).
"""
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import run_tests
from run_tests import Failure, Skip, run, short, stderr_lines

BROWSER_SRC = os.path.join(common.ROOT, "tests", "browser")
_npm_lock = threading.Lock()


def work_dir(suite, name):
    return run_tests.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "html", name))


def must(suite, *args):
    rc, out, err = run([suite.heaptrail] + list(args))
    if rc != 0:
        raise Failure("heaptrail %s: status %d: %s" % (" ".join(args), rc, short(err)))
    return out.decode()


def browser_env(suite):
    """Installs playwright-core from the lockfile into BUILD/browser (npm
    ci, once per lockfile) and returns the environment to run the driver
    in. Skips (a failure under CI=true) when node, npm or chromium is
    missing."""
    for tool in ("node", "npm"):
        if not shutil.which(tool):
            raise Skip("no %s (scripts/install-deps --test installs it)" % tool)
    chromium = os.environ.get("HEAPTRAIL_CHROMIUM") or shutil.which("chromium")
    if not chromium:
        raise Skip("no chromium (scripts/install-deps --test installs Debian's)")
    dest = os.path.join(suite.build, "browser")
    with _npm_lock:
        lock = open(os.path.join(BROWSER_SRC, "package-lock.json"), "rb").read()
        pkg = open(os.path.join(BROWSER_SRC, "package.json"), "rb").read()
        want = hashlib.sha256(lock + pkg).hexdigest()
        stamp = os.path.join(dest, "installed.stamp")
        if not (os.path.exists(stamp) and open(stamp).read() == want):
            os.makedirs(dest, exist_ok=True)
            for f in ("package.json", "package-lock.json"):
                shutil.copy(os.path.join(BROWSER_SRC, f), os.path.join(dest, f))
            env = dict(os.environ, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
            p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=dest, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
            if p.returncode:
                raise Failure("npm ci in %s: status %d: %s" % (dest, p.returncode,
                                                               short(p.stdout, 400)))
            with open(stamp, "w") as f:
                f.write(want)
    return dict(os.environ, NODE_PATH=os.path.join(dest, "node_modules"),
                HEAPTRAIL_CHROMIUM=chromium)


def drive(suite, page, **opt):
    """Runs tests/browser/report_page.js on page; returns what it read."""
    env = browser_env(suite)
    shots = os.environ.get("SHOTS")
    if shots:
        opt["shots"] = os.path.join(shots, opt.pop("name", "page"))
        os.makedirs(opt["shots"], exist_ok=True)
    opt.pop("name", None)
    p = subprocess.run(["node", os.path.join(BROWSER_SRC, "report_page.js"), page,
                        json.dumps(opt)], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    if p.returncode:
        raise Failure("the browser driver: status %d: %s" % (p.returncode, short(p.stderr, 600)))
    got = json.loads(p.stdout)
    problems = ["the page: %s" % e for e in got["errors"]]
    problems += ["the page asked for %s" % r for r in got["requests"]]
    return got, problems


def build(suite, name, src, *extra):
    out = os.path.join(suite.build, "e2e", "analyze", "html", "bin", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with common._lock:
        if not os.path.exists(out):
            rc, _, err = run([suite.cc, "-g", "-O1", "-I", common.PROGS, "-o", out, src] +
                             list(extra))
            if rc:
                raise Failure("cc %s: %s" % (src, short(err)))
    return out


# rank trend slope [±90%, sampled only] later-half r2 first -> last site
VAL = r"(\S+(?: [KMGT]?i?B)?)"
GROWTH_ROW = re.compile(r"^\s*(\d+|-|all)\s+(growing|grew, then flat|fluctuating|flat|"
                        r"shrinking|too few samples)\s+(\S+(?: \S+)?/s)"
                        r"(?:\s+(±[\d.]+(?: [KMGT]iB)?|\+[\d.]+/-[\d.]+(?: [KMGT]iB)?))?\s+(\S+(?: \S+)?/s)\s+"
                        r"([\d.]+)\s+" + VAL + r" -> " + VAL + r"\s+(\S+)\s*$")


def growth_compare(suite, out, v, problems, details):
    """The page's growth view (v: the driver's growth) against `heaptrail
    growth DIR`: heading, every row's cells, the notes. Returns the
    sites ranked growing."""
    text = must(suite, "growth", "-n", "1000", out)
    details.append(text)
    lines = text.split("\n")
    want = []
    for line in lines:
        m = GROWTH_ROW.match(line)
        if m:
            want.append((m.group(9), m.group(1) if m.group(1).isdigit() else "", m.group(2),
                         m.group(3), m.group(4) or "", m.group(5), m.group(6), m.group(7),
                         m.group(8)))
    sampled = "±90%" in text
    rows = []
    for r in v["rows"]:
        c = r["cells"]
        pm = c[3] if sampled else ""
        rest = c[4:] if sampled else c[3:]
        first, last = rest[2].split(" \u2192 ")
        rows.append((r["site"], r["rank"], r["trend"], c[2], pm, rest[0], rest[1], first, last))
        if not r["spark"]:
            problems.append("growth: no chart for %s" % r["site"])
    if not want:
        problems.append("heaptrail growth printed no rows")
    if rows != want:
        problems.append("growth rows differ from heaptrail growth: page %s, growth %s" %
                        (rows, want))
    if v["head"] != lines[0]:
        problems.append("growth: the page's heading %r, growth's %r" % (v["head"], lines[0]))
    # the notes under the table (onsets, replacing, unseen memory, advice)
    # and the wrappers folded, the last line
    m = re.search(r"^ all .*?\n(.*)\Z", text, re.S | re.M)
    after = m.group(1) if m else ""
    folded = re.search(r"^folded \d+ allocation wrappers? .*$", after, re.M)
    if folded:
        after = after[:folded.start()] + after[folded.end():]
    note = " ".join(after.split())
    if " ".join((v.get("note") or "").split()) != note:
        problems.append("growth: the page's notes %r, growth's %r" % (v.get("note"), note))
    if v.get("wrappers") != (folded.group(0) if folded else None):
        problems.append("growth: the page says %r of wrappers, growth %r" % (
            v.get("wrappers"), folded and folded.group(0)))
    return [r[0] for r in rows if r[1]]


def bytes_text(v):
    """render_bytes' words: "512 B", "1.50 MiB"."""
    units, x, u = ["B", "KiB", "MiB", "GiB", "TiB"], float(v), 0
    while abs(x) >= 1024 and u < 4:
        x /= 1024
        u += 1
    return "%d B" % v if not u else "%.2f %s" % (x, units[u])


def top_cum(suite, dump, name):
    out = must(suite, "top", "--bytes", "-n", "1000", dump)
    total = int(re.search(r" (\d+)( \(|$)", out.split("\n")[0]).group(1))
    for line in out.split("\n")[2:]:
        f = line.split()
        if len(f) >= 6 and f[-1] == name:
            return int(f[3]), total
    raise Failure("heaptrail top has no row %s: %s" % (name, short(out.encode(), 400)))


def test_growth(suite):
    prog = build(suite, "growth_sites", os.path.join(common.HERE, "progs", "growth_sites.c"))
    work = work_dir(suite, "growth")
    out = os.path.join(work, "run")
    must(suite, "run", "-q", "--sample", "1", "--every", "100ms", "--timeline", "20", "-o", out,
         "--", prog)
    page = os.path.join(work, "report.html")
    must(suite, "html", out, "-o", page)
    got, problems = drive(suite, page, name="growth", search="^leak_slowly$", zoom="leak_slowly")
    v = got["views"]
    details = [json.dumps(v, indent=1)[:4000]]
    # growth: the page's rows are heaptrail growth's
    ranked = growth_compare(suite, out, v["growth"], problems, details)
    if ranked != ["leak_slowly"]:
        problems.append("growth ranks %s, want leak_slowly alone" % ranked)
    # flame: search and zoom against top's cum in the last dump
    dumps = sorted(f for f in os.listdir(out) if f.endswith(".heap"))
    fl = v["flame"]
    cum, total = top_cum(suite, os.path.join(out, dumps[-1]), "leak_slowly")
    if fl.get("root") != total:
        problems.append("flame: the root holds %s, top's total is %d" % (fl.get("root"), total))
    if fl.get("matched", {}).get("bytes") != cum:
        problems.append("flame: search ^leak_slowly$ matched %s, top's cum is %d" %
                        (fl.get("matched"), cum))
    want_share = "%.1f%%" % (100.0 * cum / total)
    if want_share not in fl.get("matched", {}).get("text", ""):
        problems.append("flame: matched text %r lacks the share %s" %
                        (fl.get("matched", {}).get("text"), want_share))
    # the functions table: top's rows (flat order), then sorted by cum
    out_top = must(suite, "top", "--bytes", "-n", "100", os.path.join(out, dumps[-1]))
    want_top = []
    for line in out_top.split("\n")[2:]:
        f = line.split(None, 5)
        if len(f) == 6 and f[0].isdigit():
            want_top.append([f[5], int(f[0]), int(f[3])])
    if fl.get("top") != want_top:
        problems.append("functions table %s, heaptrail top %s" % (fl.get("top"), want_top))
    cums = [r[2] for r in fl.get("top_by_cum") or []]
    if cums != sorted(cums, reverse=True) or len(cums) != len(want_top):
        problems.append("functions table sorted by cum: %s" % cums)
    if fl.get("hits") != ["leak_slowly"]:
        problems.append("flame: the search marked %s" % fl.get("hits"))
    z = fl.get("zoomed") or {}
    if z.get("v") != cum or abs(z.get("width", 0) - z.get("box", -1)) > 1:
        problems.append("flame: zoomed on leak_slowly: %s, want %d bytes at full width" % (z, cum))
    if "%s bytes" % format(cum, ",") not in (fl.get("details") or ""):
        problems.append("flame: the details after the zoom say %r" % fl.get("details"))
    if fl.get("after_zoom_matched") != cum:
        problems.append("flame: after the zoom the search matched %s" % fl.get("after_zoom_matched"))
    if (fl.get("reset") or "").startswith("Zoomed"):
        problems.append("flame: Escape did not zoom out")
    if abs((fl.get("keyboard_zoom") or 0) - 1) > 0.01:
        problems.append("flame: Enter on leak_slowly did not zoom (%s of the width)" %
                        fl.get("keyboard_zoom"))
    rv = fl.get("reversed") or {}
    if rv.get("matched") != cum or ["leak_slowly", cum] not in (rv.get("first_row") or []):
        problems.append("flame reversed: %s, want leak_slowly's %d bytes next to the root" %
                        (rv, cum))
    # differential against the first dump: heaptrail diff's old and change
    df = fl.get("diff") or {}
    dtext = must(suite, "diff", "--bytes", os.path.join(out, df.get("base", dumps[0])),
                 os.path.join(out, dumps[-1]))
    m = re.search(r"^\s*([+-]\d+)\s+(\d+)\s+(\d+)\s+leak_slowly$", dtext, re.M)
    if not m or df.get("base") != dumps[0]:
        problems.append("flame diff: base %s, heaptrail diff %s" % (df.get("base"), short(dtext.encode(), 300)))
    elif (df.get("v", 0) - df.get("old", 0), df.get("old")) != (int(m.group(1)), int(m.group(2))) \
            or not re.match(r"rgb\(255, ?(\d+), ?\1\)$", df.get("colour", "")):
        problems.append("flame diff: leak_slowly %s, heaptrail diff's change %s from %s, red" % (
            df, m.group(1), m.group(2)))
    elif "(+%s bytes) from" % format(int(m.group(1)), ",") not in df.get("details", ""):
        problems.append("flame diff: details %r" % df.get("details"))
    rg = v.get("range") or {}
    fr, to = (rg.get("dragged") or [0, 0])
    if not (fr < to) or not rg.get("band") or "taken as the dumps" not in (rg.get("note") or ""):
        problems.append("timeline: a drag over 30-80%% of the chart picked %s (%r)" % (
            rg.get("dragged"), rg.get("note")))
    if (rg.get("view"), rg.get("dump"), rg.get("base")) != ("tab-flame", len(dumps) - 1, 1):
        problems.append("timeline: the range first..last opened %s" % rg)
    if v.get("flame_from_mark") != 0:
        problems.append("timeline: the first dump's mark opened dump %s" % v.get("flame_from_mark"))
    # timeline: the file's highest tick, one mark per dump
    tl = [f for f in os.listdir(out) if f.endswith(".timeline")]
    live = [(int(l.split()[1]), int(l.split()[0])) for l in open(os.path.join(out, tl[0]))
            if l[0].isdigit()]
    peak = max(live, key=lambda t: (t[0], -t[1]))
    want_peak = "peak: %s at %.2f s" % (bytes_text(peak[0]), peak[1] / 1000)
    if v["timeline"]["peak"] != want_peak:
        problems.append("timeline: %r, want %r" % (v["timeline"]["peak"], want_peak))
    if v["timeline"]["marks"] != len(dumps) or v["timeline"]["dumps"] != len(dumps):
        problems.append("timeline: %d marks and %d dumps listed, %d dumps" % (
            v["timeline"]["marks"], v["timeline"]["dumps"], len(dumps)))
    if not v["summary"]["peak"] or not v["summary"]["peak"].startswith(bytes_text(peak[0])):
        problems.append("summary: peak %r, want %s" % (v["summary"]["peak"], bytes_text(peak[0])))
    if "exact" not in (v["summary"]["mode"] or ""):
        problems.append("summary: recorded %r, want exact" % v["summary"]["mode"])
    if not v.get("keyboard_tab"):
        problems.append("the right arrow on the first tab did not open the next")
    if v.get("dark_bg") == v.get("light_bg"):
        problems.append("the dark scheme has the light background %s" % v.get("dark_bg"))
    return problems, details


def top_flat(suite, dump, hide):
    """`heaptrail top`'s flat bytes per function of dump, and its total."""
    out = must(suite, "top", "--bytes", "-n", "100000", "--hide", hide, dump)
    total = int(re.search(r" (\d+)( \(|$)", out.split("\n")[0]).group(1))
    flat = {}
    for line in out.split("\n")[2:]:
        f = line.split(None, 5)
        if len(f) == 6 and f[0].isdigit():
            flat[f[5]] = int(f[0])
    return flat, total


def exact_page(suite, prog_name, work_name, every, *args):
    """tests/progs/PROG_NAME.c run exact with a dump every EVERY, and
    its page: (the run's directory, the page's path)."""
    prog = build(suite, prog_name, os.path.join(common.HERE, "progs", prog_name + ".c"))
    out = os.path.join(work_dir(suite, work_name), "run")
    must(suite, "run", "-q", "--sample", "1", "--every", every, "-o", out, "--", prog, *args)
    page = os.path.join(os.path.dirname(out), "report.html")
    must(suite, "html", out, "-o", page)
    return out, page


def test_area(suite):
    out, page = exact_page(suite, "area_sites", "area", "50ms", "12")
    got, problems = drive(suite, page, name="area")
    g = got["views"]["growth"]
    details = [json.dumps(g, indent=1)[:4000]]
    # the rows and the folded wrapper are growth's
    growth_compare(suite, out, g, problems, details)
    if not (g.get("wrappers") or "").startswith("folded 1 allocation wrapper ") or \
            "wrap_alloc (3 callers)" not in g["wrappers"]:
        problems.append("growth: the page says %r of wrappers, want wrap_alloc folded" %
                        g.get("wrappers"))
    # the chart against `heaptrail top --hide wrap_alloc` of each dump: the
    # eight functions that held the most at any dump, each band their flat
    # bytes at every dump, the last band the rest of the dump's total
    dumps = sorted(f for f in os.listdir(out) if f.endswith(".heap"))
    tops = [top_flat(suite, os.path.join(out, d), "^wrap_alloc$") for d in dumps]
    names = set(n for flat, _ in tops for n in flat if any(f.get(n) for f, _ in tops))
    peak = {n: max(f.get(n, 0) for f, _ in tops) for n in names}
    largest = sorted(names, key=lambda n: -peak[n])[:8]
    bands = g.get("area") or []
    want = [(n, [f.get(n, 0) for f, _ in tops]) for n in largest]
    if [(b["site"], b["values"]) for b in bands[:8]] != want:
        problems.append("chart: bands %s, top's largest %s" % (bands[:8], want))
    other = [t - sum(f.get(n, 0) for n in largest) for f, t in tops]
    if len(bands) != 9 or bands[8]["site"] is not None or bands[8]["values"] != other:
        problems.append("chart: the last band %s, want the other sites' %s" % (bands[8:], other))
    if "wrap_alloc" in [b["site"] for b in bands]:
        problems.append("chart: the wrapper is a band of its own")
    legend = [x.split(" growing")[0] for x in g.get("legend") or []]
    if legend != largest + ["%d other sites" % (len(names) - 8)]:
        problems.append("chart: legend %s" % g.get("legend"))
    return problems, details


def test_growth_sampled(suite):
    prog = build(suite, "growth_sites", os.path.join(common.HERE, "progs", "growth_sites.c"))
    work = work_dir(suite, "growth-sampled")
    out = os.path.join(work, "run")
    must(suite, "run", "-q", "--sample", "65536", "--every", "100ms", "-o", out, "--", prog)
    page = os.path.join(work, "report.html")
    must(suite, "html", out, "-o", page)
    got, problems = drive(suite, page, name="growth-sampled")
    details = []
    growth_compare(suite, out, got["views"]["growth"], problems, details)
    if not any(r["cells"][3].startswith(("±", "+")) for r in got["views"]["growth"]["rows"]):
        problems.append("sampled: no ±90% column on the page")
    return problems, details


def json_procs(suite, out):
    d = json.loads(must(suite, "report", "--json", out))
    return d if isinstance(d, list) else [d]


def test_leaks(suite):
    problems, details = [], []
    fork = build(suite, "fork_leak", os.path.join(common.PROGS, "fork_leak.c"))
    leaky = os.path.join(suite.build, "examples", "leaky")
    for name, prog in (("leaky", leaky), ("fork_leak", fork)):
        work = work_dir(suite, name)
        out = os.path.join(work, "run")
        rc, _, err = run([suite.heaptrail, "run", "-q", "-o", out, "--", prog])
        if not os.path.isdir(out):
            raise Failure("heaptrail run %s: status %d: %s" % (name, rc, short(err)))
        page = os.path.join(work, "report.html")
        must(suite, "html", out, "-o", page)
        got, p = drive(suite, page, name=name)
        problems += ["%s: %s" % (name, x) for x in p]
        v = got["views"]
        details.append(json.dumps(v["procs"], indent=1)[:3000])
        procs = json_procs(suite, out)
        if len(v["procs"]) != len(procs):
            problems.append("%s: %d processes on the page, %d reports" % (
                name, len(v["procs"]), len(procs)))
        for pp, jp in zip(v["procs"], procs):
            want = {k: (s["bytes"], s["blocks"]) for k, s in jp["summary"].items()}
            have = {r["kind"]: (r["bytes"], r["blocks"]) for r in pp["kinds"]}
            if have != want:
                problems.append("%s pid %d: leak summary %s, report --json %s" % (
                    name, jp["pid"], have, want))
            if pp["pid"] != jp["pid"]:
                problems.append("%s: process %s on the page, %d in the report" % (
                    name, pp["pid"], jp["pid"]))
            for kind, got_bytes in pp["by_kind"].items():
                want_bytes = [r["bytes"] for r in jp["records"] if r["kind"] == kind]
                if got_bytes != want_bytes:
                    problems.append("%s pid %d: %s records %s, report --json %s" % (
                        name, jp["pid"], kind, got_bytes, want_bytes))
            kinds = sorted({r["kind"] for r in jp["records"]})
            if sorted(pp["by_kind"]) != kinds:
                problems.append("%s pid %d: the kind filter offers %s, records are %s" % (
                    name, jp["pid"], sorted(pp["by_kind"]), kinds))
            if pp["records"] != len(jp["records"]):
                problems.append("%s pid %d: %d records listed, %d in the report" % (
                    name, jp["pid"], pp["records"], len(jp["records"])))
        if name == "leaky":
            kinds = set(v["procs"][0]["by_kind"])
            if kinds != {"definitely_lost", "indirectly_lost", "possibly_lost",
                         "still_reachable"}:
                problems.append("leaky: kinds %s, want all four" % sorted(kinds))
            text = must(suite, "report", "--show-leak-kinds=all", "--gen-suppressions", out)
            supps = re.findall(r"^\s*suppression: (\S+)$", text, re.M)
            first = (v["leaks"].get("first") or {}).get("suppression")
            if not supps or first != supps[0]:
                problems.append("leaky: the first record's suppression %r, report prints %r" %
                                (first, supps[:1]))
            frames = (v["leaks"].get("first") or {}).get("frames") or []
            if not any(f[1] == "read_config" and f[2].endswith("leaky.c:25")
                       for f in frames):
                problems.append("leaky: the first record's stack lacks read_config at "
                                "leaky.c:25: %s" % frames)
    return problems, details


def test_pools(suite):
    if not os.path.exists("/usr/include/valgrind/valgrind.h"):
        raise Skip("valgrind.h not installed (Debian package valgrind)")
    prog = build(suite, "pools", os.path.join(common.HERE, "progs", "pools.c"), "-I",
                 os.path.join(common.ROOT, "include", "heaptrail", "compat"))
    work = work_dir(suite, "pools")
    out = os.path.join(work, "run")
    run([suite.heaptrail, "run", "-q", "-o", out, "--", prog], cwd=work)
    page = os.path.join(work, "report.html")
    must(suite, "html", out, "-o", page)
    got, problems = drive(suite, page, name="pools")
    v = got["views"]
    j = json_procs(suite, out)[0]
    want_pools = [[q["name"], q["lost_bytes"]] for q in j.get("pools", [])]
    if not want_pools or v["summary"]["pools"] != want_pools:
        problems.append("pools table %s, report --json %s" % (v["summary"]["pools"], want_pools))
    want = {}
    for r in j["records"]:
        want.setdefault(r.get("pool", ""), []).append(r["bytes"])
    if v["leaks"]["pools"] != want:
        problems.append("records by pool %s, report --json %s" % (v["leaks"]["pools"], want))
    return problems, [json.dumps(v["leaks"]["pools"])]


def page_data(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="ht-data">(.*?)</script>', text, re.S)
    if not m:
        raise Failure("%s: no data block" % path)
    return text, json.loads(m.group(1))


def test_bounded(suite):
    work = work_dir(suite, "bounded")
    src = os.path.join(work, "src")
    subprocess.run(["python3", os.path.join(common.ROOT, "bench", "analyze", "gen.py"), src,
                    "5000", "1", "100"], check=True)
    lib = os.path.join(work, "libbench0.so")
    prog = os.path.join(work, "prog")
    for cmd in ([suite.cc, "-g", "-O1", "-fPIC", "-shared", "-o", lib,
                 os.path.join(src, "libbench0.c")],
                [suite.cc, "-g", "-O1", "-rdynamic", "-o", prog, os.path.join(src, "prog.c"),
                 lib, "-Wl,-rpath," + work]):
        rc, _, err = run(cmd, env=os.environ)
        if rc:
            raise Failure("build failed: %s" % short(err))
    out = os.path.join(work, "run")
    must(suite, "run", "-q", "--sample", "1", "--final", "-o", out, "--", prog)
    problems = []
    sizes = {}
    for share in ("0.01", "0"):
        page = os.path.join(work, "r%s.html" % share)
        must(suite, "html", "--min-share", share, "-o", page, out)
        text, d = page_data(page)
        sizes[share] = len(text)
        for proc in d["procs"]:
            for dump in proc["dumps"]:
                nodes, more = dump["nodes"], dump["more"]
                sums = [0] * len(nodes)
                for n in nodes[1:]:
                    sums[n[0]] += n[2]
                for par, count, val in more:
                    sums[par] += val
                bad = [i for i, n in enumerate(nodes) if sums[i] + n[3] != n[2]]
                if bad:
                    problems.append("min-share %s, %s: %d nodes whose children, 'more' and "
                                    "self do not add up (node %d: %s)" % (
                                        share, dump["name"], len(bad), bad[0], nodes[bad[0]]))
                if share == "0.01" and len(nodes) > 2000:
                    problems.append("min-share 0.01: %d nodes kept" % len(nodes))
                if share == "0.01" and not more:
                    problems.append("min-share 0.01: no 'n more' node for 5000 stacks")
                if share == "0" and more:
                    problems.append("min-share 0: %d 'more' nodes" % len(more))
        for url in re.findall(r"""(?:src|href)\s*=\s*["']?([a-z]+:)""", text):
            problems.append("the page refers to %s" % url)
    if sizes["0.01"] >= sizes["0"]:
        problems.append("pruning did not shrink the page: %s" % sizes)
    return problems, ["page sizes %s" % sizes]


def test_cli(suite):
    problems = []
    work = work_dir(suite, "cli")
    out = os.path.join(work, "run")
    page = os.path.join(work, "page.html")
    rc, _, err = run([suite.heaptrail, "run", "-q", "--html", page, "-o", out, "--",
                      os.path.join(suite.build, "examples", "leaky")])
    if not os.path.exists(page):
        problems.append("run --html wrote no page: status %d: %s" % (rc, short(err)))
    else:
        mode = stat.S_IMODE(os.stat(page).st_mode)
        if mode != 0o600:
            problems.append("run --html: mode %o" % mode)
        _, d = page_data(page)
        want = json_procs(suite, out)[0]["summary"]
        if d["procs"][0]["report"]["summary"] != want:
            problems.append("run --html: summary %s, report --json %s" % (
                d["procs"][0]["report"]["summary"], want))
    rc, stdout, err = run([suite.heaptrail, "html", "-o", "-", out])
    if rc or not stdout.startswith(b"<!DOCTYPE html>"):
        problems.append("html -o -: status %d, %s" % (rc, short(stdout)))
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    for args, what in ((["html", os.path.join(work, "missing")], "a missing directory"),
                       (["html", empty], "an empty directory"),
                       (["html", "--min-share", "2", out], "--min-share 2")):
        rc, _, err = run([suite.heaptrail] + args)
        lines = stderr_lines(err)
        if rc == 0 or len(lines) != 1:
            problems.append("%s: status %d, stderr %s" % (what, rc, lines))
    return problems, []


def test_callers(suite):
    out, page = exact_page(suite, "wrapper_sites", "callers", "100ms", "20")
    got, problems = drive(suite, page, name="callers", peek=["xalloc", "main"], tree=True)
    fl = got["views"]["flame"]
    details = [json.dumps(fl.get("peek"), indent=1)]
    dump = os.path.join(out, fl.get("dump") or "?")
    # the pairs of `heaptrail collapsed`'s stacks, each stack once per pair
    pairs = {}
    for line in must(suite, "collapsed", dump).splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        for pair in set(zip(frames, frames[1:])):
            if pair[0] != pair[1]:
                pairs[pair] = pairs.get(pair, 0) + int(n)
    # the tree tables: each row's total is the collapsed stacks under its
    # path (root first for top-down, the allocation site first for
    # bottom-up), its self those ending there; siblings largest first
    stacks = [(l.rsplit(" ", 1)[0].split(";"), int(l.rsplit(" ", 1)[1]))
              for l in must(suite, "collapsed", dump).splitlines()]
    tree = fl.get("tree") or {}
    for d, rows in (("top-down", tree.get("top-down")), ("bottom-up", tree.get("bottom-up"))):
        if not rows or rows[0][1] != "all":
            problems.append("%s table: rows %s" % (d, rows))
            continue
        path, sibs = [], {}
        for depth, name, v, self_ in rows[1:]:
            path = path[:depth - 1] + [name]
            sibs.setdefault(tuple(path[:-1]), []).append(v)
            fr = [(f if d == "top-down" else f[::-1], n) for f, n in stacks]
            want_v = sum(n for f, n in fr if f[:len(path)] == path)
            want_self = sum(n for f, n in fr if f == path)
            if (v, self_) != (want_v, want_self):
                problems.append("%s table: %s total %d self %d, collapsed's %d, %d" % (
                    d, ";".join(path), v, self_, want_v, want_self))
        if any(vs != sorted(vs, reverse=True) for vs in sibs.values()):
            problems.append("%s table: siblings not largest first: %s" % (d, sibs))
        if d == "bottom-up":
            sites = sorted([r[1], r[2]] for r in rows if r[0] == 1)
            want = sorted([r[0], r[1]] for r in fl.get("top") or [] if r[1])
            if sites != want:
                problems.append("bottom-up: allocation sites %s, top's flat %s" % (sites, want))
    names = [r[1] for r in (tree.get("by_name") or []) if r[0] == 1]
    if not names or names != sorted(names):
        problems.append("tree sorted by name: %s" % names)
    flat = {r[0]: r[1] for r in fl.get("top") or []}
    for name, pk in sorted((fl.get("peek") or {}).items()):
        want_in = sorted([c, v] for (c, f), v in pairs.items() if f == name and v)
        want_out = sorted([f, v] for (c, f), v in pairs.items() if c == name and v)
        if sorted(pk["callers"]) != want_in or sorted(pk["callees"]) != want_out:
            problems.append("%s: callers %s, callees %s; collapsed's %s, %s" % (
                name, pk["callers"], pk["callees"], want_in, want_out))
        if pk["self"] != flat.get(name):
            problems.append("%s: itself %s, top's flat %s" % (name, pk["self"], flat.get(name)))
        if pk["search"] != "^%s$" % name:
            problems.append("%s: the flame graph searched %r" % (name, pk["search"]))
    # by construction: cache_fill kept 5 blocks of 8 KiB through xalloc,
    # and leak_requests 16 KiB a step
    callers = dict(map(tuple, (fl.get("peek") or {}).get("xalloc", {}).get("callers", [])))
    if callers.get("cache_fill") != 5 * 8192:
        problems.append("xalloc's caller cache_fill holds %s, the program kept 5 x 8 KiB" %
                        callers.get("cache_fill"))
    if not callers.get("leak_requests") or callers["leak_requests"] % 16384:
        problems.append("xalloc's caller leak_requests holds %s, not a multiple of 16 KiB" %
                        callers.get("leak_requests"))
    return problems, details


def shape_constants():
    """alloc_shape.c's loop counts, read from its source."""
    src = open(os.path.join(common.HERE, "progs", "alloc_shape.c")).read()
    return {k: int(re.search(r"#define %s (\d+)" % k, src).group(1))
            for k in ("TEMP_N", "PAIR_N", "KEEP_N", "THR_N")}


def test_shape(suite):
    prog = build(suite, "alloc_shape", os.path.join(common.HERE, "progs", "alloc_shape.c"),
                 "-pthread")
    c = shape_constants()
    work = work_dir(suite, "shape")
    problems, details = [], []
    out = os.path.join(work, "exact")
    must(suite, "run", "-q", "--sample", "1", "--interval", "100k", "-o", out, "--", prog)
    page = os.path.join(work, "exact.html")
    must(suite, "html", out, "-o", page)
    got, more = drive(suite, page, name="shape")
    problems += more
    sh = got["views"]["summary"]["shape"]
    details.append(json.dumps(sh))
    # size classes [2^k, 2^(k+1)): 24 -> 4, 64 -> 6, 1000 -> 9, 3000 -> 11, 5000 -> 12
    want = {4: c["TEMP_N"], 6: c["THR_N"], 9: c["PAIR_N"], 11: c["PAIR_N"], 12: c["KEEP_N"]}
    sizes = dict(map(tuple, sh["sizes"]))
    for k, n in sorted(want.items()):
        if sizes.get(k) != n:
            problems.append("size class [%d, %d): %s allocations, the program made %d" % (
                2 ** k, 2 ** (k + 1), sizes.get(k), n))
    # the rest is libc's own (the thread's TLS): a few, and the histogram
    # holds every allocation the report counts
    others = sum(n for k, n in sizes.items() if k not in want)
    if others > 3:
        problems.append("%d allocations outside the program's size classes" % others)
    allocs = json_procs(suite, out)[0]["totals"]["allocs"]
    if sum(sizes.values()) != allocs:
        problems.append("the histogram holds %d allocations, report --json %s" % (
            sum(sizes.values()), allocs))
    want_temp = c["TEMP_N"] + c["PAIR_N"] + c["THR_N"]
    if sh["temporary"] != want_temp:
        problems.append("temporary allocations %s, the program made %d" % (sh["temporary"], want_temp))
    # report: the text's line and the JSON's shape
    rep = json_procs(suite, out)[0].get("shape") or {}
    if rep.get("temporary") != want_temp or \
            any(rep.get("sizes", [0] * 32)[k] != n for k, n in want.items()):
        problems.append("report --json shape %s" % rep)
    text = must(suite, "report", out)
    m = re.search(r"^   temporary allocations: ([\d,]+) \(", text, re.M)
    if not m or int(m.group(1).replace(",", "")) != want_temp:
        problems.append("report: %r, want %d temporary allocations" % (
            m and m.group(0), want_temp))
    # the dumps carry the counts so far: the last one, everything
    dumps = sorted(f for f in os.listdir(out) if f.endswith(".heap"))
    lines = [l for l in open(os.path.join(out, dumps[-1])) if l.startswith("# heaptrail-shape ")]
    if not dumps or len(lines) != 1:
        problems.append("the last dump has %d shape lines" % len(lines))
    # sampled: not available, no histogram
    out = os.path.join(work, "sampled")
    must(suite, "run", "-q", "--sample", "4096", "--interval", "100k", "-o", out, "--", prog)
    page = os.path.join(work, "sampled.html")
    must(suite, "html", out, "-o", page)
    got, more = drive(suite, page, name="shape-sampled")
    problems += more
    sh = got["views"]["summary"]["shape"]
    if sh["sizes"] or sh["temporary"] is not None or not (sh["none"] or "").startswith("Not available"):
        problems.append("sampled: the page shows %s" % sh)
    if any(l.startswith(("# heaptrail-shape", "shape ")) for f in os.listdir(out)
           for l in open(os.path.join(out, f), errors="replace")):
        problems.append("sampled: a file has a shape line")
    if "temporary allocations" in must(suite, "report", out):
        problems.append("sampled: report counts temporary allocations")
    return problems, details


def test_attach(suite):
    """`heaptrail attach --html FILE PID` waits for the attach to end and
    writes the page then: here at `heaptrail detach PID` from elsewhere,
    and after --for."""
    import test_attach
    work, prog = test_attach.build(suite)
    problems, details = [], []
    base = work_dir(suite, "attach")
    t = test_attach.Target(prog, work)
    try:
        out = os.path.join(base, "detached")
        page = os.path.join(base, "detached.html")
        a = subprocess.Popen([suite.heaptrail, "attach", "--sample", "1", "--every", "200ms",
                              "--html", page, "-o", out, str(t.p.pid)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(2.5)
        if a.poll() is not None:
            problems.append("attach --html ended before the detach: status %d: %s" % (
                a.returncode, short(a.stderr.read())))
        if os.path.exists(page):
            problems.append("attach --html wrote the page before the detach")
        rc, _, err = run([suite.heaptrail, "detach", str(t.p.pid)])
        if rc:
            problems.append("detach: status %d: %s" % (rc, short(err)))
        try:
            _, err = a.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            a.kill()
            a.communicate()
            raise Failure("attach --html did not end after the detach")
        details.append(err.decode(errors="replace"))
        if a.returncode:
            problems.append("attach --html: status %d: %s" % (a.returncode, short(err)))
        if not os.path.exists(page):
            problems.append("attach --html wrote no page after the detach")
        else:
            mode = stat.S_IMODE(os.stat(page).st_mode)
            if mode != 0o600:
                problems.append("attach --html: mode %o" % mode)
            got, more = drive(suite, page, name="attach")
            problems += more
            v = got["views"]
            growth_compare(suite, out, v["growth"], problems, details)
            fl = v["flame"]
            dump = os.path.join(out, fl.get("dump") or "?")
            if not fl.get("dump", "").endswith(".final.heap"):
                problems.append("flame: the last dump is %s, want the detach's final dump" %
                                fl.get("dump"))
            else:
                text = must(suite, "top", "--bytes", "-n", "100", dump)
                want = [[f[5], int(f[0]), int(f[3])] for f in
                        (l.split(None, 5) for l in text.split("\n")[2:])
                        if len(f) == 6 and f[0].isdigit()]
                if not want or fl.get("top") != want:
                    problems.append("functions table %s, heaptrail top %s" % (fl.get("top"), want))
            if "since attach" not in (v["growth"].get("head") or ""):
                problems.append("growth heading %r lacks 'since attach'" % v["growth"].get("head"))
        # --for: the page after heaptrail's own detach
        out = os.path.join(base, "for")
        page = os.path.join(base, "for.html")
        rc, _, err = run([suite.heaptrail, "attach", "--for", "1s", "--html", page, "-o", out,
                          str(t.p.pid)])
        if rc or not os.path.exists(page):
            problems.append("attach --for 1s --html: status %d, page %s: %s" % (
                rc, os.path.exists(page), short(err)))
        rc, _, err = run([suite.heaptrail, "attach", "--html", os.path.join(base, "no", "p.html"),
                          str(t.p.pid)])
        if rc != 2 or len(stderr_lines(err)) != 1:
            problems.append("attach --html into a missing directory: status %d, %s" % (
                rc, stderr_lines(err)))
        test_attach.check_end(t, problems, ["ready", "done held=0 cached=256"])
    finally:
        t.kill()
    return problems, details


def test_live(suite):
    import test_live
    env = browser_env(suite)
    live = test_live.Live(suite, "html", extra=("--every", "200ms"))
    problems, details = [], []
    try:
        live.say("go")
        for _ in range(100):
            if sum(f.endswith(".heap") for f in os.listdir(live.out)) >= 4:
                break
            time.sleep(0.1)
        st, body, ctype = live.get("/")
        if st != 200 or not ctype.startswith("text/html") or b'id="ht-data"' not in body:
            problems.append("GET /: status %d, %s, %r" % (st, ctype, body[:100]))
        st, body, ctype = live.get("/debug/heaptrail/page.json")
        try:
            d = json.loads(body)
            if [p["pid"] for p in d["procs"]] != [live.pid]:
                problems.append("page.json: processes %s, want %d" % (
                    [p["pid"] for p in d["procs"]], live.pid))
            elif d["procs"][0]["command"] != [live.prog]:
                problems.append("page.json: command %s, want %s" % (
                    d["procs"][0]["command"], [live.prog]))
        except ValueError:
            problems.append("page.json: status %d, not JSON: %r" % (st, body[:100]))
        p = subprocess.run(["node", os.path.join(BROWSER_SRC, "live_page.js"), live.base + "/"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        # the page keeps what it read of each dump from one call to the
        # next: after the driver's many, each dump shown is still its
        # file's (its total as `heaptrail top` reads it), in
        # time order, the last ones written; asked for again and again
        # while the window of the last 30 slides on
        def numbered():
            return sorted(f for f in os.listdir(live.out) if f.endswith(".heap") and
                          f.split(".")[2].isdigit())
        for _ in range(100):
            live.get("/debug/heaptrail/page.json")
            if len(numbered()) >= 40:
                break
            time.sleep(0.3)
        st, body, ctype = live.get("/debug/heaptrail/page.json")
        shown = json.loads(body)["procs"][0]["dumps"] if st == 200 else []
        on_disk = numbered()
        names = [x["name"] for x in shown]
        # (the last on the page is the last written, or the one before:
        # another may have come since the answer)
        if len(names) != 30 or names != on_disk[on_disk.index(names[0]):][:len(names)] or \
                names[-1] not in on_disk[-2:]:
            problems.append("page.json after the updates shows %s, the directory has %s" % (
                names, on_disk))
        for x in shown[:: max(1, len(shown) // 6)]:
            out = must(suite, "top", "--bytes", "-n", "1", os.path.join(live.out, x["name"]))
            total = int(re.search(r" (\d+)( \(|$)", out.split("\n")[0]).group(1))
            if x["inuse"] != total:
                problems.append("page.json: %s holds %s, heaptrail top says %d" % (
                    x["name"], x["inuse"], total))
        live.say("stop")
        if p.returncode:
            raise Failure("the live driver: status %d: %s" % (p.returncode, short(p.stderr, 600)))
        got = json.loads(p.stdout)
        details.append(json.dumps(got, indent=1))
        problems += ["the live page: %s" % e for e in got["errors"]]
        problems += ["the live page asked for %s" % r for r in got["requests"]]
        if got["mark"] != "not reloaded":
            problems.append("the page was reloaded")
        if not got["updates"] or not got["last_before"] or got["last_after"] == got["last_before"]:
            problems.append("no new dump on the page in 20 s (last %s then %s, %s updates)" % (
                got["last_before"], got["last_after"], got["updates"]))
        if got["view"] != "tab-growth":
            problems.append("after an update the view is %s, not growth" % got["view"])
        if got["search_after"] != "grow_site":
            problems.append("after an update the search is %r" % got["search_after"])
        if not (got["matched_after"] or 0) > (got["matched_before"] or 0):
            problems.append("grow_site's matched bytes went from %s to %s" % (
                got["matched_before"], got["matched_after"]))
        trend = {r["site"]: (r["rank"], r["trend"]) for r in got["rows_after"]}
        if trend.get("grow_site") != ("1", "growing"):
            problems.append("growth on the live page: grow_site is %s" % (trend.get("grow_site"),))
        if trend.get("flat_site", ("", ""))[1] == "growing":
            problems.append("growth on the live page: flat_site is growing")
    finally:
        live.close_checked(problems)
    return problems, details


def collect(suite):
    return [("html:growth", lambda: test_growth(suite)),
            ("html:growth-sampled", lambda: test_growth_sampled(suite)),
            ("html:live", lambda: test_live(suite)),
            ("html:leaks", lambda: test_leaks(suite)),
            ("html:pools", lambda: test_pools(suite)),
            ("html:bounded", lambda: test_bounded(suite)),
            ("html:cli", lambda: test_cli(suite)),
            ("html:attach", lambda: test_attach(suite)),
            ("html:callers", lambda: test_callers(suite)),
            ("html:shape", lambda: test_shape(suite)),
            ("html:area", lambda: test_area(suite))]
