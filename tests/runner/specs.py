"""The end-to-end programs' specs (their @ comments: the annotation
language of runner/annotations.py, keys in tests/run_tests.py) and the
checks of a process's records against them."""

from .harness import *  # noqa: F401,F403
from . import annotations
from .annotations import bytes_blocks, kind_name

KEYS = ("proc", "leak", "kinds", "heuristic", "check", "src", "variants",
        "suppressions", "vg-suppressions", "ht-stderr", "absent", "frames", "args",
        "stdin", "lib", "link", "usage-varies", "static", "cli-only", "prof", "site")

# ---------------------------------------------------------------- specs

class Spec:
    """One end-to-end program and what it must produce."""

    def __init__(self, name, src):
        self.name = name
        self.src = src
        self.cxx = src.endswith(".cc")
        self.args = []
        self.stdin = b""
        self.libs = []          # (source path, output name)
        self.link = []
        self.static = False
        self.cli_only = False   # not in the vg/ht matrix
        self.prof = False       # a heap-profiling program (prof: tests)
        self.procs = {}         # depth -> {"exit", "in_use", "args"}
        self.kinds = {}         # depth -> {kind: (bytes, blocks)}
        self.heuristics = {}    # depth -> {name: (bytes, blocks)}
        self.leaks = {}         # depth -> [(func, bytes, blocks, kind)]
        self.absent = {}        # depth -> [func]
        self.frames = {}        # depth -> [(func, count)]
        self.sites = {}         # func -> (file basename, line)
        self.srcs = []          # more sources linked into the program
        self.variants = None    # None: every variant
        self.supps = []         # heaptrail suppression files
        self.vg_supps = []      # the same, in valgrind's format
        self.ht_stderr = []     # regexes heaptrail's stderr must match
        self.checks = []        # (n, kind, bytes, blocks, func or None)
        self.usage_varies = False  # counts not compared with valgrind's

    def sources(self):
        return [self.src] + self.srcs + [s for s, _ in self.libs]


def parse_spec(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = Spec(name, path)
    for key, words, rest in annotations.read(path, KEYS):
        if key == "proc":
            depth = int(words[0])
            proc = {"exit": None, "in_use": None, "args": None}
            for w in words[1:]:
                k, _, v = w.partition("=")
                if k == "exit":
                    proc["exit"] = int(v)
                elif k == "in_use":
                    b, _, n = v.partition("/")
                    proc["in_use"] = (int(b), int(n))
                elif k == "args":
                    proc["args"] = v.split(",")
                else:
                    raise ValueError("%s: unknown @proc field %r" % (path, k))
            spec.procs[depth] = proc
        elif key == "leak":
            b, n = bytes_blocks(words[2], path)
            kind = kind_name(words[3], path, KINDS) if len(words) > 3 else None
            spec.leaks.setdefault(int(words[0]), []).append(
                (words[1], b, n, kind))
        elif key == "kinds":
            depth, case, got = annotations.kinds(words, path)
            if case is not None:
                raise ValueError("%s: @kinds case= is for tests/hostile's @case" % path)
            spec.kinds.setdefault(depth, {}).update(got)
        elif key == "heuristic":
            spec.heuristics.setdefault(int(words[0]), {})[words[1]] = \
                bytes_blocks(words[2], path)
        elif key == "check":
            b, n = bytes_blocks(words[2], path)
            spec.checks.append((int(words[0]), kind_name(words[1], path, KINDS),
                                b, n, words[3] if len(words) > 3 else None))
        elif key == "src":
            spec.srcs.append(os.path.join(PROGS, words[0]))
        elif key == "variants":
            for v in words:
                if v not in VARIANTS:
                    raise ValueError("%s: unknown variant %r" % (path, v))
            spec.variants = words
        elif key == "suppressions":
            spec.supps.append(os.path.join(PROGS, words[0]))
        elif key == "vg-suppressions":
            spec.vg_supps.append(os.path.join(PROGS, words[0]))
        elif key == "ht-stderr":
            spec.ht_stderr.append(rest)
        elif key == "absent":
            spec.absent.setdefault(int(words[0]), []).append(words[1])
        elif key == "frames":
            spec.frames.setdefault(int(words[0]), []).append(
                (words[1], int(words[2])))
        elif key == "args":
            spec.args = words
        elif key == "stdin":
            spec.stdin = rest.encode().decode("unicode_escape").encode()
        elif key == "lib":
            spec.libs.append((os.path.join(PROGS, words[0]), words[1]))
        elif key == "link":
            spec.link = words
        elif key == "usage-varies":
            spec.usage_varies = True
        elif key == "static":
            spec.static = spec.cli_only = True
        elif key == "cli-only":
            spec.cli_only = True
        elif key == "prof":
            spec.prof = spec.cli_only = True
        elif key == "site":
            pass
    for src in spec.sources():
        with open(src) as f:
            for lineno, line in enumerate(f, 1):
                m = re.search(r"@site\s+(\S+)", line)
                if m:
                    spec.sites[m.group(1)] = (os.path.basename(src), lineno)
    return spec


# cli:same-as-bare's programs: each prints what its allocator calls
# returned, and "expect in use: BYTES bytes in BLOCKS blocks".
SAME_AS_BARE = ("new_handler", "alloc_edges")


def load_specs():
    paths = sorted(os.path.join(PROGS, f) for f in os.listdir(PROGS)
                   if f.endswith((".c", ".cc")))
    specs = [parse_spec(p) for p in paths]
    parts = {s for spec in specs for s in spec.sources()[1:]}
    return [s for s in specs if s.src not in parts]


# ---------------------------------------------------------------- frames

def base_name(function):
    """The qualified name without parameters or return type:
    "short* leaky::make_array_of<short>(unsigned long)" ->
    "leaky::make_array_of<short>"."""
    depth, cut = 0, len(function)
    for i, c in enumerate(function):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and i > 0:
            cut = i
            break
    name = function[:cut]
    depth, start = 0, 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0:
            start = i + 1
    return name[start:] if not name.startswith("operator") else name


def name_matches(want, function):
    return bool(function) and (function == want or
                               base_name(function) == want)


def is_alloc_frame(frame):
    fn = frame.get("function") or ""
    module = os.path.basename(frame.get("module") or "")
    if base_name(fn) in ALLOC_FUNCS or fn.startswith(("operator new",
                                                      "operator delete")):
        return True
    return module.startswith(ALLOC_MODULES)


def first_user_frame(stack):
    for frame in stack:
        if not is_alloc_frame(frame):
            return frame
    return None


def names(records, func):
    """The records whose stack has FUNC."""
    return [r for r in records
            if any(name_matches(func, f.get("function")) for f in r["stack"])]


def check_records(label, records, spec, depth, problems, which="all",
                  dtv_exact=True):
    """The @leak, @site, @absent and @frames checks, on records given as
    {"kind", "bytes", "blocks", "stack": [{"function", "file", "line",
    ...}]}.  which: "all", "plain" (skip the @leak checks that name a
    kind: the records have none yet) or "kinds" (only those).  Without
    dtv_exact (heaptrail's records), a @leak of a DTV function compares
    blocks only."""
    for func, want_bytes, want_blocks, kind in spec.leaks.get(depth, []):
        if (kind is None and which == "kinds") or \
                (kind is not None and which == "plain"):
            continue
        got_b = got_n = 0
        for r in names(records, func):
            if kind is None or r.get("kind") == kind:
                got_b += r["bytes"]
                got_n += r["blocks"]
        if not dtv_exact and func in DTV_FUNCS:
            got_b = want_bytes
        if (got_b, got_n) != (want_bytes, want_blocks):
            problems.append("%s: %srecords with %s hold %d bytes in %d "
                            "blocks, expected %d in %d" % (
                                label, kind + " " if kind else "", func,
                                got_b, got_n, want_bytes, want_blocks))
            continue
        if which == "kinds":
            continue
        if func not in spec.sites:
            continue
        want_file, want_line = spec.sites[func]
        firsts = [first_user_frame(r["stack"]) for r in records]
        firsts = [f for f in firsts if f and name_matches(func,
                                                          f.get("function"))]
        if not firsts:
            problems.append("%s: %s is never the first frame after the "
                            "allocator" % (label, func))
            continue
        good = [f for f in firsts
                if os.path.basename(f.get("file") or "") == want_file
                and f.get("line") == want_line]
        if not good:
            f = firsts[0]
            problems.append("%s: %s at %s:%s, expected %s:%d" % (
                label, func, f.get("file"), f.get("line"), want_file,
                want_line))
    if which == "kinds":
        return
    for func in spec.absent.get(depth, []):
        if names(records, func):
            problems.append("%s: %s must not be in use here" % (label, func))
    for func, count in spec.frames.get(depth, []):
        best = max([sum(1 for f in r["stack"]
                        if name_matches(func, f.get("function")))
                    for r in records] or [0])
        if best < count:
            problems.append("%s: deepest stack has %d frames of %s, expected"
                            " %d" % (label, best, func, count))
