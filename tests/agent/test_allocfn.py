"""Allocator functions hooked by name (issue 15): --alloc-fn, --free-fn...

    allocfn:pools    tests/progs/pools.c built with -DPOOLS_BY_NAME
                     (no annotation at all) under `heaptrail run` with its
                     arena functions named: the leak summary equals
                     valgrind's on the annotated build (the oracle), and
                     per pool the bytes and blocks lost and held, the
                     tree's parents, `report --pool` are what the program
                     counts itself (test_pools' checks, on this run)
    allocfn:pprof    a final dump of that build, hooked by name: the
                     in-use bytes and objects of each pool's samples (pprof
                     label pool=NAME, `top --pool`) are what the program
                     holds in the pool; `collapsed` shows a superblock's
                     stack from arena_alloc to its caller, no agent frame
    allocfn:edges    tests/progs/allocfn_edges.c: functions whose
                     first instructions are RIP-relative (one static, from
                     .symtab) or a short conditional jump are hooked and
                     still work (the program checks every chunk is where
                     its own count says) and their chunks are recorded as
                     the program counts them; a 3-byte function, one with
                     a loop back to its entry, one whose .cold part jumps
                     back to its entry and a name that does not exist are
                     refused, each with its one line, and run unhooked;
                     the program prints the same as bare
    allocfn:cxx      tests/progs/allocfn_cxx.cc: C++ methods hooked
                     by their qualified names (mem::Pool::take, and
                     mem::Pool::grab, which has a .cold part: it was
                     refused as "several functions"; a method whose .cold
                     part jumps back to its entry is refused for that,
                     with its one line) and a function
                     whose displaced first bytes hold a call (pool_take);
                     exceptions thrown by the method reach main through
                     both hooks (the program prints the same as bare, exits
                     0) and the pool holds what the program counts
    allocfn:header   tests/progs/allocfn_header.c: pools that keep
                     their pool in the word before each chunk, named with
                     ctx=*(ret-8) (alloc) and ctx=*(arg1-8) (free): each
                     pool holds what the program counts, after frees and a
                     reset
    allocfn:unloaded a run with nothing to hook does not load Zydis (the
                     agent loads it, RTLD_LOCAL, only to hook)
    allocfn:embedded tests/progs/embedded_mi.c, a program with its
                     own copy of an allocator under mimalloc's names (a
                     small test allocator over mmap, never malloc), run
                     with no option: its leaks are found at the program's
                     sites, as many bytes and blocks as it counts (frame
                     #1 the mi_ function, #2 the site); with
                     builtin_fns=0 none is (the profile finds them)
    allocfn:rust     tests/progs/embedded_rust.rs, built by Debian's
                     rustc: a #[global_allocator] of its own that never
                     calls malloc; with no option its leaks are found at
                     the program's sites (frame #1 __rust_alloc or
                     __rust_alloc_zeroed), as many bytes and blocks as it
                     counts
    allocfn:threads  the edges program with a preloaded library whose
                     constructor starts a thread before the agent's: the
                     hook is written with that thread stopped by ptrace
                     and records what the program counts; with the
                     fallback's signal (stop_ptrace=0), which would end the
                     thread's pause(), it is refused with one line; the
                     program runs as bare either way
    allocfn:debug-file  that build stripped of every symbol table but
                     .dynsym: with its symbols in a separate debug file
                     found by build-id (debug_dir=DIR/.build-id/xx/y.debug,
                     Debian's -dbgsym layout) its pools hold what the
                     program counts (and what the unstripped run's hold);
                     without, each function is refused and no pool is made
    allocfn:options  the same hooks from HEAPTRAIL_OPTIONS (alloc_fn=...,
                     commas inside the parentheses) and from an options
                     file (--options-file), and a malformed spec, a file
                     naming a program or another file, a flag whose value
                     is missing (not taken from the next line), two words
                     for a flag without a value, a missing file, refused
                     by `heaptrail run` before it starts anything
"""
import json
import os
import re
import shutil
import threading

import run_tests as rt
from run_tests import Failure, Skip
import test_pools as annotated

HERE = os.path.dirname(os.path.abspath(__file__))

# pools.c's operations, each a function taking the arena first
POOL_FNS = [
    "--create-fn", "arena_create_sized(parent=arg1,name=arg2)->ret",
    "--alloc-fn", "arena_alloc(ctx=arg1,size=arg2)->ret",
    "--free-fn", "arena_free(ctx=arg1,ptr=arg2)",
    "--realloc-fn", "arena_grow(ctx=arg1,ptr=arg2,size=arg4)->ret",
    "--reset-fn", "arena_reset(ctx=arg1)",
    "--destroy-fn", "arena_destroy(ctx=arg1)",
    "--move-fn", "arena_move(ctx=arg1)->ret",
    "--trim-fn", "arena_trim(ctx=arg1,ptr=arg2,size=arg3)",
    # the slab's objects: malloc-like blocks, no pool
    "--alloc-fn", "obj_new(size=arg2)->ret",
    "--free-fn", "obj_delete(ptr=arg1)",
    "--realloc-fn", "obj_resize(ptr=arg1,size=arg3)->ret",
]

EDGE_FNS = [
    "--alloc-fn", "rip_alloc(ctx=arg1,size=arg2)->ret",
    "--alloc-fn", "branch_alloc(ctx=arg1,size=arg2)->ret",
    "--free-fn", "short_free(ctx=arg1,ptr=arg2)",
    "--alloc-fn", "loop_alloc(ctx=arg1,size=arg2)->ret",
    "--alloc-fn", "cold_alloc(ctx=arg1,size=arg2)->ret",
    "--free-fn", "no_such_function(ptr=arg1)",
]
REFUSED = [
    "heaptrail: cannot hook 'short_free': the function is 3 bytes long, shorter than the "
    "5-byte jump",
    "heaptrail: cannot hook 'loop_alloc': its branch at +0x13 jumps back into its first 8 "
    "bytes, which the hook replaces",
    "heaptrail: cannot hook 'cold_alloc': a branch of its .cold part at +0x5 jumps back into "
    "its first 5 bytes, which the hook replaces",
    "heaptrail: cannot hook 'no_such_function': no function of that name in the program or "
    "its libraries",
]

_cache = {}
_lock = threading.RLock()   # builds and the run are shared by two tests each


def once(key, make):
    """make()'s value, made once per session (two tests share each)."""
    with _lock:
        if key not in _cache:
            _cache[key] = make()
        return _cache[key]


def build(suite, name, src, flags, cc=None):
    """(work dir, binary) of progs/SRC built with flags."""
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "allocfn_" + name))
    prog = os.path.join(work, name)
    rc, _, err = rt.run([cc or suite.cc, "-g", "-O1"] + flags + ["-o", prog,
                                                         os.path.join(os.path.dirname(HERE), "progs", src)])
    if rc != 0:
        raise Failure("cc %s %s: %s" % (" ".join(flags), src, rt.short(err, 600)))
    return work, prog


def byname_build(suite):
    return once("bin", lambda: build(suite, "pools_byname", "pools.c", ["-DPOOLS_BY_NAME"]))


def byname_run(suite):
    """(status, stdout, report JSON, outdir) of the unannotated build."""
    def make():
        rc, stdout, obj, out, err = annotated.run_report(suite, byname_build(suite)[1], POOL_FNS)
        if b"cannot hook" in err or b"ignoring" in err:
            raise Failure("heaptrail refused a function: %s" % rt.short(err, 600))
        return rc, stdout, obj, out
    return once("run", make)


def test_pools(suite):
    if not shutil.which("valgrind"):
        raise Skip("valgrind not installed")
    work, prog = byname_build(suite)
    rc, bare, err = rt.run([prog], cwd=work)
    run = byname_run(suite)
    problems, details = [], []
    if rc != 0 or run[0] != 0:
        problems.append("status bare %d, under heaptrail %d" % (rc, run[0]))
    if run[1] != bare:
        problems.append("under heaptrail the program prints %s" % rt.short(run[1]))
    vg = annotated.vg_run(suite)
    want = vg["procs"][0]["kinds"] if len(vg["procs"]) == 1 else {}
    got = run[2].get("summary", {})
    for k in annotated.KINDS4:
        w = tuple(want.get(k, (0, 0)))
        g = (got.get(k, {}).get("bytes"), got.get(k, {}).get("blocks"))
        details.append("%s: valgrind (annotated build) %s, heaptrail by name %s" % (k, w, g))
        if w != g or w == (0, 0):
            problems.append("%s: heaptrail by name says %s bytes/blocks, valgrind %s" %
                            (k, g, w))
    p2, d2 = annotated.check_per_pool(suite, run)
    return problems + p2, details + d2


def test_pprof(suite):
    work, prog = byname_build(suite)
    final = os.path.join(work, "final")
    problems, details = annotated.check_pprof(suite, prog, POOL_FNS, final)
    # the superblocks' stacks go from the hooked function to its caller,
    # without the trampoline between them
    dump = [os.path.join(final, f) for f in os.listdir(final) if f.endswith(".final.heap")][0]
    rc, text, err = rt.run([suite.heaptrail, "collapsed", dump])
    lines = text.decode(errors="replace").split("\n")
    if rc != 0 or not any(";fill_cache;arena_alloc;new_superblock " in l for l in lines):
        problems.append("collapsed: status %d, no fill_cache;arena_alloc;new_superblock: %s" %
                        (rc, rt.short(text, 600)))
    if any("agent_" in l or "libheaptrail" in l for l in lines):
        problems.append("collapsed shows the agent's frames: %s" % rt.short(text, 600))
    return problems, details


def edges_build(suite):
    return once("edges", lambda: build(suite, "edges", "allocfn_edges.c", []))


def held(stdout):
    """{'rip': (bytes, blocks), 'branch': ...} as the program prints them."""
    return {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(rb"^leak (\w+) (\d+) (\d+)$", stdout, re.M)}


def pools_held(obj):
    """[(bytes, blocks)] of the report's pools, in the order they were made."""
    return [(p["bytes"], p["blocks"]) for p in sorted(obj.get("pools", []),
                                                      key=lambda p: p["id"])]


def test_edges(suite):
    work, prog = edges_build(suite)
    rc, bare, err = rt.run([prog], cwd=work)
    if rc != 0 or b"arena OK" not in bare:
        raise Failure("bare: status %d, prints %s %s" % (rc, rt.short(bare), rt.short(err)))
    counts = held(bare)
    out, jpath = os.path.join(work, "out"), os.path.join(work, "out.json")
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--json", jpath] +
                             EDGE_FNS + ["--", prog], cwd=work)
    problems = []
    if rc != 0 or stdout != bare:
        problems.append("under heaptrail: status %d, prints %s" % (rc, rt.short(stdout)))
    lines = err.decode(errors="replace").split("\n")
    for want in REFUSED:
        if lines.count(want) != 1:
            problems.append("not said once: %s" % want)
    said = [l for l in lines if "cannot hook" in l]
    if len(said) != len(REFUSED):
        problems.append("%d refusals, %d expected: %s" % (len(said), len(REFUSED), said))
    if not os.path.exists(jpath):
        raise Failure("no JSON report: %s" % rt.short(err, 600))
    with open(jpath) as f:
        obj = json.load(f)
    # rip_alloc's pool (pool_a) is made first, then branch_alloc's; the
    # refused loop_alloc's chunk is not recorded
    got = pools_held(obj)
    want = [counts.get(b"rip"), counts.get(b"branch")]
    if got != want:
        problems.append("pools hold %s bytes/blocks, the program %s" % (got, want))
    return problems, ["pools: %s, program: %s" % (got, want)] + said


def test_options(suite):
    work, prog = edges_build(suite)
    rc, bare, _ = rt.run([prog], cwd=work)
    counts = held(bare)
    env = dict(rt.RUN_ENV, HEAPTRAIL_OPTIONS="alloc_fn=rip_alloc(ctx=arg1,size=arg2)->ret,"
               "free_fn=short_free(ctx=arg1,ptr=arg2),depth=32")
    out, jpath = os.path.join(work, "env"), os.path.join(work, "env.json")
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--json", jpath, "--",
                              prog], cwd=work, env=env)
    problems = []
    if rc != 0 or stdout != bare:
        problems.append("HEAPTRAIL_OPTIONS: status %d, prints %s" % (rc, rt.short(stdout)))
    if err.count(b"cannot hook") != 1 or REFUSED[0].encode() not in err:
        problems.append("HEAPTRAIL_OPTIONS: said %s" % rt.short(err, 600))
    if b"ignoring" in err:
        problems.append("HEAPTRAIL_OPTIONS: an option was not understood: %s" % rt.short(err))
    got = []
    if os.path.exists(jpath):
        with open(jpath) as f:
            got = pools_held(json.load(f))
    if got != [counts.get(b"rip")]:
        problems.append("HEAPTRAIL_OPTIONS: pools hold %s, the program %s" %
                        (got, counts.get(b"rip")))
    # the same from an options file (comments, blank lines, spaces before
    # the value); then files that must be refused, with one line each
    opts = os.path.join(work, "edges.options")
    with open(opts, "w") as f:
        f.write("# edges.c's pools\n\n--alloc-fn   rip_alloc(ctx=arg1,size=arg2)->ret\n"
                "  --free-fn short_free(ctx=arg1,ptr=arg2)\n--depth 32\n")
    out, jpath = os.path.join(work, "file"), os.path.join(work, "file.json")
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "--options-file", opts, "-o", out,
                              "--json", jpath, "--", prog], cwd=work, env=rt.RUN_ENV)
    got = []
    if os.path.exists(jpath):
        with open(jpath) as f:
            got = pools_held(json.load(f))
    if rc != 0 or stdout != bare or err.count(b"cannot hook") != 1 or \
            got != [counts.get(b"rip")]:
        problems.append("--options-file: status %d, pools %s (the program %s), said %s"
                        % (rc, got, counts.get(b"rip"), rt.short(err, 400)))
    for text, why in (("--alloc-fn f(size=arg9)->ret\n", "arg1 to arg6"),
                      ("--depth 32\n" + prog + "\n", "is not an option of heaptrail run"),
                      ("--options-file " + opts + "\n", "cannot name another"),
                      ("-o\n--peak\n", "needs a value"),
                      ("--peak now\n", "one option per line")):
        with open(opts, "w") as f:
            f.write(text)
        rc, stdout, err = rt.run([suite.heaptrail, "run", "--options-file", opts, "--", prog],
                                 cwd=work)
        said = err.decode(errors="replace").strip()
        if rc == 0 or stdout or len(said.split("\n")) != 1 or why not in said:
            problems.append("options file %r: status %d, says %s" % (text, rc, rt.short(err)))
    rc, stdout, err = rt.run([suite.heaptrail, "run", "--options-file",
                              os.path.join(work, "none.options"), "--", prog], cwd=work)
    if rc == 0 or stdout or b"cannot read the options file" not in err:
        problems.append("a missing options file: status %d, says %s" % (rc, rt.short(err)))
    for flag, spec, why in (("--alloc-fn", "rip_alloc(ctx=arg1,size=arg9)->ret", "arg1 to arg6"),
                            ("--free-fn", "f(ctx=arg1)", "needs ptr=argN"),
                            ("--alloc-fn", "a(size=arg1)", "needs size=argN and ->ret")):
        rc, stdout, err = rt.run([suite.heaptrail, "run", "-o", os.path.join(work, "bad"), flag,
                                  spec, "--", prog], cwd=work)
        text = err.decode(errors="replace").strip()
        if rc == 0 or stdout or len(text.split("\n")) != 1 or spec not in text or why not in text:
            problems.append("%s '%s': status %d, says %s" % (flag, spec, rc, rt.short(err)))
    return problems, []


def hooked_run(suite, work, prog, args, bare, env=None, name="out"):
    """heaptrail run -q of prog with args: (problems, report JSON or {});
    a problem when it fails, prints other than bare or refuses a hook."""
    out, jpath = os.path.join(work, name), os.path.join(work, name + ".json")
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--json", jpath] + args +
                             ["--", prog], cwd=work, env=env or rt.RUN_ENV)
    problems = []
    if rc != 0 or stdout != bare or b"cannot hook" in err:
        problems.append("%s: status %d, prints %s, says %s" % (name, rc, rt.short(stdout),
                                                             rt.short(err)))
    obj = {}
    if os.path.exists(jpath):
        with open(jpath) as f:
            obj = json.load(f)
    return problems, obj


def test_threads(suite):
    work, prog = edges_build(suite)
    lib = os.path.join(work, "libthread_first.so")
    rc, _, err = rt.run([suite.cc, "-shared", "-fPIC", "-o", lib,
                         os.path.join(os.path.dirname(HERE), "progs", "allocfn_thread_lib.c"), "-lpthread"])
    if rc != 0:
        raise Failure("cc allocfn_thread_lib.c: %s" % rt.short(err, 600))
    rc, bare, _ = rt.run([prog], cwd=work)
    problems, notes = [], []
    # with ptrace the thread (in pause()) is stopped and the hook written;
    # the fallback's signal would end its pause(): it is left running, so
    # the hook is refused, with one line
    refused = ("heaptrail: cannot hook 'rip_alloc': not every thread of the program could be "
               "stopped")
    for stop, want in (("ptrace", [held(bare).get(b"rip")]), ("signal", [])):
        env = dict(rt.RUN_ENV, LD_PRELOAD=lib,
                   HEAPTRAIL_OPTIONS="stop_ptrace=%d" % (stop == "ptrace"))
        out, jpath = os.path.join(work, "threads_" + stop), os.path.join(work, stop + ".json")
        rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--json", jpath,
                                  "--alloc-fn", "rip_alloc(ctx=arg1,size=arg2)->ret", "--", prog],
                                 cwd=work, env=env)
        said = [l for l in err.decode(errors="replace").split("\n") if "cannot hook" in l]
        got = None
        if os.path.exists(jpath):
            with open(jpath) as f:
                got = pools_held(json.load(f))
        if rc != 0 or stdout != bare:
            problems.append("stopped by %s: status %d, prints %s" % (stop, rc, rt.short(stdout)))
        if got != want or said != ([refused] if stop == "signal" else []):
            problems.append("stopped by %s: pools %s (want %s), said %s" % (stop, got, want, said))
        notes.append("stopped by %s: pools %s, program %s, said %s" % (stop, got, want, said))
    return problems, notes


def test_cxx(suite):
    work, prog = build(suite, "cxx", "allocfn_cxx.cc", [], suite.cxx)
    rc, bare, err = rt.run([prog], cwd=work)
    m = re.search(rb"^pool live (\d+) (\d+)$", bare, re.M)
    if rc != 0 or not m or b"caught 5" not in bare:
        raise Failure("bare: status %d, prints %s %s" % (rc, rt.short(bare), rt.short(err)))
    problems, obj = hooked_run(suite, work, prog,
                               ["--alloc-fn", "mem::Pool::take(ctx=arg1,size=arg2)->ret",
                                "--alloc-fn", "pool_take(ctx=arg1,size=arg2)->ret",
                                "--alloc-fn", "mem::Pool::grab(ctx=arg1,size=arg2)->ret"], bare)
    got = pools_held(obj)
    want = [(int(m.group(1)), int(m.group(2)))]
    if got != want:
        problems.append("pools hold %s bytes/blocks, the program %s" % (got, want))
    # a .cold part found by the qualified name's mangling: one that jumps
    # back to the entry is refused for it
    rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", os.path.join(work, "back"),
                              "--alloc-fn", "mem::Pool::grab_back(ctx=arg1,size=arg2)->ret",
                              "--", prog], cwd=work)
    said = [l for l in err.decode(errors="replace").split("\n") if "cannot hook" in l]
    want_said = ["heaptrail: cannot hook 'mem::Pool::grab_back': a branch of its .cold part "
                 "at +0x5 jumps back into its first 6 bytes, which the hook replaces"]
    if rc != 0 or stdout != bare or said != want_said:
        problems.append("grab_back: status %d, prints %s, says %s; want %s" % (
            rc, rt.short(stdout), said, want_said))
    return problems, ["pools: %s, program: %s" % (got, want)]


def test_header(suite):
    work, prog = build(suite, "header", "allocfn_header.c", [])
    rc, bare, _ = rt.run([prog], cwd=work)
    want = [(int(m.group(1)), int(m.group(2)))
            for m in re.finditer(rb"^pool \w+ live (\d+) (\d+)$", bare, re.M)]
    if rc != 0 or len(want) != 2:
        raise Failure("bare: status %d, prints %s" % (rc, rt.short(bare)))
    problems, obj = hooked_run(suite, work, prog,
                               ["--alloc-fn", "hdr_alloc(ctx=*(ret-8),size=arg1)->ret",
                                "--free-fn", "hdr_free(ctx=*(arg1-8),ptr=arg1)",
                                "--reset-fn", "hdr_reset(ctx=arg1)"], bare)
    got = pools_held(obj)
    if got != want:
        problems.append("pools hold %s bytes/blocks, the program %s" % (got, want))
    return problems, ["pools: %s, program: %s" % (got, want)]


def leaks_by_site(obj, prefix="mi_"):
    """{site: (bytes, blocks)} of the definitely lost malloc-like records,
    by the function above the allocator's (its last ::-separated name)."""
    sites = {}
    for r in obj.get("records", []):
        if r.get("allocator") != "malloclike" or r["kind"] != "definitely_lost":
            continue
        stack = r.get("stack", [])
        site = stack[1]["function"].split("::")[-1] if len(stack) > 1 and \
            stack[0]["function"].startswith(prefix) else "?"
        b, n = sites.get(site, (0, 0))
        sites[site] = (b + r["bytes"], n + r["blocks"])
    return sites


def program_sites(stdout):
    return {m.group(1).decode(): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(rb"^site (\w+) (\d+) (\d+)$", stdout, re.M)}


def test_embedded(suite):
    work, prog = build(suite, "embedded_mi", "embedded_mi.c", [])
    rc, bare, _ = rt.run([prog], cwd=work)
    want = program_sites(bare)
    if rc != 0 or len(want) != 3:
        raise Failure("bare: status %d, prints %s" % (rc, rt.short(bare)))
    problems, details = [], []
    for opts, expect in (("", want), ("builtin_fns=0", {})):
        p, obj = hooked_run(suite, work, prog, [], bare, dict(rt.RUN_ENV, HEAPTRAIL_OPTIONS=opts),
                            "out" + opts.replace("=", ""))
        problems += p
        got = leaks_by_site(obj)
        details.append("%s: heaptrail %s, program %s" % (opts or "no option", got, expect))
        if got != expect:
            problems.append("%s: leaks by site %s, expected %s" % (opts or "no option", got,
                                                                  expect))
    return problems, details


def test_unloaded(suite):
    """Zydis is loaded only when there is something to hook."""
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "allocfn-unloaded"))
    rc, maps, err = rt.run([suite.heaptrail, "run", "-q", "-o", os.path.join(work, "out"), "--",
                            "cat", "/proc/self/maps"], env=rt.RUN_ENV)
    if rc != 0 or b"libheaptrail" not in maps:
        raise Failure("run cat /proc/self/maps: status %d, agent mapped: %s (%s)"
                      % (rc, b"libheaptrail" in maps, rt.short(err)))
    if b"libZydis" in maps:
        return ["a run with nothing to hook maps libZydis"], []
    return [], []


def test_debug_file(suite):
    """pools.c's unannotated build stripped (its arena functions are in no
    symbol table left), its symbols in a separate debug file by build-id."""
    work, prog = byname_build(suite)
    dbg = rt.fresh_dir(os.path.join(work, "debug"))
    stripped = os.path.join(dbg, "pools_stripped")
    m = re.search(rb"Build ID: ([0-9a-f]+)", rt.run(["readelf", "-n", prog])[1])
    if not m:
        raise Failure("no build-id in %s" % prog)
    bid = m.group(1).decode()
    debug = os.path.join(dbg, "lib", ".build-id", bid[:2], bid[2:] + ".debug")
    os.makedirs(os.path.dirname(debug))
    for cmd in (["objcopy", "--only-keep-debug", prog, debug],
                ["objcopy", "--strip-all", prog, stripped]):
        rc, _, err = rt.run(cmd)
        if rc:
            raise Failure("%s: %s" % (" ".join(cmd), rt.short(err)))
    rc, bare, _ = rt.run([stripped], cwd=work)
    _, _, want_obj, _ = byname_run(suite)
    want = pools_held(want_obj)
    problems, notes = [], []
    for where, opts in (("no debug file", ""), ("debug file", "debug_dir=" + os.path.join(dbg, "lib"))):
        out, jpath = os.path.join(dbg, "out"), os.path.join(dbg, "out.json")
        rt.fresh_dir(out)
        env = dict(rt.RUN_ENV, HEAPTRAIL_OPTIONS=opts)
        rc, stdout, err = rt.run([suite.heaptrail, "run", "-q", "-o", out, "--json", jpath] +
                                 POOL_FNS + ["--", stripped], cwd=work, env=env)
        with open(jpath) as f:
            got = pools_held(json.load(f))
        refused = [l for l in err.decode(errors="replace").split("\n") if "cannot hook" in l]
        notes.append("%s: pools %s, %d refused" % (where, got, len(refused)))
        if rc != 0 or stdout != bare:
            problems.append("%s: status %d, prints %s" % (where, rc, rt.short(stdout)))
        if where == "debug file" and (got != want or refused):
            problems.append("with the debug file: pools %s (want %s), refused %s"
                            % (got, want, refused))
        if where == "debug file":   # against the program's own counts
            with open(jpath) as f:
                p2, d2 = annotated.check_per_pool(suite, (rc, stdout, json.load(f), out))
            problems += p2
            notes += d2
        if where == "no debug file" and (got or len(refused) != len(POOL_FNS) // 2):
            problems.append("without it: pools %s, refused %d of %d"
                            % (got, len(refused), len(POOL_FNS) // 2))
    return problems, notes


def rustc():
    """Debian's rustc (a rustup one earlier on PATH is not what CI has)."""
    return "/usr/bin/rustc" if os.path.exists("/usr/bin/rustc") else shutil.which("rustc")


def test_rust(suite):
    if not rustc():
        raise Skip("rustc not installed (Debian package rustc)")
    work = rt.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "allocfn_rust"))
    prog = os.path.join(work, "embedded_rust")
    rc, _, err = rt.run([rustc(), "-g", "-C", "opt-level=1", "-o", prog,
                         os.path.join(os.path.dirname(HERE), "progs", "embedded_rust.rs")], timeout=300)
    if rc != 0:
        raise Failure("rustc embedded_rust.rs: %s" % rt.short(err, 600))
    rc, bare, _ = rt.run([prog], cwd=work)
    want = program_sites(bare)
    if rc != 0 or len(want) != 2:
        raise Failure("bare: status %d, prints %s" % (rc, rt.short(bare)))
    problems, obj = hooked_run(suite, work, prog, [], bare)
    got = leaks_by_site(obj, "__rust_alloc")
    if got != want:
        problems.append("leaks by site %s, the program %s" % (got, want))
    return problems, ["heaptrail %s, program %s" % (got, want)]


def collect(suite):
    return [("allocfn:pools", lambda: test_pools(suite)),
            ("allocfn:unloaded", lambda: test_unloaded(suite)),
            ("allocfn:pprof", lambda: test_pprof(suite)),
            ("allocfn:edges", lambda: test_edges(suite)),
            ("allocfn:cxx", lambda: test_cxx(suite)),
            ("allocfn:header", lambda: test_header(suite)),
            ("allocfn:embedded", lambda: test_embedded(suite)),
            ("allocfn:rust", lambda: test_rust(suite)),
            ("allocfn:threads", lambda: test_threads(suite)),
            ("allocfn:options", lambda: test_options(suite)),
            ("allocfn:debug-file", lambda: test_debug_file(suite))]
