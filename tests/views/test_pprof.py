"""pprof: `heaptrail pprof DUMP -o OUT.pb.gz`.

Two oracles: a small protobuf wire decoder here, independent of both
protobuf-c and pprof, checks the message itself (string 0, sample types,
period, ids that resolve, mappings with build-ids); Google's pprof, built
by tests/tools/get-pprof, must read the file and show what `heaptrail
top` shows for the same dump (names, flat and cum, totals), the mappings
with their build-ids, and inlined frames as frames of one location.

    pprof:structure      the decoded message, on the shared fixture
    pprof:top[inuse_space], pprof:top[alloc_space]
                         pprof -top -sample_index=X vs heaptrail top --X
    pprof:raw            pprof -raw: mappings, build-ids, symbolization bits
    pprof:inline         an always_inline allocator: pprof -raw, -traces, -top -lines
    pprof:base           pprof -base OLD.pb.gz NEW.pb.gz vs heaptrail top --base
                         (what `heaptrail pprof --base` tells users to run)
    pprof:bad-input      missing dump, unwritable -o, --base: one-line errors,
                         non-zero status, no file left behind

The pprof tests skip only when pprof cannot be had (get-pprof fails).
"""
import gzip
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import run_tests  # noqa: E402  (the runner itself, see plugin_tests)
from run_tests import Failure, Skip, run  # noqa: E402

SAMPLE_TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"),
                ("inuse_objects", "count"), ("inuse_space", "bytes")]


# ------------------------------------------------------- the wire decoder

def _varint(b, i):
    x = shift = 0
    while True:
        if i >= len(b):
            raise Failure("protobuf: truncated varint")
        c = b[i]
        i += 1
        x |= (c & 0x7f) << shift
        shift += 7
        if c < 0x80:
            return x, i


def _fields(b):
    """(field number, wire type, value) of one message, in order: varints
    as ints, length-delimited fields as bytes."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v = b[i:i + n]
            if len(v) != n:
                raise Failure("protobuf: truncated field %d" % num)
            i += n
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            v = int.from_bytes(b[i:i + n], "little")
            i += n
        else:
            raise Failure("protobuf: wire type %d in field %d" % (wt, num))
        yield num, wt, v


def _signed(x):
    return x - (1 << 64) if x >= 1 << 63 else x


def _ints(wt, v, signed=False):
    """A repeated integer field's values, packed or not."""
    if wt == 0:
        vals = [v]
    else:
        vals, i = [], 0
        while i < len(v):
            x, i = _varint(v, i)
            vals.append(x)
    return [_signed(x) for x in vals] if signed else vals


def _message(b, schema):
    """b decoded as {name: value}; schema maps field numbers to (name,
    kind): "int", "sint" (int64), "bool", "str", "ints", "sints", "strs",
    or a nested schema (a dict) for a repeated message."""
    out = {}
    for name, kind in schema.values():
        out[name] = [] if kind in ("ints", "sints", "strs") or \
            isinstance(kind, tuple) else (False if kind == "bool" else 0)
    for num, wt, v in _fields(b):
        if num not in schema:
            continue
        name, kind = schema[num]
        if isinstance(kind, tuple):
            (sub,) = kind
            out[name].append(_message(v, sub))
        elif kind == "msg":
            out[name] = v
        elif kind in ("ints", "sints"):
            out[name] += _ints(wt, v, kind == "sints")
        elif kind == "strs":
            out[name].append(v.decode("utf-8", "replace"))
        elif kind == "sint":
            out[name] = _signed(v)
        elif kind == "bool":
            out[name] = bool(v)
        else:
            out[name] = v
    return out


# pprof's field numbers (the interface; see proto/profile.proto)
VALUE_TYPE = {1: ("type", "sint"), 2: ("unit", "sint")}
SAMPLE = {1: ("location_id", "ints"), 2: ("value", "sints"),
          3: ("label", "msg")}
MAPPING = {1: ("id", "int"), 2: ("start", "int"), 3: ("limit", "int"),
           4: ("offset", "int"), 5: ("filename", "sint"),
           6: ("build_id", "sint"), 7: ("has_functions", "bool"),
           8: ("has_filenames", "bool"), 9: ("has_line_numbers", "bool"),
           10: ("has_inline_frames", "bool")}
LINE = {1: ("function_id", "int"), 2: ("line", "sint")}
LOCATION = {1: ("id", "int"), 2: ("mapping_id", "int"), 3: ("address", "int"),
            4: ("line", (LINE,)), 5: ("is_folded", "bool")}
FUNCTION = {1: ("id", "int"), 2: ("name", "sint"), 3: ("system_name", "sint"),
            4: ("filename", "sint"), 5: ("start_line", "sint")}
PROFILE = {1: ("sample_type", (VALUE_TYPE,)), 2: ("sample", (SAMPLE,)),
           3: ("mapping", (MAPPING,)), 4: ("location", (LOCATION,)),
           5: ("function", (FUNCTION,)), 6: ("strings", "strs"),
           7: ("drop_frames", "sint"), 8: ("keep_frames", "sint"),
           9: ("time_nanos", "sint"), 10: ("duration_nanos", "sint"),
           11: ("period_type", "msg"), 12: ("period", "sint"),
           13: ("comment", "sints"), 14: ("default_sample_type", "sint")}


def decode(path):
    """The profile in path (gzip'd) as nested dicts."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] != b"\x1f\x8b":
        raise Failure("%s: not gzip (starts %r)" % (path, data[:4]))
    prof = _message(gzip.decompress(data), PROFILE)
    if isinstance(prof["period_type"], bytes):
        prof["period_type"] = _message(prof["period_type"], VALUE_TYPE)
    else:
        prof["period_type"] = {"type": 0, "unit": 0}
    return prof


def check_structure(prof, problems):
    """The rules pprof's decoder and CheckValid enforce, and ours."""
    strs = prof["strings"]

    def s(i, what):
        if not 0 <= i < len(strs):
            problems.append("%s: string index %d out of range" % (what, i))
            return ""
        return strs[i]
    if not strs or strs[0] != "":
        problems.append("string_table[0] is %r, not \"\"" % (strs[:1],))
    types = [(s(t["type"], "sample_type"), s(t["unit"], "sample_type"))
             for t in prof["sample_type"]]
    if types != SAMPLE_TYPES:
        problems.append("sample types %s, expected %s" % (types, SAMPLE_TYPES))
    pt = prof["period_type"]
    if (s(pt["type"], "period_type"), s(pt["unit"], "period_type")) != \
            ("space", "bytes"):
        problems.append("period_type %s/%s, expected space/bytes" % (
            s(pt["type"], ""), s(pt["unit"], "")))
    for kind in ("mapping", "location", "function"):
        ids = [m["id"] for m in prof[kind]]
        if 0 in ids or len(set(ids)) != len(ids):
            problems.append("%s ids not unique and non-zero" % kind)
    maps = {m["id"]: m for m in prof["mapping"]}
    locs = {l["id"]: l for l in prof["location"]}
    fns = {f["id"]: f for f in prof["function"]}
    for l in prof["location"]:
        if l["mapping_id"] and l["mapping_id"] not in maps:
            problems.append("location %d: no mapping %d" % (l["id"],
                                                            l["mapping_id"]))
        for ln in l["line"]:
            if ln["function_id"] not in fns:
                problems.append("location %d: no function %d" % (
                    l["id"], ln["function_id"]))
    for f in prof["function"]:
        if not s(f["name"], "function name"):
            problems.append("function %d has no name" % f["id"])
    for i, smp in enumerate(prof["sample"]):
        if len(smp["value"]) != len(SAMPLE_TYPES):
            problems.append("sample %d: %d values" % (i, len(smp["value"])))
        missing = [x for x in smp["location_id"] if x not in locs]
        if missing:
            problems.append("sample %d: no location %s" % (i, missing[:3]))
    return problems[:10]


def fn_name(prof, fid):
    return prof["strings"][{f["id"]: f for f in prof["function"]}[fid]["name"]]


# ------------------------------------------------------------- helpers

def pprof_tool(suite):
    try:
        return suite.tool("pprof")
    except Failure as e:
        raise Skip("pprof not available: %s" % str(e).split("\n")[0])


def heaptrail(suite, *args):
    return run([suite.heaptrail] + list(args), env=run_tests.RUN_ENV,
               timeout=120)


def write_pprof(suite, dump, out, *opts):
    rc, _, err = heaptrail(suite, "pprof", *opts, dump, "-o", out)
    if rc != 0 or not os.path.exists(out):
        raise Failure("heaptrail pprof %s: status %d: %s" % (
            os.path.basename(dump), rc, run_tests.short(err, 300)))
    return out


def pprof(suite, *args, cwd=None):
    """pprof's text output; no symbolization (heaptrail's file is)."""
    tool = pprof_tool(suite)
    env = dict(run_tests.RUN_ENV, PPROF_TMPDIR=cwd or suite.build,
               PPROF_BINARY_PATH="/nonexistent")
    rc, out, err = run([tool, "-symbolize=none"] + list(args), cwd=cwd,
                       env=env, timeout=120)
    text = out.decode("utf-8", "replace")
    if rc != 0:
        raise Failure("pprof %s: status %d: %s" % (
            " ".join(args), rc, run_tests.short(err + out, 300)))
    return text


def build_id(path):
    rc, out, _ = run(["readelf", "-n", path], env=os.environ)
    m = re.search(rb"Build ID: ([0-9a-f]+)", out)
    return m.group(1).decode() if rc == 0 and m else None


# heaptrail top --bytes: flat flat% sum% cum cum% name
# (a sampled dump adds ±90% and samples after flat, ±90% after cum)
TOP_ROW = re.compile(r"^\s*(-?\d+)(?:\s+[±+]\S+\s+\d+)?\s+\S+%\s+\S+%\s+(-?\d+)(?:\s+[±+]\S+)?\s+"
                     r"\S+%\s+(.+?)\s*$")


def heaptrail_top(suite, dump, value, lines=False, base=None):
    args = ["top", "--bytes", "-n", "1000000", "--" + value.replace("_", "-")]
    if lines:
        args.append("--lines")
    if base:
        args += ["--base", base]
    rc, out, err = heaptrail(suite, *(args + [dump]))
    text = out.decode("utf-8", "replace")
    # "DUMP: [change in ]in-use space [+]N[ (sampled every ...)]"
    tm = re.search(r" ([-+]?\d+)(?: \(sampled|$)", text.split("\n")[0])
    if rc != 0 or not tm:
        raise Failure("heaptrail top %s: status %d: %s" % (
            dump, rc, run_tests.short(err + out, 300)))
    rows = [(int(m.group(1)), int(m.group(2)), m.group(3))
            for m in map(TOP_ROW.match, text.split("\n")[1:]) if m]
    return int(tm.group(1)), rows, text


def pprof_top(suite, pb, value, lines=False, base=None):
    args = ["-top", "-unit=B", "-nodefraction=0", "-edgefraction=0",
            "-nodecount=1000000", "-sample_index=" + value]
    if lines:
        args.append("-lines")
    if base:
        args += ["-base", base]
    text = pprof(suite, *(args + [pb]), cwd=os.path.dirname(pb))
    tm = re.search(r" of (-?\d+)B total", text)
    if not tm:
        raise Failure("pprof -top: no total in %s" % run_tests.short(text))
    rows = []
    for m in map(run_tests.PPROF_ROW.match, text.split("\n")):
        if m:
            name = re.sub(r" \(inline\)$", "", m.group(3))
            rows.append((int(m.group(1)), int(m.group(2)), name))
    return int(tm.group(1)), rows, text


def compare_tops(ours, theirs, problems):
    """heaptrail top's and pprof -top's rows: the same names with the same
    flat and cum (rows of zeros, which pprof -base may show, aside);
    unsymbolized frames (named "module+0x..." by heaptrail, "0x..." or
    "[module]" by pprof) only through the totals."""
    total_a, rows_a, _ = ours
    total_b, rows_b, _ = theirs
    if total_a != total_b:
        problems.append("total: heaptrail %d, pprof %d" % (total_a, total_b))
    a = {n: (f, c) for f, c, n in rows_a if "+0x" not in n and (f or c)}
    b = {n: (f, c) for f, c, n in rows_b
         if not re.match(r"0x|\[.*\]$", n) and (f or c)}
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            problems.append("%s: heaptrail flat/cum %s, pprof %s" % (
                name, a.get(name), b.get(name)))
    if not a:
        problems.append("heaptrail top shows no rows")
    return problems[:8]


# --------------------------------------------------------------- tests

def fixture_pb(suite, tag, *opts):
    """The shared fixture's last dump and its profile."""
    out, heaps, prog = common.dumps(suite)
    if not heaps:
        raise Failure("the fixture run left no dumps in %s" % out)
    work = os.path.join(suite.build, "e2e", "pprof")
    os.makedirs(work, exist_ok=True)
    pb = write_pprof(suite, heaps[-1], os.path.join(work, tag + ".pb.gz"),
                     *opts)
    return heaps[-1], pb, prog


def test_structure(suite):
    dump, pb, prog = fixture_pb(suite, "structure")
    problems = []
    prof = decode(pb)
    check_structure(prof, problems)
    strs = prof["strings"]
    if strs[prof["default_sample_type"]] != "inuse_space":
        problems.append("default_sample_type %r" %
                        strs[prof["default_sample_type"]])
    with open(dump, "rb") as f:
        head = f.readline().decode("utf-8", "replace")
    m = re.search(r"heap_v2/(\d+)", head)
    if not m or prof["period"] != int(m.group(1)):
        problems.append("period %d, the dump samples every %s" % (
            prof["period"], m.group(1) if m else "?"))
    total, _, _ = heaptrail_top(suite, dump, "inuse_space")
    got = sum(s["value"][3] for s in prof["sample"])
    if got != total:
        problems.append("inuse_space sums to %d, heaptrail top says %d" %
                        (got, total))
    mine = [mp for mp in prof["mapping"] if strs[mp["filename"]] == prog]
    want = build_id(prog)
    if not mine:
        problems.append("no mapping of %s" % prog)
    elif not want or strs[mine[0]["build_id"]] != want:
        problems.append("%s: build-id %r, readelf says %r" % (
            prog, strs[mine[0]["build_id"]], want))
    elif not all(mine[0][k] for k in ("has_functions", "has_filenames",
                                      "has_line_numbers")):
        problems.append("%s (built -g): has_* bits %s" % (prog, {
            k: v for k, v in mine[0].items() if k.startswith("has_")}))
    for l in prof["location"]:
        if l["mapping_id"]:
            mp = {x["id"]: x for x in prof["mapping"]}[l["mapping_id"]]
            if not mp["start"] <= l["address"] < mp["limit"]:
                problems.append("location %#x outside its mapping %s" % (
                    l["address"], strs[mp["filename"]]))
                break
    # another default, and standard output: the same profile otherwise
    pb2 = write_pprof(suite, dump, pb.replace("structure", "structure-alloc"),
                      "--alloc-space")
    prof2 = decode(pb2)
    if prof2["strings"][prof2["default_sample_type"]] != "alloc_space":
        problems.append("--alloc-space: default_sample_type %r" %
                        prof2["strings"][prof2["default_sample_type"]])
    rc, out, err = heaptrail(suite, "pprof", dump, "-o", "-")
    with open(pb, "rb") as f:
        if rc != 0 or out != f.read():
            problems.append("-o -: status %d, %d bytes differing from -o FILE"
                            " (%s)" % (rc, len(out), run_tests.short(err)))
    return problems[:10], []


def test_top(suite, value):
    dump, pb, _ = fixture_pb(suite, "top-" + value)
    ours = heaptrail_top(suite, dump, value)
    theirs = pprof_top(suite, pb, value)
    problems = compare_tops(ours, theirs, [])
    return problems, [ours[2], theirs[2]]


def test_base(suite):
    out, heaps, _ = common.dumps(suite)
    if len(heaps) < 3:
        raise Failure("the fixture run left %d dumps, want 3 or more" %
                      len(heaps))
    work = os.path.join(suite.build, "e2e", "pprof")
    os.makedirs(work, exist_ok=True)
    old = write_pprof(suite, heaps[1], os.path.join(work, "base-old.pb.gz"))
    new = write_pprof(suite, heaps[-1], os.path.join(work, "base-new.pb.gz"))
    ours = heaptrail_top(suite, heaps[-1], "inuse_space", base=heaps[1])
    theirs = pprof_top(suite, new, "inuse_space", base=old)
    # pprof's total of a -base profile sums the absolute values of the
    # differences: a stack whose blocks were all freed between the two
    # dumps adds its size twice over heaptrail's net total. The rows,
    # negative ones included, must still match exactly.
    problems = compare_tops((theirs[0], ours[1], ours[2]), theirs, [])
    if abs(ours[0]) > theirs[0]:
        problems.append("total: heaptrail %d, more than pprof's sum of "
                        "absolute differences %d" % (ours[0], theirs[0]))
    if ours[0] <= 0:
        problems.append("the fixture's cache did not grow (%d)" % ours[0])
    return problems, [ours[2], theirs[2]]


RAW_MAPPING = re.compile(r"^\d+: 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) "
                         r"(\S*) ?(\S*) ?((?:\[[A-Z]+\])*)$")


def raw_mappings(text):
    """pprof -raw's Mappings section: [(file, build_id, bits)]."""
    out = []
    section = text.split("\nMappings\n", 1)
    for line in (section[1] if len(section) > 1 else "").split("\n"):
        m = RAW_MAPPING.match(line.strip())
        if m:
            out.append((m.group(4), m.group(5), m.group(6)))
    return out


def test_raw(suite):
    dump, pb, prog = fixture_pb(suite, "raw")
    text = pprof(suite, "-raw", pb, cwd=os.path.dirname(pb))
    problems = []
    maps = raw_mappings(text)
    if not maps:
        problems.append("pprof -raw lists no mappings")
    for path, bid, bits in maps:
        want = build_id(path) if os.path.exists(path) else None
        if want and bid != want:
            problems.append("%s: build-id %r in pprof -raw, readelf says %r"
                            % (path, bid, want))
    mine = [m for m in maps if m[0] == prog]
    if not mine:
        problems.append("pprof -raw has no mapping of %s" % prog)
    elif mine[0][2] != "[FN][FL][LN][IN]":
        problems.append("%s: %r, expected [FN][FL][LN][IN]" % (prog,
                                                                mine[0][2]))
    if "Samples:\nalloc_objects/count alloc_space/bytes inuse_objects/count " \
            "inuse_space/bytes[dflt]" not in text:
        problems.append("pprof -raw: sample types not as expected")
    return problems, [text[-3000:]]


INLINE_SRC = os.path.join(os.path.dirname(HERE), "progs", "pprof_inline.c")


def inline_dump(suite):
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "pprof",
                                            "inline"))
    prog = os.path.join(work, "pprof_inline")
    rc, _, err = run([suite.cc, "-O2", "-g", "-o", prog, INLINE_SRC],
                     env=os.environ)
    if rc != 0:
        raise Failure("cc pprof_inline.c: %s" % run_tests.short(err, 300))
    out = os.path.join(work, "run")
    rc, _, err = heaptrail(suite, "run", "--sample", "1", "--final", "-o",
                           out, "--", prog)
    heaps = [f for f in os.listdir(out) if f.endswith(".heap")] \
        if os.path.isdir(out) else []
    if rc != 0 or len(heaps) != 1:
        raise Failure("heaptrail run pprof_inline: status %d, dumps %s: %s"
                      % (rc, heaps, run_tests.short(err, 300)))
    return os.path.join(out, heaps[0]), work


def test_inline(suite):
    dump, work = inline_dump(suite)
    pb = write_pprof(suite, dump, os.path.join(work, "inline.pb.gz"))
    problems = []
    # heaptrail's own view first: the inlined frame has a line of its own
    ours = heaptrail_top(suite, dump, "inuse_space", lines=True)
    leaf = [r for r in ours[1] if r[2].startswith("inl_make ")]
    if not leaf or leaf[0][0] != 66016:
        problems.append("heaptrail top --lines: no inl_make row of 66016 "
                        "bytes (%s)" % leaf)
    # the message: one location holds inl_make then outer_fn
    prof = decode(pb)
    check_structure(prof, problems)
    chains = [[fn_name(prof, ln["function_id"]) for ln in l["line"]]
              for l in prof["location"]]
    if ["inl_make", "outer_fn"] not in chains:
        problems.append("no location with lines [inl_make, outer_fn]: %s" %
                        chains)
    # pprof: the inlined frame in a trace, above its caller
    traces = pprof(suite, "-traces", pb, cwd=work)
    if not re.search(r"inl_make \(inline\)\n\s+outer_fn\n\s+main\n", traces):
        problems.append("pprof -traces: no inl_make (inline) above outer_fn "
                        "above main")
    raw = pprof(suite, "-raw", pb, cwd=work)
    if not re.search(r"M=\d+ inl_make \S+pprof_inline\.c:\d+ s=0\n"
                     r"\s+outer_fn \S+pprof_inline\.c:\d+ s=0\n", raw):
        problems.append("pprof -raw: no location with inl_make, then "
                        "outer_fn")
    theirs = pprof_top(suite, pb, "inuse_space", lines=True)
    compare_tops(ours, theirs, problems)
    return problems[:10], [ours[2], theirs[2], traces, raw]


def test_bad_input(suite):
    out, heaps, _ = common.dumps(suite)
    work = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "pprof",
                                            "bad"))
    blocker = os.path.join(work, "a-file")
    with open(blocker, "w") as f:
        f.write("not a directory\n")
    problems = []
    cases = [
        ("missing dump", [os.path.join(work, "nonexistent.heap"), "-o",
                          os.path.join(work, "x.pb.gz")], "nonexistent.heap"),
        ("not a dump", [blocker, "-o", os.path.join(work, "y.pb.gz")],
         "a-file"),
        ("no such -o dir", [heaps[-1], "-o",
                            os.path.join(work, "no", "such", "z.pb.gz")],
         "z.pb.gz"),
        ("-o dir is a file", [heaps[-1], "-o",
                              os.path.join(blocker, "z.pb.gz")], "z.pb.gz"),
        ("--base", ["--base", heaps[0], heaps[-1], "-o",
                    os.path.join(work, "b.pb.gz")], "--base"),
        ("no -o", [heaps[-1]], "-o"),
    ]
    for what, args, subject in cases:
        before = sorted(os.listdir(work))
        rc, o, err = heaptrail(suite, "pprof", *args)
        lines = run_tests.stderr_lines(err)
        if rc == 0:
            problems.append("%s: status 0" % what)
        if not lines or not lines[0].startswith("heaptrail: ") or \
                subject not in lines[0]:
            problems.append("%s: stderr %r does not name %r" % (
                what, run_tests.short(err, 120), subject))
        elif what != "no -o" and len(lines) != 1:
            problems.append("%s: %d lines on stderr" % (what, len(lines)))
        if o:
            problems.append("%s: %d bytes on stdout" % (what, len(o)))
        after = sorted(os.listdir(work))
        if after != before:
            problems.append("%s: left %s" % (what, sorted(set(after) -
                                                          set(before))))
    return problems, []


def collect(suite):
    return [
        ("pprof:structure", lambda: test_structure(suite)),
        ("pprof:top[inuse_space]", lambda: test_top(suite, "inuse_space")),
        ("pprof:top[alloc_space]", lambda: test_top(suite, "alloc_space")),
        ("pprof:raw", lambda: test_raw(suite)),
        ("pprof:base", lambda: test_base(suite)),
        ("pprof:inline", lambda: test_inline(suite)),
        ("pprof:bad-input", lambda: test_bad_input(suite)),
    ]
