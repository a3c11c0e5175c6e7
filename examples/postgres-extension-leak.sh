#!/bin/sh
# A C extension that leaks into TopMemoryContext (examples/pg_leaky: each
# call of remember_name() keeps a copy of its argument in a list that lives
# as long as the backend), found by `heaptrail growth` naming the function
# and the memory context, with PostgreSQL 15 from Debian run under heaptrail
# with its memory context API named (examples/postgres.options).
# docs/postgresql.md walks through it.
#   examples/postgres-extension-leak.sh [BUILD_DIR] [WORK_DIR]     (as root)
set -e
B=$(cd "${1:-build}" && pwd)
W=${2:-/tmp/ht-pg-ext}
HERE=$(cd "$(dirname "$0")" && pwd)
PG=/usr/lib/postgresql/15/bin
[ -x $PG/postgres ] && [ -x $PG/pg_config ] || {
	echo "needs postgresql-15 and postgresql-server-dev-15 (apt-get install them)" >&2; exit 2; }
make -s -C "$HERE/pg_leaky" install >/dev/null
rm -rf "$W" && mkdir -p "$W/data" && cp "$HERE/postgres.options" "$W/" && chown -R postgres "$W"
as_pg() { runuser -u postgres -- "$@"; }
as_pg $PG/initdb -D "$W/data" -A trust >/dev/null

as_pg "$B/heaptrail" run -q -o "$W/out" --sample 16k --every 1s \
  --options-file "$W/postgres.options" \
  -- $PG/postgres -D "$W/data" -p 5498 -k "$W" 2>"$W/server.log" &
sleep 5
as_pg $PG/psql -q -h "$W" -p 5498 -d postgres -c "CREATE EXTENSION pg_leaky"

# one session: 20,000 names remembered in 40 batches, 0.25 s apart
awk 'BEGIN { print "SELECT pg_backend_pid();"; for (b = 0; b < 40; b++) {
  printf "SELECT count(remember_name(repeat(%c-%c, 200) || g)) FROM generate_series(1, 500) g;\n", 39, 39
  print "SELECT pg_sleep(0.25);" } }' > "$W/leak.sql"
as_pg $PG/psql -At -h "$W" -p 5498 -d postgres -f "$W/leak.sql" > "$W/session.out"
pid=$(head -1 "$W/session.out")
sleep 1.5   # the backend's last dump, then its exit report
# palloc & co. are the allocator: --hide makes the site their caller
hide='^(palloc.*|repalloc|MemoryContextAlloc.*|text_to_cstring|lappend|new_list|enlarge_list)$'
"$B/heaptrail" growth --pool TopMemoryContext --hide "$hide" "$W"/out/heaptrail.$pid.*.heap
last=$(ls "$W"/out/heaptrail.$pid.*.heap | tail -1)
"$B/heaptrail" flame --reverse --inverted --pool TopMemoryContext -o "$W/top.svg" "$last"
kill -INT "$(head -1 "$W/data/postmaster.pid")"
wait
echo "flame graph: $W/top.svg; reports of every backend: $W/out"
