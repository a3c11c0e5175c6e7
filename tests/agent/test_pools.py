"""Memory pools (issue 15): tests/progs/pools.c, an arena allocator
annotated with valgrind's own client requests, built against valgrind's
<valgrind/valgrind.h> and against heaptrail's stand-in
(-I include/heaptrail/compat).

    pools:valgrind   the valgrind build under memcheck (the oracle) and the
                     heaptrail build under `heaptrail run`: the LEAK
                     SUMMARY (definitely, indirectly, possibly lost, still
                     reachable) is equal in bytes and blocks; both builds
                     print what they print bare (the stand-in does nothing
                     without the agent), under valgrind and under heaptrail
    pools:per-pool   the JSON report of that run against what the program
                     counts itself: per pool, the bytes and blocks lost
                     (definitely + indirectly, by the records' "pool", and
                     as the "pools" tree says) and those its chunks hold at
                     exit (the tree), the
                     malloc-like blocks by their allocator; the tree's
                     parents are the program's; `report --pool request`
                     keeps request's and query's records only, with
                     request's lost bytes as its summary, `--pool top`
                     everything but orphan's and the slab's
    pools:pprof      a final dump of the heaptrail build (--sample 1) through
                     `heaptrail pprof`, decoded by test_pprof's reader: the
                     in-use bytes and objects of the samples labelled
                     pool=NAME add up to what the program holds in NAME
                     (and tmp's, destroyed, to nothing); `heaptrail top
                     --pool NAME` of the dump totals NAME's in-use bytes;
                     without --pool, top's note counts the bytes of every
                     pool's chunks (all the program's pools hold)
    pools:growth-names  the ht build under `--sample 1 --interval 16k`:
                     `growth --pool NAME` on its dumps with a name no dump
                     holds exits 2 naming it and the pools the last dump
                     has (it used to print "0 B -> 0 B" and exit 0); with
                     request, made at start, it exits 0 and says nothing
                     of absent pools; `growth --help` lists --pool
    pools:growth-subset  tests/progs/pool_beside.c under `--sample 1
                     --interval 256k`: a pool that gains 4 KiB a step
                     beside 256 KiB a step of plain malloc: `growth --pool
                     slow` and `top --pool slow` rank the pool's chunks and
                     say nothing of memory not seen (the allocator's count
                     and the resident set are the whole process's; before,
                     growth called 9 MiB "memory it does not see"), while
                     `growth` without --pool still sees the whole heap grow
    pools:misuse     tests/progs/pools_misuse.c: the API called
                     wrongly (unknown pools and chunks, NULL anchors, a
                     2^63-byte chunk, a 1,000-byte name, double frees and
                     destroys) and from a timer's signal handler while the
                     program allocates from the same pool: bare it says "no
                     agent" and exits 0; under heaptrail every call returns
                     what include/heaptrail.h says, nothing hangs, the
                     program exits 0 and the report is written
"""
import json
import os
import re
import shutil
import threading

import run_tests as rt
from run_tests import Failure, Skip
import common

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(os.path.dirname(HERE), "progs", "pools.c")
PARENTS = {"top": None, "cache": "top", "request": "top", "query": "request",
           "conn": "top", "scratch": "top", "big": "top", "orphan": None}
LOST = ("definitely_lost", "indirectly_lost")
KINDS4 = ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable")

_cache = {}
_lock = threading.RLock()   # the two tests share one build and one run


def build(suite):
    """(work, vg binary, ht binary), built once per session."""
    with _lock:
        return _build(suite)


def _build(suite):
    if "build" in _cache:
        return _cache["build"]
    if not os.path.exists("/usr/include/valgrind/valgrind.h"):
        raise Skip("valgrind.h not installed (Debian package valgrind)")
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "pools"))
    vg_bin, ht_bin = os.path.join(work, "pools_vg"), os.path.join(work, "pools_ht")
    for out, extra in ((vg_bin, []),
                       (ht_bin, ["-I", os.path.join(ROOT, "include", "heaptrail", "compat")])):
        rc, _, err = rt.run([suite.cc, "-g", "-O1"] + extra + ["-o", out, SRC])
        if rc != 0:
            raise Failure("cc pools.c: %s" % rt.short(err, 600))
    _cache["build"] = (work, vg_bin, ht_bin)
    return _cache["build"]


def ht_run(suite):
    """heaptrail run of the ht build: (status, stdout, report JSON, outdir)."""
    with _lock:
        return _ht_run(suite)


def _ht_run(suite):
    if "ht" in _cache:
        return _cache["ht"]
    work, _, ht_bin = build(suite)
    _cache["ht"] = run_report(suite, ht_bin, [])[:4]
    return _cache["ht"]


def run_report(suite, binary, extra):
    """heaptrail run of binary with the options extra, in its directory:
    (status, stdout, report JSON, outdir, stderr)."""
    work = os.path.dirname(binary)
    out, jpath = os.path.join(work, "out"), os.path.join(work, "out.json")
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-o", out, "--json", jpath] + extra +
                             ["--", binary], cwd=work)
    if not os.path.exists(jpath):
        raise Failure("heaptrail run wrote no JSON: %s" % rt.short(err, 600))
    with open(jpath) as f:
        obj = json.load(f)
    return rc, stdout, obj, out, err


def vg_run(suite):
    work, vg_bin, _ = build(suite)
    key = rt.vg_cache_key([vg_bin], ["pools"])
    cache = os.path.join(suite.build, "e2e", "vgcache", key + ".json")
    if os.path.exists(cache):
        with open(cache) as f:
            return json.load(f)
    logs = rt.fresh_dir(os.path.join(work, "vg"))
    rc, out, _ = rt.run(rt.VALGRIND + ["--log-file=" + os.path.join(logs, "vg.%p"), vg_bin],
                        cwd=work, timeout=rt.VG_TIMEOUT)
    result = {"status": rc, "stdout": out.decode("utf-8", "replace"),
              "procs": rt.parse_vg_logs(logs)}
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    with open(cache + ".tmp", "w") as f:
        json.dump(result, f)
    os.rename(cache + ".tmp", cache)
    return result


def program_counts(stdout):
    """{pool: (live bytes, live blocks, lost bytes, lost blocks)} as printed."""
    counts = {}
    for m in re.finditer(r"^pool (\S+) live (\d+) (\d+) lost (\d+) (\d+)$", stdout, re.M):
        counts[m.group(1)] = tuple(int(g) for g in m.group(2, 3, 4, 5))
    if not counts:
        raise Failure("the program printed no pool counts: %s" % rt.short(stdout.encode()))
    return counts


def test_valgrind(suite):
    if not shutil.which("valgrind"):
        raise Skip("valgrind not installed")
    work, vg_bin, ht_bin = build(suite)
    problems = []
    bare = {}
    for name, binary in (("valgrind build", vg_bin), ("heaptrail build", ht_bin)):
        rc, out, err = rt.run([binary], cwd=work)
        bare[name] = out
        if rc != 0:
            problems.append("%s exits %d bare: %s" % (name, rc, rt.short(err)))
    if bare["valgrind build"] != bare["heaptrail build"]:
        problems.append("the two builds print different things bare")
    vg = vg_run(suite)
    rc, out, obj, _ = ht_run(suite)
    if vg["stdout"].encode() != bare["valgrind build"]:
        problems.append("under valgrind the program prints %s" % rt.short(vg["stdout"].encode()))
    if out != bare["heaptrail build"]:
        problems.append("under heaptrail the program prints %s" % rt.short(out))
    if rc != 0:
        problems.append("heaptrail run exits %d" % rc)
    if len(vg["procs"]) != 1 or not vg["procs"][0]["kinds"]:
        raise Failure("no leak summary from valgrind: %s" % rt.short(json.dumps(vg).encode(), 400))
    want = vg["procs"][0]["kinds"]
    got = obj.get("summary", {})
    lines = []
    for k in KINDS4:
        w = tuple(want.get(k, (0, 0)))
        g = (got.get(k, {}).get("bytes"), got.get(k, {}).get("blocks"))
        lines.append("%s: valgrind %s, heaptrail %s" % (k, w, g))
        if w != g:
            problems.append("%s: heaptrail says %s bytes/blocks, valgrind %s" % (k, g, w))
    if not want.get("definitely_lost", [0])[0] or not want.get("indirectly_lost", [0])[0] \
            or not want.get("possibly_lost", [0])[0]:
        problems.append("valgrind does not see the three kinds of leak the program makes: %s"
                        % want)
    return problems, lines


def test_per_pool(suite):
    return check_per_pool(suite, ht_run(suite))


def check_per_pool(suite, run):
    """The report of run (status, stdout, JSON, outdir) against the
    program's own counts (test_allocfn runs the unannotated build)."""
    rc, out, obj, outdir = run
    counts = program_counts(out.decode())
    problems, details = [], []
    lost = {}
    for r in obj.get("records", []):
        pool = r.get("pool") or ("malloclike" if r.get("allocator") == "malloclike" else None)
        if pool and r["kind"] in LOST:
            b, n = lost.get(pool, (0, 0))
            lost[pool] = (b + r["bytes"], n + r["blocks"])
    pools = {p["name"]: p for p in obj.get("pools", [])}
    by_id = {p["id"]: p["name"] for p in obj.get("pools", [])}
    live_like = [0, 0]
    for r in obj.get("records", []):
        if r.get("allocator") == "malloclike":
            live_like[0] += r["bytes"]
            live_like[1] += r["blocks"]
    for name, (lb, ln, xb, xn) in sorted(counts.items()):
        got_lost = lost.get(name, (0, 0))
        details.append("%s: program lost %d/%d live %d/%d; heaptrail lost %s" %
                       (name, xb, xn, lb, ln, got_lost))
        if got_lost != (xb, xn):
            problems.append("pool %s: %s bytes/blocks lost, the program lost %s" %
                            (name, got_lost, (xb, xn)))
        if name == "malloclike":
            if tuple(live_like) != (lb, ln):
                problems.append("malloc-like blocks at exit: %s, the program holds %s" %
                                (tuple(live_like), (lb, ln)))
            continue
        p = pools.get(name)
        if not p:
            problems.append("pool %s is not in the report's pool tree" % name)
            continue
        if (p.get("lost_bytes"), p.get("lost_blocks")) != (xb, xn):
            problems.append("the tree says pool %s lost %s bytes/blocks, the program %s" %
                            (name, (p.get("lost_bytes"), p.get("lost_blocks")), (xb, xn)))
        if (p["bytes"], p["blocks"]) != (lb, ln):
            problems.append("pool %s holds %s bytes/blocks, the program says %s" %
                            (name, (p["bytes"], p["blocks"]), (lb, ln)))
        parent = by_id.get(p["parent"]) if p["parent"] else None
        if parent != PARENTS.get(name):
            problems.append("pool %s has parent %s, expected %s" % (name, parent,
                                                                   PARENTS.get(name)))
    if "tmp" in pools:
        problems.append("the destroyed pool tmp, with nothing left, is in the tree")

    def report_pool(name):
        rc2, text, err = rt.run([suite.heaptrail, "report", "--json", "--pool", name, outdir])
        if rc2 != 0:
            raise Failure("report --pool %s: status %d: %s" % (name, rc2, rt.short(err)))
        return json.loads(text)

    req = report_pool("request")
    names = sorted({r.get("pool") for r in req["records"]})
    if names != ["request"] and names != ["query", "request"]:
        problems.append("report --pool request lists records of %s" % names)
    sb = sum(req["summary"][k]["bytes"] for k in LOST)
    if sb != counts["request"][2] + counts["query"][2]:
        problems.append("report --pool request: %d bytes lost, the program lost %d" %
                        (sb, counts["request"][2] + counts["query"][2]))
    top = report_pool("top")
    names = {r.get("pool") for r in top["records"]}
    if names - {"top", "cache", "request", "query", "conn", "scratch", "big"} or \
            "cache" not in names:
        problems.append("report --pool top lists records of %s" % sorted(map(str, names)))
    tree = [p["name"] for p in top.get("pools", [])]
    if "orphan" in tree or "top" not in tree:
        problems.append("report --pool top shows the pools %s" % tree)
    return problems, details


def test_pprof(suite):
    work, _, ht_bin = build(suite)
    return check_pprof(suite, ht_bin, [], os.path.join(work, "final"))


def check_pprof(suite, binary, extra, out):
    """A final dump of binary run with the options extra, in out, through
    pprof and top, against the program's own counts."""
    import test_pprof
    work = os.path.dirname(binary)
    out = rt.fresh_dir(out)
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "--final", "--sample", "1"] + extra +
                             ["-o", out, "--", binary], cwd=work)
    counts = program_counts(stdout.decode())
    finals = [f for f in os.listdir(out) if f.endswith(".final.heap")]
    if len(finals) != 1:
        raise Failure("%d final dumps in %s: %s" % (len(finals), out, rt.short(err)))
    pb = os.path.join(out, "p.pb.gz")
    rc, _, err = rt.run([suite.heaptrail, "pprof", "-o", pb, os.path.join(out, finals[0])])
    if rc != 0:
        raise Failure("heaptrail pprof: status %d: %s" % (rc, rt.short(err)))
    prof = test_pprof.decode(pb)
    strs = prof["strings"]
    types = [strs[t["type"]] for t in prof["sample_type"]]
    space, objects = types.index("inuse_space"), types.index("inuse_objects")
    got = {}
    for smp in prof["sample"]:
        label = smp.get("label")
        if not isinstance(label, bytes) or not label:
            continue
        lab = test_pprof._message(label, {1: ("key", "sint"), 2: ("str", "sint")})
        if strs[lab["key"]] != "pool":
            continue
        b, n = got.get(strs[lab["str"]], (0, 0))
        got[strs[lab["str"]]] = (b + smp["value"][space], n + smp["value"][objects])
    problems, details = [], []
    for name, (lb, ln, _, _) in sorted(counts.items()):
        if name == "malloclike":
            continue
        g = got.pop(name, (0, 0))
        details.append("%s: pprof %s, program %s" % (name, g, (lb, ln)))
        if g != (lb, ln):
            problems.append("pool=%s samples hold %s bytes/objects, the program %s" %
                            (name, g, (lb, ln)))
    for name in ("cache", "request", "big"):
        rc, text, err = rt.run([suite.heaptrail, "top", "--bytes", "--pool", name,
                                os.path.join(out, finals[0])])
        m = re.search(rb"in-use space (\d+)", text)
        total = int(m.group(1)) if m else None
        details.append("top --pool %s: %s" % (name, total))
        if rc != 0 or total != counts[name][0]:
            problems.append("top --pool %s: status %d, total %s, the program holds %d" %
                            (name, rc, total, counts[name][0]))
    # no --pool: a note says how many bytes the chunks of all pools hold,
    # which the total counts besides the blocks they were carved from
    rc, text, err = rt.run([suite.heaptrail, "top", "--bytes", os.path.join(out, finals[0])])
    m = re.search(rb"^heaptrail: note: (\d+) bytes in use are chunks of memory pools "
                  rb"\(.*\): the total counts them and the blocks", err, re.M)
    want = sum(lb for name, (lb, _, _, _) in counts.items() if name != "malloclike")
    details.append("top without --pool: %s" % rt.short(err, 400))
    if rc != 0 or not m or int(m.group(1)) != want:
        problems.append("top without --pool: status %d, note of %s bytes, the program's pools "
                        "hold %d" % (rc, m and m.group(1), want))
    # a pool the dump does not hold: an empty table, and a note naming the
    # pools it does hold (a series may start before a pool is made)
    rc, text, err = rt.run([suite.heaptrail, "top", "--pool", "no-such-pool",
                            os.path.join(out, finals[0])])
    lines = rt.stderr_lines(err)
    if rc != 0 or b"in-use space 0 B" not in text or len(lines) != 1 or \
            not lines[0].startswith("heaptrail: note: no pool named 'no-such-pool'") or \
            "cache" not in lines[0]:
        problems.append("top --pool no-such-pool: status %d, stdout %r, stderr %r" % (
            rc, rt.short(text), rt.short(err)))
    # tmp was destroyed: its samples (allocated so far) hold nothing in use
    if set(got) != {"tmp"} or got["tmp"] != (0, 0):
        problems.append("other pools' samples, expected tmp's with nothing in use: %s" % got)
    return problems, details


def test_misuse(suite):
    work, _, _ = build(suite)
    prog = os.path.join(work, "pools_misuse")
    rc, _, err = rt.run([suite.cc, "-g", "-O1", "-I", os.path.join(ROOT, "include"), "-o", prog,
                         os.path.join(os.path.dirname(HERE), "progs", "pools_misuse.c")])
    if rc != 0:
        raise Failure("cc pools_misuse.c: %s" % rt.short(err, 600))
    problems = []
    rc, out, _ = rt.run([prog], cwd=work)
    if rc != 0 or out != b"no agent\n":
        problems.append("bare: status %d, prints %s" % (rc, rt.short(out)))
    outdir = rt.fresh_dir(os.path.join(work, "misuse"))
    rc, out, err = rt.run([suite.heaptrail, "run", "-q", "-o", outdir, "--", prog], cwd=work,
                          timeout=120)
    text = out.decode(errors="replace")
    if rc != 0:
        problems.append("under heaptrail: status %d: %s" % (rc, rt.short(err)))
    if not text.endswith("0 bad\n"):
        problems.append("under heaptrail: %s" % "; ".join(
            l for l in text.split("\n") if l.startswith("bad") or l.endswith(" bad")))
    if not [f for f in os.listdir(outdir) if f.endswith(".leaks")]:
        problems.append("no leak report in %s" % outdir)
    return problems, [text]


def test_growth_names(suite):
    work, _, ht_bin = build(suite)
    out = rt.fresh_dir(os.path.join(work, "growth-names"))
    rc, _, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--sample", "1",
                         "--interval", "16k", "--", ht_bin], cwd=work)
    if rc != 0:
        raise Failure("heaptrail run: status %d: %s" % (rc, rt.short(err)))
    problems, details = [], []
    rc, text, err = rt.run([suite.heaptrail, "growth", "--pool", "nosuch", out])
    err = err.decode(errors="replace")
    details.append("--pool nosuch: status %d: %s%s" % (rc, text.decode(errors="replace"), err))
    m = re.search(r"no pool named 'nosuch' in any of the (\d+) dumps \(the last one's pools: "
                  r"([^)]*)\)", err)
    if rc != 2 or text or not m:
        problems.append("growth --pool nosuch: status %d, stdout %r, stderr %r" % (rc, text, err))
    elif not set(m.group(2).split(", ")) <= set(PARENTS) | {"tmp"} or "request" not in m.group(2):
        problems.append("growth --pool nosuch lists the pools %r" % m.group(2))
    rc, text, err = rt.run([suite.heaptrail, "growth", "--pool", "request", out])
    err = err.decode(errors="replace")
    details.append("--pool request: status %d: %s%s" % (rc, text.decode(errors="replace"), err))
    if rc != 0 or "pool" in err:
        problems.append("growth --pool request: status %d, stderr %r" % (rc, err))
    rc, text, _ = rt.run([suite.heaptrail, "growth", "--help"])
    if rc != 0 or b"--pool NAME" not in text:
        problems.append("growth --help: status %d, no --pool NAME" % rc)
    return problems, details


def test_growth_subset(suite):
    work = os.path.join(suite.build, "e2e", "analyze", "pool_beside")
    prog = common.built_once(suite, os.path.join(ROOT, "tests", "progs", "pool_beside.c"),
                             os.path.join(work, "pool_beside"),
                             ["-g", "-O1", "-I", os.path.join(ROOT, "include"),
                              "-I", os.path.join(ROOT, "include", "heaptrail", "compat")])
    out = rt.fresh_dir(os.path.join(work, "growth-subset"))
    rc, _, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--sample", "1",
                         "--interval", "256k", "--", prog], cwd=work)
    if rc != 0:
        raise Failure("heaptrail run: status %d: %s" % (rc, rt.short(err)))
    problems, details = [], []
    last = sorted(f for f in os.listdir(out) if f.endswith(".heap"))[-1]
    for args in (["growth", "--pool", "slow", out],
                 ["top", "--pool", "slow", os.path.join(out, last)]):
        rc, text, err = rt.run([suite.heaptrail] + args)
        text = text.decode(errors="replace")
        details.append(" ".join(args[:3]) + ":\n" + text)
        if rc != 0 or "not see" in text or "main" not in text:
            problems.append("%s: status %d, want main ranked and no word of memory not seen: %s"
                            % (" ".join(args[:3]), rc, text[-400:]))
    rc, text, _ = rt.run([suite.heaptrail, "growth", out])
    m = re.search(r"in-use space [\d.]+ \S+ -> ([\d.]+) MiB", text.decode(errors="replace"))
    if rc != 0 or not m or float(m.group(1)) < 9:
        problems.append("growth without --pool: status %d, the heap should reach 9 MiB: %s"
                        % (rc, text.decode(errors="replace")[:300]))
    return problems, details


def collect(suite):
    return [("pools:valgrind", lambda: test_valgrind(suite)),
            ("pools:per-pool", lambda: test_per_pool(suite)),
            ("pools:pprof", lambda: test_pprof(suite)),
            ("pools:growth-names", lambda: test_growth_names(suite)),
            ("pools:growth-subset", lambda: test_growth_subset(suite)),
            ("pools:misuse", lambda: test_misuse(suite))]
