#!/usr/bin/env python3
"""report.py — turns bench/run's measurements into bench/RESULTS.md.

    report.py RESULTS.tsv META.tsv [NOTES.md]  > RESULTS.md

RESULTS.tsv has one line per (workload, tool, size) with the hyperfine
statistics and the median peak RSS; META.tsv has the machine, versions and
settings. NOTES.md, when it exists, is hand-written analysis appended as
it is (so a regenerated report keeps it). Nothing here measures anything.
"""
import csv
import sys

WORKLOADS = ["churn", "threads", "deep", "sqlite3", "gcc"]
TOOLS = ["bare", "ht-exact", "ht-sample", "ht-auto", "ht-run", "heaptrack", "memcheck",
         "lsan", "jemalloc", "je-prof", "je-prof-exact"]
# each peer is set against the heaptrail mode that does the same job
PEERS = [("heaptrack", "ht-exact"), ("memcheck", "ht-exact"), ("lsan", "ht-exact"),
         ("je-prof-exact", "ht-exact"), ("je-prof", "ht-sample")]
LABEL = {
    "bare": "bare",
    "ht-exact": "**heaptrail exact**",
    "ht-sample": "heaptrail sampling (512 KiB)",
    "ht-auto": "heaptrail sampling (auto)",
    "ht-run": "heaptrail run -q (+ report)",
    "heaptrack": "heaptrack",
    "memcheck": "valgrind memcheck",
    "lsan": "LeakSanitizer",
    "jemalloc": "jemalloc (no profiling)",
    "je-prof": "jemalloc prof, sampling 2^19",
    "je-prof-exact": "jemalloc prof, exact",
}
WHAT = {
    "churn": "1 thread, 20 M malloc/free of 16–1024 B, 10 000 live",
    "threads": "churn over 2 threads, half the frees by the other thread",
    "deep": "6 M malloc/free, 42 frames below malloc",
    "sqlite3": "Debian's sqlite3, 160 k INSERTs + indexes + queries, in memory",
    "gcc": "Debian's cc1 -O2 on a generated 100-function C file",
}


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def num(x):
    return float(x) if x not in (None, "") else None


def fmt_time(t):
    if t >= 100:
        return "%.0f s" % t
    if t >= 10:
        return "%.1f s" % t
    return "%.2f s" % t


def fmt_ratio(r):
    if r >= 100:
        return "%.0f×" % r
    if r >= 10:
        return "%.1f×" % r
    return "%.2f×" % r


def fmt_mib(kb):
    return "%.0f MiB" % (kb / 1024) if kb >= 10240 else "%.1f MiB" % (kb / 1024)


class Table:
    def __init__(self, rows, meta):
        self.by = {(r["workload"], r["tool"], r["scale"]): r for r in rows}
        self.scale = meta["scale"]
        self.limit = meta.get("limit", "?")
        self.workloads = [w for w in WORKLOADS if any(r["workload"] == w for r in rows)]
        self.tools = [t for t in TOOLS if any(r["tool"] == t for r in rows)]
        self.footnotes = []

    def main_row(self, w, t):
        """The row of tool t on w: at the main size, or the reduced one."""
        r = self.by.get((w, t, self.scale))
        if r:
            return r
        for (w2, t2, _), r in self.by.items():
            if w2 == w and t2 == t:
                return r
        return None

    def bare(self, w, s, base="bare"):
        r = self.by.get((w, base, s))
        return num(r["median"]) if r and r["status"] == "ok" else None

    def ratio(self, w, t, base="bare"):
        r = self.main_row(w, t)
        if not r or r["status"] != "ok":
            return None
        b = self.bare(w, r["scale"], base)
        return num(r["median"]) / b if b else None

    def rss_ratio(self, w, t):
        r = self.main_row(w, t)
        b = self.by.get((w, "bare", r["scale"])) if r else None
        if not r or not b or not r["rss_kb"] or not b["rss_kb"]:
            return None
        return num(r["rss_kb"]) / num(b["rss_kb"])

    def note(self, text):
        if text not in self.footnotes:
            self.footnotes.append(text)
        return "<sup>%d</sup>" % (self.footnotes.index(text) + 1)

    def status_cell(self, r):
        if r is None:
            return "–"
        if r["status"] == "na":
            return "n/a" + self.note(r["note"])
        if r["status"] == "timeout":
            return "> %s s" % self.limit + (self.note(r["note"]) if r["note"] else "")
        if r["status"] == "failed":
            return "failed" + self.note(r["note"])
        return None

    def size_mark(self, r):
        if r["scale"] != self.scale:
            return self.note("run at a reduced size (×%s of the others): the ratio is to "
                             "bare at that same size" % fmt_scale(float(r["scale"]) / float(self.scale)))
        return ""


def fmt_scale(x):
    return ("%.3f" % x).rstrip("0").rstrip(".")


def row(cells):
    return "| " + " | ".join(cells) + " |"


def main():
    rows = load(sys.argv[1])
    meta = {}
    with open(sys.argv[2]) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            meta[k] = v
    notes = None
    if len(sys.argv) > 3:
        try:
            notes = open(sys.argv[3]).read()
        except OSError:
            pass
    T = Table(rows, meta)
    out = []
    p = out.append

    p("# heaptrail benchmarks")
    p("")
    p("Generated by `bench/run`%s on %s; every number below comes from that one "
      "run. heaptrail at `%s`." % (" --quick" if meta.get("quick") == "1" else "",
                                   meta["date"], meta["heaptrail"]))
    p("")
    p("Medians of %s; the machine is **shared with other sessions compiling and "
      "testing**, so expect a few percent of noise (more on the short runs); "
      "load average %s." % (meta["settings"], meta["load"]))
    p("")

    # --- time --------------------------------------------------------------
    p("## Time: median, and ratio to bare")
    p("")
    p(row(["tool"] + T.workloads))
    p(row(["---"] + ["---:"] * len(T.workloads)))
    for t in T.tools:
        cells = [LABEL[t]]
        for w in T.workloads:
            r = T.main_row(w, t)
            bad = T.status_cell(r)
            if bad:
                cells.append(bad)
                continue
            if t == "bare":
                cells.append(fmt_time(num(r["median"])))
                continue
            rt = T.ratio(w, t)
            cell = fmt_time(num(r["median"])) + " · " + (fmt_ratio(rt) if rt else "?")
            if t in ("je-prof", "je-prof-exact"):
                rj = T.ratio(w, t, base="jemalloc")
                if rj:
                    cell += " (%s jemalloc)" % fmt_ratio(rj)
            cells.append(cell + T.size_mark(r))
        p(row(cells))
    p("")

    # --- versus heaptrail ----------------------------------------------------
    if "ht-exact" in T.tools:
        p("## Peers against heaptrail")
        p("")
        p("A peer's slowdown divided by heaptrail's (each to bare at the size it ran "
          "at): above 1× the peer costs more than heaptrail, below 1× heaptrail costs "
          "more. Peers that track every allocation are set against heaptrail exact, "
          "jemalloc's sampling profiler against heaptrail sampling.")
        p("")
        p(row(["peer", "against"] + T.workloads))
        p(row(["---", "---"] + ["---:"] * len(T.workloads)))
        for t, mine in [(t, m) for t, m in PEERS if t in T.tools]:
            cells = [LABEL[t], LABEL[mine].strip("*")]
            for w in T.workloads:
                r = T.main_row(w, t)
                bad = T.status_cell(r) or T.status_cell(T.main_row(w, mine))
                h = T.ratio(w, mine)
                if bad:
                    cells.append(bad)
                elif not h:
                    cells.append("–")
                else:
                    cells.append(fmt_ratio(T.ratio(w, t) / h) + T.size_mark(r))
            p(row(cells))
        p("")

    # --- memory --------------------------------------------------------------
    p("## Peak RSS, and ratio to bare")
    p("")
    p("Median over the timed runs of the largest resident set of any process of "
      "the command (`ru_maxrss` of the waited-for children: for heaptrack, the "
      "larger of the program and its `heaptrack_interpret`).")
    p("")
    p(row(["tool"] + T.workloads))
    p(row(["---"] + ["---:"] * len(T.workloads)))
    for t in T.tools:
        cells = [LABEL[t]]
        for w in T.workloads:
            r = T.main_row(w, t)
            bad = T.status_cell(r)
            if bad:
                cells.append(bad)
            elif not r["rss_kb"]:
                cells.append("?")
            elif t == "bare":
                cells.append(fmt_mib(num(r["rss_kb"])))
            else:
                rr = T.rss_ratio(w, t)
                cells.append(fmt_mib(num(r["rss_kb"])) + " · " + (fmt_ratio(rr) if rr else "?")
                             + T.size_mark(r))
        p(row(cells))
    p("")

    # --- targets -------------------------------------------------------------
    p("## Targets of issue 6")
    p("")
    p(row(["target", "measured", "verdict"]))
    p(row(["---", "---:", "---"]))

    def verdict(got, limit, higher_is_better=False):
        if got is None:
            return "not measured"
        ok = got >= limit if higher_is_better else got <= limit
        if ok:
            return "met"
        return "**missed** by %.0f%%" % (abs(got / limit - 1) * 100)

    for w, lim in (("churn", 3), ("threads", 3), ("deep", 2), ("sqlite3", 2), ("gcc", 2)):
        if w in T.workloads:
            g = T.ratio(w, "ht-exact")
            p(row(["exact on %s ≤ %g× bare" % (w, lim), fmt_ratio(g) if g else "–", verdict(g, lim)]))
    for w in T.workloads:
        h, k = T.ratio(w, "ht-exact"), T.ratio(w, "heaptrack")
        if "heaptrack" in T.tools:
            g = k / h if h and k else None
            p(row(["exact on %s ≥ 3× cheaper than heaptrack" % w,
                   ("heaptrack/heaptrail %s" % fmt_ratio(g)) if g else "–", verdict(g, 3, True)]))
    for w in T.workloads:
        h, l = T.ratio(w, "ht-exact"), T.ratio(w, "lsan")
        if "lsan" in T.tools:
            g = h / l if h and l else None
            p(row(["exact on %s no slower than LeakSanitizer" % w,
                   ("heaptrail/LSan %s" % fmt_ratio(g)) if g else "–", verdict(g, 1)]))
    for w, lim in (("sqlite3", 1.03), ("gcc", 1.03), ("churn", 1.10)):
        if w in T.workloads and "ht-sample" in T.tools:
            g = T.ratio(w, "ht-sample")
            p(row(["sampling on %s ≤ %g× bare" % (w, lim), fmt_ratio(g) if g else "–", verdict(g, lim)]))
    for w, lim in (("sqlite3", 1.02),):
        if w in T.workloads and "ht-auto" in T.tools:
            g = T.ratio(w, "ht-auto")
            p(row(["sampling, sample=auto, on %s ≤ %g× bare" % (w, lim), fmt_ratio(g) if g else "–",
                   verdict(g, lim)]))
    if "sqlite3" in T.workloads and "ht-exact" in T.tools:
        g = T.rss_ratio("sqlite3", "ht-exact")
        p(row(["exact peak RSS on sqlite3 ≤ 1.5× bare", fmt_ratio(g) if g else "–", verdict(g, 1.5)]))
    p("")
    p("(≤ 32 bytes of metadata per live block is measured apart, by `bench/metadata`: "
      "see the notes below.)")
    p("")

    # --- details -------------------------------------------------------------
    p("## Details")
    p("")
    for w in T.workloads:
        p("### %s — %s" % (w, WHAT.get(w, "")))
        p("")
        p(row(["tool", "size", "median", "mean ± σ", "min … max", "× bare", "peak RSS", "runs"]))
        p(row(["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"]))
        for t in TOOLS:
            for (w2, t2, s), r in sorted(T.by.items(), key=lambda kv: -float(kv[0][2])):
                if w2 != w or t2 != t:
                    continue
                size = "×" + fmt_scale(float(s))
                bad = T.status_cell(r)
                if bad:
                    p(row([LABEL[t], size, bad, "", "", "", "", r["runs"]]))
                    continue
                b = T.bare(w, s)
                p(row([LABEL[t], size, fmt_time(num(r["median"])),
                       "%s ± %.3f" % (fmt_time(num(r["mean"])), num(r["stddev"])),
                       "%s … %s" % (fmt_time(num(r["min"])), fmt_time(num(r["max"]))),
                       fmt_ratio(num(r["median"]) / b) if b else "–",
                       fmt_mib(num(r["rss_kb"])) if r["rss_kb"] else "?", r["runs"]]))
        p("")

    # --- how -----------------------------------------------------------------
    p("## How it was measured")
    p("")
    p("- Each configuration runs once as a warm-up (which also checks that it works; "
      "its stderr is kept in `build/bench/logs/`), then `hyperfine -N` times the runs. "
      "Every run goes through `bench/support/benchwrap`, which enforces the time limit "
      "(a run over it shows as \"> limit\") and records the peak RSS.")
    p("- Workloads are built `-O2 -fomit-frame-pointer` (no frame pointers, like distro "
      "binaries); sqlite3 and cc1 are Debian's own, stripped, built without frame pointers.")
    p("- sizes: ×1 is the full workload; `BENCH_SCALE` shrinks all of them, and the two very "
      "slow tools (valgrind memcheck, jemalloc's exact profiler) run at a further reduced "
      "size so that a full run fits in about 20 minutes; they are compared with bare at "
      "that same size. A smaller run favours neither: fixed start-up costs (valgrind's "
      "reading of debug information) weigh more, so their ratios there are if anything "
      "higher than at full size.")
    p("- heaptrail exact: `LD_PRELOAD=build/libheaptrail.so HEAPTRAIL_OUTPUT=tmpdir`: the "
      "agent, its exit-time leak scan and its files, no symbolization; "
      "`heaptrail run -q` adds the CLI's symbolized report. heaptrail sampling sets "
      "`HEAPTRAIL_OPTIONS=sample=%s`." % meta.get("sample", "524288"))
    p("- heaptrack: `heaptrack -o tmpfile PROG` (its interpreter runs beside the program "
      "and compresses the trace; no analysis). heaptrack does not follow exec'd "
      "children, which is why the gcc workload runs cc1 directly, with the arguments "
      "`gcc -O2 -S` gives it, under every tool.")
    p("- valgrind memcheck: `valgrind --leak-check=full -q --trace-children=yes`.")
    p("- LeakSanitizer: `LD_PRELOAD=liblsan-init.so:liblsan.so.0`, `LSAN_OPTIONS=exitcode=0` "
      "(leaks found do not fail the run); liblsan-init.so mallocs once in a constructor, "
      "without which sqlite3 crashes (LSan initialises lazily and its signal() "
      "interceptor runs first). LSan unwinds malloc stacks with frame pointers only, so on "
      "these binaries its stacks are short or wrong; it also replaces the allocator.")
    p("- jemalloc: `LD_PRELOAD=libjemalloc.so.2`; profiling with "
      "`MALLOC_CONF=prof:true,prof_final:true` (default sampling, lg_prof_sample 19) or "
      "with `lg_prof_sample:0` (every allocation); \"(… jemalloc)\" is the ratio to "
      "jemalloc without profiling, its own baseline.")
    p("- sqlite3 runs on `:memory:` (no disk I/O in the measurement).")
    p("")

    # --- machine -------------------------------------------------------------
    p("## Machine and versions")
    p("")
    for k in ("cpu", "nproc", "memory", "kernel", "os", "duration", "gcc", "glibc", "sqlite3",
              "hyperfine", "valgrind", "heaptrack", "jemalloc", "lsan"):
        if k in meta:
            p("- %s: %s" % (k, meta[k]))
    p("")

    if T.footnotes:
        p("## Notes on cells")
        p("")
        for i, n in enumerate(T.footnotes, 1):
            p("%d. %s" % (i, n))
        p("")
    if notes:
        p(notes.rstrip())
        p("")
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
