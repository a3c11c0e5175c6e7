#!/bin/sh
# PostgreSQL 15 from Debian under heaptrail, its memory contexts named by
# their functions (no rebuild, no debug symbols: the exported MemoryContext
# API), pgbench against it, then a session that keeps preparing statements
# (each plan is kept in a CachedPlanSource context until the session ends)
# found by `heaptrail growth`. docs/postgresql.md walks through it.
#   examples/postgres-contexts.sh [BUILD_DIR] [WORK_DIR]     (as root)
set -e
B=$(cd "${1:-build}" && pwd)
W=${2:-/tmp/ht-postgres}
PG=/usr/lib/postgresql/15/bin
[ -x $PG/postgres ] || { echo "needs postgresql-15 (apt-get install postgresql-15)" >&2; exit 2; }
rm -rf "$W" && mkdir -p "$W/data" && cp "$(dirname "$0")/postgres.options" "$W/" &&
	chown -R postgres "$W"
as_pg() { runuser -u postgres -- "$@"; }
as_pg $PG/initdb -D "$W/data" -A trust >/dev/null

as_pg "$B/heaptrail" run -q -o "$W/out" --sample 16k --every 1s \
  --options-file "$W/postgres.options" \
  -- $PG/postgres -D "$W/data" -p 5499 -k "$W" 2>"$W/server.log" &
sleep 5

as_pg $PG/pgbench -i -s 2 -h "$W" -p 5499 postgres >/dev/null 2>&1
as_pg $PG/pgbench -c 4 -j 2 -T 10 -h "$W" -p 5499 postgres | grep -E "processed|failed|tps"

# the leak: one session, 20,000 PREPAREs in 40 batches, 0.25 s apart: at
# least 10 s of it, whatever the machine's speed (the sleeps), so dumps
# every 1 s give growth the 5 a sampled verdict needs with room to spare
# (a backend is dumped when it allocates after its time has come)
awk 'BEGIN { for (b = 0; b < 40; b++) { for (i = 0; i < 500; i++) { k = b * 500 + i;
  printf "PREPARE p%d AS SELECT abalance + %d FROM pgbench_accounts WHERE aid = $1;\n", k, k }
  print "SELECT pg_sleep(0.25);" } }' > "$W/leak.sql"
as_pg $PG/psql -q -h "$W" -p 5499 -d postgres -f "$W/leak.sql" >/dev/null
pid=$(ls -t "$W"/out/heaptrail.*.every.heap | head -1 | sed 's/.*heaptrail\.\([0-9]*\)\..*/\1/')
"$B/heaptrail" growth --pool CachedPlanSource "$W"/out/heaptrail.$pid.*.heap 2>/dev/null
last=$(ls "$W"/out/heaptrail.$pid.*.heap | tail -1)
"$B/heaptrail" collapsed --pool CachedPlanSource "$last" 2>/dev/null | sort -k2 -n -r | head -3
"$B/heaptrail" flame --reverse --inverted --pool CachedPlanSource -o "$W/plans.svg" "$last" 2>/dev/null
kill -INT "$(head -1 "$W/data/postmaster.pid")"
wait
echo "flame graph: $W/plans.svg; reports of every backend: $W/out"
