/*
 * vocab — the words of heaptrail's files, one place for each: the names
 * of the files the agent writes, and per format its magic, version and
 * keywords. The agent's writers and the CLI's readers both spell a word
 * through these names, so the two cannot drift apart.
 *
 * Plain #defines of string literals (and numbers): no declarations, no
 * includes, nothing to link, so agent code may include it (no libc
 * allocation, usable in a malloc hook and a signal handler). A literal
 * pastes into another ("pid" " ") and FMT_LEN() is its length without
 * the NUL, for strncmp() and prefix tests.
 *
 * The formats themselves (line by line) are described in heapdump.h,
 * leakfile.h and analyze/timeline.h.
 */
#ifndef HEAPTRAIL_FORMAT_VOCAB_H
#define HEAPTRAIL_FORMAT_VOCAB_H

#define FMT_LEN(lit) (sizeof(lit) - 1)
#define FMT_STR_(x) #x
#define FMT_STR(x) FMT_STR_(x)  /* a number macro as a literal: "1" */

/* ---- file names ----
 *   PREFIX.PID.SEQ.KIND.heap    a heap dump (SEQ: 4 digits; KIND: the
 *                               trigger: interval, every, signal, api,
 *                               final ...)
 *   PREFIX.PID.peak.heap        the dump of the peak (rewritten in place)
 *   PREFIX.PID.live.heap        a dump the live endpoint asked for (same)
 *   heaptrail.PID.leaks         the leak file written at exit
 *   heaptrail.PID.check-N.leaks the leak file of the Nth leak check
 *   heaptrail.PID.timeline      the timeline
 * Files being written have a temporary name starting with
 * FMT_TMP_PREFIX and are renamed when whole. */
#define FMT_FILE_PREFIX      "heaptrail"   /* PREFIX unless given; every name starts with it */
#define FMT_TMP_PREFIX       ".heaptrail-tmp-"
#define FMT_HEAP_SUFFIX      ".heap"
#define FMT_HEAP_PEAK        "peak"
#define FMT_HEAP_LIVE        "live"  /* asked for by the live endpoint: no SEQ */
#define FMT_LEAKS_SUFFIX     ".leaks"
#define FMT_LEAKS_CHECK      "check-"
#define FMT_TIMELINE_SUFFIX  ".timeline"

/* ---- heap dump (gperftools' and jemalloc's text layouts) ---- */
#define FMT_HEAP_HEADER      "heap profile:"     /* gperftools' first line */
#define FMT_HEAP_V2          "heap_v2"           /* "@ heap_v2/S"; jemalloc's "heap_v2/S" line */
#define FMT_HEAP_PROFILE     "heapprofile"       /* gperftools' HEAPPROFILE: every allocation */
#define FMT_HEAP_MAPS        "MAPPED_LIBRARIES:" /* the maps section follows */
#define FMT_HEAP_MAPS_OLD    "--- Memory map:"   /* old gperftools' spelling */
/* heaptrail's comment lines (jeprof and pprof skip them) */
#define FMT_HEAP_DUMP_LINE   "# heaptrail-dump"  /* ms=M unix_ms=U pid=P agent_bytes=N rss_anon=R [heap_in_use=H] end=1 [run=ID] */
#define FMT_HEAP_MS          "ms="
#define FMT_HEAP_UNIX_MS     "unix_ms="
#define FMT_HEAP_PID         "pid="
#define FMT_HEAP_RUN         "run="
#define FMT_HEAP_AGENT_BYTES "agent_bytes="  /* the agent's own mappings */
#define FMT_HEAP_RSS         "rss_anon="     /* the process's private resident memory */
#define FMT_HEAP_ALLOC_IN_USE "heap_in_use=" /* the allocator's own count of its bytes in use */
#define FMT_HEAP_ENDS        "end=1"         /* the dump ends with FMT_HEAP_END_LINE */
#define FMT_HEAP_END_LINE    "# heaptrail-end"   /* the last line: the dump is whole */
#define FMT_HEAP_EXE         "# heaptrail-exe"   /* REAL STARTED ('%XX'-escaped): the executable's
						  * file and the path it was started by (a symlink's) */
/* exact mode only: how the allocations went, in every thread since the
 * start (or attach): "temporary=T sizes=N0,N1,...,N31" — T allocations
 * freed by the thread that made them before it allocated anything else
 * (heaptrack's temporaries, per thread); Nk allocations of a size in
 * [2^k, 2^(k+1)) bytes (0 and 1 in N0, the last open-ended) */
#define FMT_HEAP_SHAPE       "# heaptrail-shape"
#define FMT_SHAPE_TEMPORARY  "temporary="
#define FMT_SHAPE_SIZES      "sizes="
#define FMT_SHAPE_BUCKETS    32
#define FMT_HEAP_BUILD_ID    "# build-id"        /* HEX PATH, in the maps section */
#define FMT_HEAP_POOL        "# heaptrail-pool"  /* INDEX NAME, in the maps section: sample
						    line INDEX (from 0) is a memory pool's */

/* ---- leak file (leakfile.h) ---- */
#define FMT_LEAKS_MAGIC      "heaptrail-leaks"
#define FMT_LEAKS_VERSION    1
#define FMT_LEAKS_PID        "pid"
#define FMT_LEAKS_PPID       "ppid"
#define FMT_LEAKS_RUN        "run"
#define FMT_LEAKS_EXE        "exe"
#define FMT_LEAKS_ARG        "arg"
#define FMT_LEAKS_EXIT       "exit"              /* status N | signal N | unknown */
#define FMT_LEAKS_STATUS     "status"
#define FMT_LEAKS_SIGNAL     "signal"
#define FMT_LEAKS_UNKNOWN    "unknown"
#define FMT_LEAKS_TOTALS     "totals"
#define FMT_LEAKS_DROPPED    "dropped"
#define FMT_LEAKS_FREERES    "freeres"
#define FMT_LEAKS_BYPASSED   "allocator_bypassed"
#define FMT_LEAKS_SAMPLE     "sample"
#define FMT_LEAKS_SHAPE      "shape"             /* as FMT_HEAP_SHAPE's line, exact mode only */
#define FMT_LEAKS_MODULE     "module"
#define FMT_LEAKS_LOADED     "loaded"
#define FMT_LEAKS_UNLOADED   "unloaded"
#define FMT_LEAKS_CLASSIFIED "classified"
#define FMT_LEAKS_SUMMARY    "summary"
#define FMT_LEAKS_SCAN_US    "scan_us"
#define FMT_LEAKS_CHECK_LINE "check"             /* N all|increased */
#define FMT_LEAKS_ALL        "all"
#define FMT_LEAKS_INCREASED  "increased"
#define FMT_LEAKS_UNSTOPPED  "unstopped_threads"
#define FMT_LEAKS_STACK      "stack"
#define FMT_LEAKS_RECORD     "record"
#define FMT_LEAKS_POOL       "pool"              /* ID PARENT alive|gone BYTES BLOCKS NAME */
#define FMT_LEAKS_ALIVE      "alive"
#define FMT_LEAKS_GONE       "gone"
#define FMT_LEAKS_IN_POOL    "in_pool"           /* STACKID POOLID */
#define FMT_LEAKS_END        "end"
#define FMT_LEAKS_ERROR      "error"             /* KIND COUNT SIZE ALLOC_STACK FREE_STACK */
#define FMT_LEAKS_MISMATCHED "mismatched"        /* a block given back by the wrong family */
#define FMT_LEAKS_SIZE_MISMATCH "size_mismatch"  /* ... GIVEN: a sized delete whose size
						    (GIVEN) is not the block's */
#define FMT_LEAKS_ALIGN_MISMATCH "align_mismatch" /* ... ALLOC_ALIGN GIVEN: a delete whose
						    alignment (GIVEN; 0: none) is not the
						    aligned new's (ALLOC_ALIGN; 0: none) */
#define FMT_LEAKS_INVALID    "invalid"           /* ... OFFSET WHERE: an address none of the
						    allocator's given back */
#define FMT_LEAKS_IN_BLOCK   "block"             /* inside a live block, OFFSET past its start */
#define FMT_LEAKS_IN_DATA    "data"              /* in a loaded object's image (its globals) */
#define FMT_LEAKS_IN_STACK   "stack"             /* on the main thread's stack */
#define FMT_LEAKS_IN_FREED   "freed"             /* ... PREV_STACK: a block given back
						    before (a double free) */
#define FMT_LEAKS_OVERFLOW   "overflow"          /* ... OFFSET ACCESS ACCESS_STACK: a guarded
						    block's page ran past (--guard);
						    ACCESS_STACK 0: its slack found
						    written, at its free or a report */
#define FMT_LEAKS_USE_AFTER_FREE "use_after_free" /* ... OFFSET ACCESS ACCESS_STACK: a
						    guarded block used after its free */
#define FMT_LEAKS_READ       "read"              /* ACCESS: the faulting access read */
#define FMT_LEAKS_WRITE      "write"             /* ... or wrote */
#define FMT_LEAKS_GUARDED    "guarded"           /* N FULL: blocks placed on guarded pages,
						    and those picked while no slot was free */
#define FMT_LEAKS_ERRORS_DROPPED "errors_dropped" /* errors beyond the contexts kept */
#define FMT_LEAKS_ERRORS_CHECKED "errors_checked"  /* the agent looked for heap errors */
#define FMT_YES              "yes"
#define FMT_NO               "no"

/* ---- timeline ---- */
#define FMT_TIMELINE_MAGIC   "# heaptrail timeline"
#define FMT_TIMELINE_VERSION 1
/* the first line: magic, version, the columns, then "; sample=S [run=ID]";
 * with sample=auto, a line "# sample=S" before the first row at a new S */
#define FMT_TIMELINE_HEADER  FMT_TIMELINE_MAGIC " " FMT_STR(FMT_TIMELINE_VERSION)
#define FMT_TIMELINE_COLUMNS "ms live_bytes live_blocks allocated_bytes rss_bytes"
#define FMT_TIMELINE_SAMPLE  "sample="
#define FMT_TIMELINE_RUN     "run="

#endif
