"""Valgrind memcheck, the oracle: its logs parsed, its results cached."""

from .harness import *  # noqa: F401,F403

# ---------------------------------------------------------------- valgrind

VG_PARSER = 4   # bump when parse_vg_log's output changes: invalidates cache
VG_PREFIX = re.compile(r"^==(\d+)== ?(.*)$")
VG_RECORD = re.compile(r"^([\d,]+)(?: \(([\d,]+) direct, ([\d,]+) indirect\))?"
                       r" bytes in ([\d,]+) blocks are (.+?) in loss record")
VG_FRAME = re.compile(r"^\s*(?:at|by) 0x([0-9A-Fa-f]+): (.*?)"
                      r"(?: \(([^()]*)\))?$")
# A leak check's change since the previous one: "384 (+144) bytes".
VG_DELTA = re.compile(r" \(([+-][\d,]+)\)")
VG_KIND = re.compile(r"^\s*(definitely lost|indirectly lost|possibly lost|"
                     r"still reachable|suppressed): ([\d,]+) bytes in "
                     r"([\d,]+) blocks")
VG_HEURISTIC = re.compile(r"^\s*(\w+)\s*: ([\d,]+) bytes in ([\d,]+) blocks")


def num(s):
    return int(s.replace(",", ""))


def parse_vg_logs(logdir):
    """One entry per valgrind log that reached exit (has a heap summary)."""
    procs = []
    for fname in sorted(os.listdir(logdir)):
        m = re.match(r"^vg\.(\d+)$", fname)
        if not m:
            continue
        with open(os.path.join(logdir, fname), errors="replace") as f:
            proc = parse_vg_log(int(m.group(1)), f.read())
        if proc:
            procs.append(proc)
    return procs


def parse_vg_log(pid, text):
    """{"pid", "ppid", "args", "in_use", "usage", "records", "kinds",
    "heuristics", "checks", "free_errors"}: free_errors is how many
    invalid and mismatched frees it printed (each context's first);
    records and kinds (LEAK SUMMARY, all zero when every block was
    freed) are those of the check at exit; checks are the leak checks
    the program asked for while it ran, in order, each {"records",
    "kinds", "increase"} where increase is each kind's change since the
    previous check."""
    proc = {"pid": pid, "ppid": None, "args": [], "in_use": None,
            "usage": None, "records": [], "kinds": None, "heuristics": {},
            "checks": [], "free_errors": 0}
    check = None        # the leak check being read
    at_exit = False     # past HEAP SUMMARY: the check at exit
    record = None
    in_heuristics = False

    def new_check():
        return {"records": [], "kinds": {}, "increase": {}}

    for raw in text.split("\n"):
        m = VG_PREFIX.match(raw)
        if not m:
            continue
        line = m.group(2)
        deltas = [num(d) for d in VG_DELTA.findall(line)]
        line = VG_DELTA.sub("", line)
        if record is not None:
            fm = VG_FRAME.match(line)
            if fm:
                fn, loc = fm.group(2), fm.group(3) or ""
                frame = {"pc": "0x" + fm.group(1).lower(), "function": fn,
                         "file": None, "line": None, "module": None}
                lm = re.match(r"^(.*):(\d+)$", loc)
                if loc.startswith("in "):
                    frame["module"] = loc[3:]
                elif lm:
                    frame["file"], frame["line"] = lm.group(1), int(lm.group(2))
                record["stack"].append(frame)
                continue
            record = None
        if line in ("Invalid free() / delete / delete[] / realloc()",
                    "Mismatched free() / delete / delete []"):
            proc["free_errors"] += 1
        if line.startswith("Command: "):
            proc["args"] = line[len("Command: "):].split()[1:]
        elif line.startswith("Parent PID: "):
            proc["ppid"] = int(line[len("Parent PID: "):])
        elif line.startswith("HEAP SUMMARY:"):
            at_exit = True
            check = new_check()
        elif "in use at exit:" in line:
            um = re.search(r"in use at exit: ([\d,]+) bytes in ([\d,]+) "
                           r"blocks", line)
            proc["in_use"] = [num(um.group(1)), num(um.group(2))]
        elif "total heap usage:" in line:
            um = re.search(r"([\d,]+) allocs, ([\d,]+) frees, ([\d,]+) "
                           r"bytes allocated", line)
            proc["usage"] = [num(g) for g in um.groups()]
        elif "All heap blocks were freed" in line and at_exit:
            proc["kinds"] = {k: [0, 0] for k in SUMMARY_KINDS}
        elif "of which reachable via heuristic" in line:
            in_heuristics = True
        elif VG_KIND.match(line):
            km = VG_KIND.match(line)
            kind = VG_KINDS[km.group(1)]
            if check is None:
                check = new_check()
            check["kinds"][kind] = [num(km.group(2)), num(km.group(3))]
            if len(deltas) == 2:
                check["increase"][kind] = deltas
            in_heuristics = False
            if kind == "suppressed":    # the summary's last line
                if at_exit:
                    proc["kinds"] = check["kinds"]
                    proc["records"] = check["records"]
                else:
                    proc["checks"].append(check)
                check = None
        elif in_heuristics and VG_HEURISTIC.match(line) and at_exit:
            hm = VG_HEURISTIC.match(line)
            proc["heuristics"][hm.group(1)] = [num(hm.group(2)),
                                               num(hm.group(3))]
        else:
            rm = VG_RECORD.match(line)
            if rm:
                own = rm.group(2) or rm.group(1)
                record = {"bytes": num(own), "blocks": num(rm.group(4)),
                          "kind": VG_KINDS.get(rm.group(5), rm.group(5)),
                          "stack": []}
                if deltas:
                    # total, [direct, indirect,] blocks
                    record["increase"] = {
                        "bytes": deltas[1] if rm.group(2) else deltas[0],
                        "blocks": deltas[-1]}
                if check is None:
                    check = new_check()
                check["records"].append(record)
    return proc if proc["in_use"] is not None else None


def vg_cache_key(files, extra):
    """The key of a cached valgrind result: the contents of files (the
    program and the libraries built beside it, suppression files), of
    the system libraries it loads, valgrind's version, the log parser's
    version (VG_PARSER) and extra (options, arguments, stdin...)."""
    _, version, _ = run(["valgrind", "--version"], env=os.environ)
    return sha256_files(list(files) + system_libs(), json.dumps(
        [VG_PARSER, VALGRIND, version.decode(), RUN_ENV.get("LC_ALL"),
         extra]))
