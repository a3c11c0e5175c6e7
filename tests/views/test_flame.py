"""heaptrail flame and heaptrail timeline, on the prof_cache run of
common.dumps(): the SVG parses, frame widths are the values `heaptrail top
--bytes` gives, the differential graph colours the grower red, the
timeline's peak is the file's, the top at the peak names the program's
two sites, and bad input gives a one-line error.

prof_cache (tests/e2e/progs/prof_cache.c) holds load_config's 96 MiB from
the start, grows cache_grow by 1 MiB a step, and allocates (and frees)
8 MiB a step in handle_request.
"""
import html
import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import run_tests
import test_top
from run_tests import Failure, Skip, run, stderr_lines, short

SVG = "{http://www.w3.org/2000/svg}"
MIB = 1 << 20


def work_dir(suite, name):
    return run_tests.fresh_dir(os.path.join(suite.build, "e2e", "analyze",
                                            "flame", name))


def ht(suite, *args, cwd=None):
    return run([suite.heaptrail] + list(args), cwd=cwd)


def must(suite, *args):
    rc, out, err = ht(suite, *args)
    if rc != 0:
        raise Failure("heaptrail %s: status %d: %s" % (" ".join(args), rc,
                                                       short(err)))
    return out.decode()


def parse_svg(path):
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as e:
        raise Failure("%s is not XML: %s" % (path, e))


def frames(root):
    """The flame graph's frames: dicts of name, tip, x, y, w, fill."""
    out = []
    for g in root.iter(SVG + "g"):
        if g.get("class") != "htf-f":
            continue
        tip = g.find(SVG + "title").text or ""
        r = g.find(SVG + "rect")
        out.append({"name": tip.split("\n")[0], "tip": tip,
                    "x": float(r.get("x")), "y": float(r.get("y")),
                    "w": float(r.get("width")), "fill": r.get("fill"),
                    "label": g.find(SVG + "text").text or ""})
    return out


def top_cum(suite, dump, value):
    """{function: cum} and the total from `heaptrail top --bytes`."""
    out = must(suite, "top", "--bytes", "-n", "1000", value, dump)
    total = int(re.search(r" (\d+)( \(|$)", out.split("\n")[0]).group(1))
    cum = {}
    for line in out.split("\n")[2:]:
        m = test_top.ROW.match(line)
        if m:
            cum[m.group(6)] = int(m.group(4))
    return cum, total


def one_line_error(problems, what, rc, err, mention):
    lines = stderr_lines(err)
    if rc == 0:
        problems.append("%s: exit status 0" % what)
    if not lines:
        problems.append("%s: no error message" % what)
    elif not lines[0].startswith("heaptrail: "):
        problems.append("%s: error %r" % (what, lines[0]))
    elif mention not in lines[0]:
        problems.append("%s: error does not name %r: %r" % (what, mention,
                                                          lines[0]))
    # usage errors add the usage text; anything else says one line only
    if rc != 2 and len(lines) != 1:
        problems.append("%s: %d lines on stderr: %r" % (what, len(lines),
                                                       short(err)))


# ---------------------------------------------------------------- flame

def check_widths(suite, value, names, tag):
    _, dumps, _ = common.dumps(suite)
    dump = dumps[-1]
    work = work_dir(suite, tag)
    svg = os.path.join(work, "out.svg")
    args = ["flame", dump, "-o", svg] + ([value] if value else [])
    must(suite, *args)
    root = parse_svg(svg)
    fs = frames(root)
    problems, details = [], []
    cum, total = top_cum(suite, dump, value or "--inuse-space")
    alls = [f for f in fs if f["name"] == "all"]
    if len(alls) != 1:
        raise Failure("%d root frames ('all'), expected 1" % len(alls))
    full = alls[0]["w"]
    for name in names:
        got = [f for f in fs if f["name"] == name]
        if len(got) != 1:
            problems.append("%d frames named %s, expected 1" % (len(got), name))
            continue
        want = cum.get(name)
        if not want:
            problems.append("top does not list %s" % name)
            continue
        share, want_share = got[0]["w"] / full, want / total
        details.append("%s: %.4f of the width, top says %d / %d = %.4f" %
                       (name, share, want, total, want_share))
        if abs(share - want_share) > 1e-3 * max(want_share, 0.01):
            problems.append("%s is %.4f of the width, top says %.4f" %
                            (name, share, want_share))
        if name not in got[0]["label"] and got[0]["w"] > 200:
            problems.append("%s: a wide frame labelled %r" %
                            (name, got[0]["label"]))
    return problems, details, root, fs


def test_inuse(suite):
    problems, details, root, fs = check_widths(
        suite, None, ["load_config", "cache_grow", "main"], "inuse")
    load = [f for f in fs if f["name"] == "load_config"]
    if load and not 0.60 <= load[0]["w"] / max(f["w"] for f in fs) <= 0.70:
        problems.append("load_config (96 of ~147 MiB) is %.2f of the width" %
                        (load[0]["w"] / max(f["w"] for f in fs)))
    if load and "96.00 MiB" not in load[0]["tip"]:
        problems.append("load_config's tooltip: %r" % load[0]["tip"])
    if load and "prof_cache.c:" not in load[0]["tip"]:
        problems.append("load_config's tooltip has no file:line: %r" %
                        load[0]["tip"])
    # the script: zoom, reset, search with the matched share
    script = "".join(s.text or "" for s in root.iter(SVG + "script"))
    for what in ("function zoom", "function reset", "function search",
                 "Matched: ", "addEventListener('click'"):
        if what not in script:
            problems.append("the script has no %r" % what)
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    for want in ("htf-search", "htf-reset", "htf-matched", "htf-details"):
        if want not in ids:
            problems.append("no element %s" % want)
    # root at the bottom: every frame above 'all'
    rooty = [f["y"] for f in fs if f["name"] == "all"][0]
    if any(f["y"] > rooty for f in fs):
        problems.append("a frame below the root in the default orientation")
    return problems, details


def test_alloc(suite):
    problems, details, _, fs = check_widths(
        suite, "--alloc-space", ["handle_request", "load_config", "cache_grow"],
        "alloc")
    return problems, details


def test_inverted_reverse(suite):
    _, dumps, _ = common.dumps(suite)
    work = work_dir(suite, "inverted")
    problems, details = [], []
    inv = os.path.join(work, "inv.svg")
    must(suite, "flame", "--inverted", dumps[-1], "-o", inv)
    fs = frames(parse_svg(inv))
    rooty = [f["y"] for f in fs if f["name"] == "all"][0]
    if any(f["y"] < rooty for f in fs):
        problems.append("--inverted: a frame above the root")
    leafy = [f["y"] for f in fs if f["name"] == "cache_grow"]
    if not leafy or leafy[0] <= rooty:
        problems.append("--inverted: cache_grow not below the root")
    rev = os.path.join(work, "rev.svg")
    must(suite, "flame", "--reverse", dumps[-1], "-o", rev)
    fs = frames(parse_svg(rev))
    rooty = [f["y"] for f in fs if f["name"] == "all"][0]
    first = sorted(f["name"] for f in fs if f["y"] == rooty - 16)
    details.append("--reverse: above the root: %s" % first)
    if first != ["cache_grow", "load_config"]:
        problems.append("--reverse: the frames on the root are %s, expected "
                        "the allocation sites cache_grow and load_config" %
                        first)
    return problems, details


def rgb(fill):
    m = re.match(r"rgb\((\d+),(\d+),(\d+)\)", fill or "")
    if not m:
        raise Failure("fill %r is not rgb()" % fill)
    return tuple(int(x) for x in m.groups())


def test_diff(suite):
    _, dumps, _ = common.dumps(suite)
    if len(dumps) < 3:
        raise Failure("%d dumps: prof_cache should give about 10" % len(dumps))
    work = work_dir(suite, "diff")
    svg = os.path.join(work, "diff.svg")
    must(suite, "flame", dumps[-1], "--base", dumps[0], "-o", svg)
    fs = frames(parse_svg(svg))
    problems, details = [], []
    by = {f["name"]: f for f in fs}
    if "cache_grow" not in by or "load_config" not in by:
        raise Failure("frames: %s" % sorted(by))
    r, g, b = rgb(by["cache_grow"]["fill"])
    details.append("cache_grow %s, load_config %s" %
                   (by["cache_grow"]["fill"], by["load_config"]["fill"]))
    if not (r == 255 and g < 128 and b < 128):
        problems.append("cache_grow, the grower, is %s, not red" %
                        by["cache_grow"]["fill"])
    if "change +" not in by["cache_grow"]["tip"]:
        problems.append("cache_grow's tooltip shows no growth: %r" %
                        by["cache_grow"]["tip"])
    r, g, b = rgb(by["load_config"]["fill"])
    if r - b > 40:
        problems.append("load_config, which does not grow, is %s (red)" %
                        by["load_config"]["fill"])
    # widths are the new dump's
    cum, total = top_cum(suite, dumps[-1], "--inuse-space")
    share = by["cache_grow"]["w"] / by["all"]["w"]
    if abs(share - cum["cache_grow"] / total) > 1e-3:
        problems.append("cache_grow is %.4f of the width, %.4f in the new "
                        "dump" % (share, cum["cache_grow"] / total))
    return problems, details


def test_escape(suite):
    """Names with < > & (C++ templates) come out escaped and parse back."""
    spec = suite.specs["cxx_leaks"]
    binary = suite.build_prog(spec, "fp")
    work = work_dir(suite, "escape")
    out = os.path.join(work, "run")
    rc, _, err = run([suite.heaptrail, "run", "--sample", "1", "--final",
                      "-o", out, "--", binary])
    heaps = sorted(f for f in os.listdir(out) if f.endswith(".heap")) \
        if os.path.isdir(out) else []
    if not heaps:
        raise Failure("no final dump from cxx_leaks: %s" % short(err))
    svg = os.path.join(work, "cxx.svg")
    must(suite, "flame", os.path.join(out, heaps[-1]), "--title",
         "a <title> & \"quotes\"", "-o", svg)
    root = parse_svg(svg)
    names = {f["name"] for f in frames(root)}
    problems = []
    if not any("leaky::make_array_of<short>(" in n for n in names):
        problems.append("no frame leaky::make_array_of<short> in %s" %
                        sorted(names))
    if "make_array_of&lt;short&gt;" not in open(svg).read():
        problems.append("'<' is not written as &lt;")
    texts = [t.text for t in root.iter(SVG + "text")]
    if "a <title> & \"quotes\"" not in texts:
        problems.append("--title did not come back: %r" % texts[:3])
    return problems, ["%d frames" % len(names)]


def test_empty(suite):
    _, dumps, _ = common.dumps(suite)
    work = work_dir(suite, "empty")
    svg = os.path.join(work, "empty.svg")
    must(suite, "flame", dumps[-1], "--focus", "^no_such_function$", "-o", svg)
    root = parse_svg(svg)
    problems = []
    if frames(root):
        problems.append("%d frames in an empty graph" % len(frames(root)))
    text = " ".join(t.text or "" for t in root.iter(SVG + "text"))
    if "Nothing to draw" not in text:
        problems.append("the empty graph does not say so: %r" % short(text))
    return problems, []


def test_flame_errors(suite):
    _, dumps, _ = common.dumps(suite)
    work = work_dir(suite, "errors")
    problems = []
    bad = os.path.join(work, "no", "such", "dir", "x.svg")
    rc, _, err = ht(suite, "flame", dumps[-1], "-o", bad)
    one_line_error(problems, "unwritable -o", rc, err, bad)
    missing = os.path.join(work, "missing.heap")
    rc, _, err = ht(suite, "flame", missing, "-o", os.path.join(work, "a.svg"))
    one_line_error(problems, "missing dump", rc, err, missing)
    rc, _, err = ht(suite, "flame", dumps[-1], "--base", missing, "-o",
                    os.path.join(work, "b.svg"))
    one_line_error(problems, "missing base", rc, err, missing)
    rc, _, err = ht(suite, "flame", dumps[-1])
    one_line_error(problems, "no -o", rc, err, "-o")
    rc, _, err = ht(suite, "flame", dumps[-1], "-o", os.path.join(work, "c.svg"),
                    "--width", "ten")
    one_line_error(problems, "bad --width", rc, err, "ten")
    left = [f for f in os.listdir(work)]
    if left:
        problems.append("files left after failures: %s" % left)
    return problems, []


HARNESS_JS = """
<script>
function frame(name) {
  var gs = document.querySelectorAll('#htf-frames > g');
  for (var i = 0; i < gs.length; i++)
    if (gs[i].querySelector('title').textContent.split('\\n')[0] === name)
      return gs[i];
}
function state(tag) {
  var s = [tag];
  document.querySelectorAll('#htf-frames > g').forEach(function (g) {
    var r = g.querySelector('rect');
    s.push([g.querySelector('title').textContent.split('\\n')[0],
            g.style.display === 'none' ? 'hidden' : 'shown',
            r.getAttribute('width'), r.getAttribute('fill')].join('|'));
  });
  s.push('matched|' + document.getElementById('htf-matched').textContent);
  return s.join('\\n');
}
var click = function (el) {
  el.dispatchEvent(new MouseEvent('click', {bubbles: true}));
};
var out = [];
click(frame('cache_grow').querySelector('rect'));
out.push(state('zoomed'));
click(document.getElementById('htf-reset'));
window.prompt = function () { return '^load_'; };
click(document.getElementById('htf-search'));
out.push(state('searched'));
document.getElementById('result').textContent = out.join('\\n@@\\n');
</script>
"""


def test_script(suite):
    """The embedded script in a real browser: click cache_grow to zoom,
    reset, search ^load_; read the DOM back."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    if not chromium:
        raise Skip("no chromium to run the SVG's script in")
    _, dumps, _ = common.dumps(suite)
    work = work_dir(suite, "script")
    svg = os.path.join(work, "g.svg")
    must(suite, "flame", dumps[-1], "-o", svg)
    body = re.sub(r"^<\?xml[^>]*\?>\s*", "", open(svg).read())
    page = os.path.join(work, "page.html")
    with open(page, "w") as f:
        f.write("<!DOCTYPE html><html><body>" + body +
                "<pre id='result'></pre>" + HARNESS_JS + "</body></html>")
    rc, out, err = run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--user-data-dir=" + os.path.join(work, "profile"),
                        "--virtual-time-budget=3000", "--dump-dom",
                        "file://" + page], timeout=120)
    m = re.search(r"<pre id=\"result\">(.*?)</pre>", out.decode(), re.S)
    if rc != 0 or not m or not m.group(1).strip():
        raise Failure("chromium: status %d, no result: %s" % (rc, short(err)))
    zoomed, searched = html.unescape(m.group(1)).split("\n@@\n")
    problems, details = [], [zoomed, searched]

    def rows(block):
        out = {}
        for line in block.split("\n")[1:]:
            f = line.split("|")
            if f[0] == "matched":
                out["matched"] = f[1]
            else:
                out[f[0]] = f
        return out
    z = rows(zoomed)
    full = float(z["all"][2])
    if z["load_config"][1] != "hidden":
        problems.append("zoomed on cache_grow, load_config still shown")
    if z["cache_grow"][1] != "shown" or abs(float(z["cache_grow"][2]) - full) > 0.01:
        problems.append("zoomed on cache_grow, it is %s wide of %s" %
                        (z["cache_grow"][2], full))
    s = rows(searched)
    if s["load_config"][3] != "rgb(224,64,192)":
        problems.append("search ^load_: load_config is %s, not highlighted" %
                        s["load_config"][3])
    if s["cache_grow"][3] == "rgb(224,64,192)":
        problems.append("search ^load_ highlighted cache_grow")
    if s["load_config"][1] != "shown":
        problems.append("reset did not bring load_config back")
    cum, total = top_cum(suite, dumps[-1], "--inuse-space")
    m = re.search(r"Matched: ([\d.]+)%", s.get("matched", ""))
    want = 100.0 * cum["load_config"] / total
    if not m or abs(float(m.group(1)) - want) > 0.06:
        problems.append("search ^load_ says %r, load_config is %.1f%%" %
                        (s.get("matched"), want))
    return problems, details


# ---------------------------------------------------------------- timeline

def read_timeline(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rows.append([int(x) for x in line.split()])
    return rows


def the_timeline(suite):
    out, _, _ = common.dumps(suite)
    tl = [f for f in os.listdir(out) if f.endswith(".timeline")]
    if len(tl) != 1:
        raise Failure("%d timelines in %s, expected 1" % (len(tl), out))
    return out, os.path.join(out, tl[0])


def test_timeline_text(suite):
    out, path = the_timeline(suite)
    rows = read_timeline(path)
    peak = max(r[1] for r in rows)
    text = must(suite, "timeline", out)
    problems, details = [], [text]
    m = re.search(r"^peak: .* live \(([\d,]+) bytes", text, re.M)
    if not m:
        raise Failure("no peak line in %r" % short(text, 1000))
    got = int(m.group(1).replace(",", ""))
    if got != peak:
        problems.append("peak %d, the timeline's largest live bytes are %d" %
                        (got, peak))
    top = re.search(r"^ *([\d.]+)\^", text, re.M)
    if not top or abs(float(top.group(1)) - peak / MIB) > 0.006:
        problems.append("the y axis tops at %r, the peak is %.2f MiB" %
                        (top and top.group(1), peak / MIB))
    if text.count("#") < 10:
        problems.append("the peak column is not marked with '#'")
    if not re.search(r"^ *0 \+-+> s$", text, re.M):
        problems.append("no x axis in seconds")
    tail = text.split("top allocation sites at the peak")
    if len(tail) != 2:
        problems.append("no top allocation sites at the peak")
    else:
        funcs = [l.split()[-1] for l in tail[1].split("\n")[2:] if l.strip()]
        if funcs[:2] != ["load_config", "cache_grow"]:
            problems.append("the top at the peak is %s, expected load_config "
                            "then cache_grow" % funcs)
    return problems, details


def test_timeline_svg(suite):
    out, path = the_timeline(suite)
    rows = read_timeline(path)
    peak = max(r[1] for r in rows)
    work = work_dir(suite, "timeline-svg")
    svg = os.path.join(work, "t.svg")
    must(suite, "timeline", out, "--svg", svg)
    root = parse_svg(svg)
    problems, details = [], []
    g = [e for e in root.iter(SVG + "g") if e.get("id") == "htt-peak"]
    if len(g) != 1:
        raise Failure("no peak marker")
    title = g[0].find(SVG + "title").text
    if "(%s bytes)" % "{:,}".format(peak) not in title:
        problems.append("peak marker %r, the timeline's peak is %d" %
                        (title, peak))
    live = [e for e in root.iter(SVG + "polyline") if e.get("id") == "htt-live"]
    rss = [e for e in root.iter(SVG + "polyline") if e.get("id") == "htt-rss"]
    if len(live) != 1 or len(rss) != 1:
        raise Failure("want one live and one RSS line")
    pts = [tuple(map(float, p.split(","))) for p in live[0].get("points").split()]
    # The line has the lowest and the highest tick of each pixel column
    # (one point when they are equal): ticks closer than a column (a
    # "just before" row 1 ms ahead of its tick) share one. The scale comes
    # from the line's ends, the first tick's and the last's; a tick on a
    # column's edge may round either way, hence the slack of 2.
    ms0, ms1 = rows[0][0], rows[-1][0]
    sx = (pts[-1][0] - pts[0][0]) / (ms1 - ms0) if ms1 > ms0 and len(pts) > 1 else 0
    cols = {}
    for r in rows:
        c = round(r[0] * sx)
        lo, hi = cols.get(c, (r[1], r[1]))
        cols[c] = (min(lo, r[1]), max(hi, r[1]))
    want = sum(1 if lo == hi else 2 for lo, hi in cols.values())
    if abs(len(pts) - want) > 2 or len(pts) > len(rows):
        problems.append("%d points for %d ticks in %d pixel columns (want %d)"
                        % (len(pts), len(rows), len(cols), want))
    cy = float(g[0].find(SVG + "circle").get("cy"))
    if abs(min(y for _, y in pts) - cy) > 0.02:
        problems.append("the peak marker is at y %.2f, the highest point of "
                        "the live line at %.2f" % (cy, min(y for _, y in pts)))
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    for want in ("time (s)", "MiB"):
        if want not in texts:
            problems.append("no axis label %r" % want)
    details.append("%d points; peak %s" % (len(pts), title))
    return problems, details


def test_timeline_pids(suite):
    """Two timelines in one directory (a forked child): the larger is
    shown, with a note; --pid picks the other."""
    out, path = the_timeline(suite)
    work = work_dir(suite, "timeline-pids")
    for f in os.listdir(out):
        shutil.copy(os.path.join(out, f), work)
    with open(os.path.join(work, "heaptrail.4000000.timeline"), "w") as f:
        f.write("# heaptrail timeline 1: ms live_bytes live_blocks "
                "allocated_bytes rss_bytes; sample=1\n100 4096 1 4096 65536\n"
                "200 8192 2 8192 65536\n")
    problems = []
    rc, o, e = ht(suite, "timeline", work)
    if rc != 0:
        raise Failure("status %d: %s" % (rc, short(e)))
    if os.path.basename(path) not in o.decode().split("\n")[0]:
        problems.append("showed %r, not the largest" % o.decode().split("\n")[0])
    if "--pid" not in e.decode():
        problems.append("no note about the other timeline: %r" % short(e))
    rc, o, e = ht(suite, "timeline", work, "--pid", "4000000")
    text = o.decode()
    if rc != 0 or "8,192 bytes" not in text or "load_config" in text:
        problems.append("--pid 4000000: status %d, %r" % (rc, short(text, 400)))
    return problems, []


PEAK_DUMP = re.compile(r"^top allocation sites at the peak: (\S+), taken at ([\d.]+) s",
                       re.M)


def copy_run(suite, name):
    """A fresh copy of the prof_cache run's directory; its timeline's path
    and pid."""
    out, path = the_timeline(suite)
    work = work_dir(suite, name)
    for f in os.listdir(out):
        shutil.copy(os.path.join(out, f), work)
    base = os.path.basename(path)
    return work, os.path.join(work, base), base.split(".")[1]


def test_timeline_other_dumps(suite):
    """`timeline FILE` reads only the dumps of the timeline's process, in
    the timeline's directory (run from a directory holding a bad dump of
    that pid): an empty .heap of no process and a broken dump of another
    process are not read; a broken dump of the process itself is skipped
    with a note. Each case in its own directory."""
    problems, details = [], []
    _, path = the_timeline(suite)
    pid = os.path.basename(path).split(".")[1]
    cwd = work_dir(suite, "timeline-dumps-cwd")
    with open(os.path.join(cwd, "heaptrail.%s.0000.every.heap" % pid), "w"):
        pass
    _, heaps, _ = common.dumps(suite)
    with open(heaps[0]) as f:
        head = f.read(200)
    cases = (
        ("empty.heap", "", False),
        ("heaptrail.4000001.0000.every.heap", head, False),   # cut mid-line
        ("heaptrail.%s.0099.every.heap" % pid, "not a heap dump\n", True),
    )
    for i, (name, text, same) in enumerate(cases):
        work, tl, _ = copy_run(suite, "timeline-dumps-%d" % i)
        bad = os.path.join(work, name)
        with open(bad, "w") as f:
            f.write(text)
        rc, o, e = ht(suite, "timeline", tl, cwd=cwd)
        o, lines = o.decode(), stderr_lines(e)
        details.append("%s: status %d, stderr %r" % (name, rc, short(e)))
        m = PEAK_DUMP.search(o)
        if rc != 0 or not m:
            problems.append("%s beside the timeline: status %d, no top at the "
                            "peak: %r" % (name, rc, short(e)))
        elif not m.group(1).startswith("heaptrail.%s." % pid) or \
                m.group(1) == name:
            problems.append("%s beside the timeline: the top is of %s"
                            % (name, m.group(1)))
        if not same and lines:
            problems.append("%s is not a dump of process %s, yet stderr says "
                            "%r" % (name, pid, short(e)))
        if same and (len(lines) != 1 or
                     not lines[0].startswith("heaptrail: note: ") or
                     bad not in lines[0]):
            problems.append("%s, unreadable: want one note naming %s, got %r"
                            % (name, bad, short(e)))
    return problems, details


def test_timeline_nearest(suite):
    """The top at the peak comes from the dump taken nearest the
    timeline's peak, not the one holding the most; of two as near, the
    one holding more. A hand-made timeline peaks at 5 s; the run's
    smallest, middle and largest dumps get new times (ms=)."""
    _, heaps, _ = common.dumps(suite)
    small, mid, large = heaps[0], heaps[len(heaps) // 2], heaps[-1]
    problems, details = [], []
    for times, want in (((1000, 5300, 5500), small),     # the nearest
                        ((1000, 4600, 5400), mid)):      # a tie: the larger
        work, tl, pid = copy_run(suite, "timeline-nearest")
        for f in os.listdir(work):
            if f.endswith(".heap"):
                os.unlink(os.path.join(work, f))
        with open(tl, "w") as f:
            f.write("# heaptrail timeline 1: ms live_bytes live_blocks "
                    "allocated_bytes rss_bytes; sample=65536\n"
                    "1000 1000 1 1000 65536\n5000 300000000 3 300000000 "
                    "65536\n9000 2000 2 300000000 65536\n")
        for src, ms in zip((large, small, mid), times):
            with open(src) as f:
                text = f.read()
            text, k = re.subn(r"^(# heaptrail-dump ms=)\d+", r"\g<1>%d" % ms,
                              text, count=1, flags=re.M)
            if k != 1:
                raise Failure("no '# heaptrail-dump ms=' line in %s" % src)
            with open(os.path.join(work, os.path.basename(src)), "w") as f:
                f.write(text)
        rc, o, e = ht(suite, "timeline", tl)
        o = o.decode()
        m = PEAK_DUMP.search(o)
        details.append("dumps at %s ms: %s" % (times, m and m.group(0)))
        if rc != 0 or not m:
            problems.append("dumps at %s ms: status %d, no top at the peak: %r"
                            % (times, rc, short(e)))
        elif m.group(1) != os.path.basename(want) or \
                m.group(2) != "%.3f" % (times[(large, small, mid).index(want)] / 1000):
            problems.append("dumps (largest, smallest, middle) at %s ms, peak "
                            "at 5000: chose %s taken at %s s, want %s"
                            % (times, m.group(1), m.group(2),
                               os.path.basename(want)))
    return problems, details


def test_timeline_errors(suite):
    out, _ = the_timeline(suite)
    work = work_dir(suite, "timeline-errors")
    problems = []
    rc, _, err = ht(suite, "timeline", work)
    one_line_error(problems, "no timeline", rc, err, "heaptrail.PID.timeline")
    rc, _, err = ht(suite, "timeline", out, "--pid", "1")
    one_line_error(problems, "--pid 1", rc, err,
                   os.path.join(out, "heaptrail.1.timeline"))
    missing = os.path.join(work, "nothere")
    rc, _, err = ht(suite, "timeline", missing)
    one_line_error(problems, "missing dir", rc, err, missing)
    bad = os.path.join(work, "heaptrail.5.timeline")
    with open(bad, "w") as f:
        f.write("# heaptrail timeline 1: ms live_bytes\n1 2 3\n4 5\n")
    rc, _, err = ht(suite, "timeline", bad)
    one_line_error(problems, "bad timeline", rc, err, bad)
    if b"line 2" not in err:
        problems.append("bad timeline: the error names no line: %r" % short(err))
    os.unlink(bad)
    svg = os.path.join(work, "no", "dir", "t.svg")
    rc, o, err = ht(suite, "timeline", out, "--svg", svg)
    one_line_error(problems, "unwritable --svg", rc, err, svg)
    if o:
        problems.append("unwritable --svg: printed the chart anyway")
    if os.listdir(work):
        problems.append("files left: %s" % os.listdir(work))
    return problems, []


def collect(suite):
    t = lambda fn: (lambda: fn(suite))
    return [
        ("flame:inuse-widths", t(test_inuse)),
        ("flame:alloc-widths", t(test_alloc)),
        ("flame:inverted-reverse", t(test_inverted_reverse)),
        ("flame:diff", t(test_diff)),
        ("flame:escape", t(test_escape)),
        ("flame:empty", t(test_empty)),
        ("flame:errors", t(test_flame_errors)),
        ("flame:script", t(test_script)),
        ("timeline:text", t(test_timeline_text)),
        ("timeline:svg", t(test_timeline_svg)),
        ("timeline:pids", t(test_timeline_pids)),
        ("timeline:errors", t(test_timeline_errors)),
        ("timeline:other-dumps", t(test_timeline_other_dumps)),
        ("timeline:nearest", t(test_timeline_nearest)),
    ]
