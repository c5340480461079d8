#!/usr/bin/env bash
# What a PostgreSQL single claim_next -> complete cycle costs beyond the floor's two UPDATEs
# (issue 18, deliverable 5). pgbench, one connection (or CLIENTS), 3,000 cycles on 20,000 jobs,
# in a fresh schema `probe` made from the library's own migrations, for each variant:
#   as-is         the library's schema and statements (claim_next.sql, complete.sql)
#   no-ledger     the attempts ledger trigger disabled
#   no-counts     the job-counts trigger disabled
#   no-triggers   both disabled
#   no-dash-idx   the six dashboard indexes dropped
#   as-ctes       no triggers; the same ledger and count writes made by the statements (CTEs)
#   floor         the bench's floor: two single-row UPDATEs on an integer-keyed table
# plus the WAL written per cycle, as-is and floor. Prints cycles/s per variant and round.
# Usage: pg-single.sh [ROUNDS] [CLIENTS]; PGURL-style settings via PGHOST/PGUSER/PGDATABASE
# (default 127.0.0.1, postgres, test). Drops and recreates the schema `probe`.
set -euo pipefail
ROUNDS=${1:-3}
CLIENTS=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=schema.sh
. "$here/schema.sh"

python3 -B - "$lib" "$work" "$here" <<'PY'
import sys; sys.path.insert(0, sys.argv[3])
from statements import stmt, work
claim = (stmt("claim_next").replace("$1", "'w'").replace("$2", "1e12").replace("$3", "1000")
         .replace("RETURNING jobs.id,", "RETURNING substr(jobs.id, 5)::int AS n,"))
complete = (stmt("complete").replace("$1", "('job-' || :n)").replace("$2", "'w'")
            .replace("$3", ":fence").replace("$4", "1000").replace("$5", "'ok'"))
open(f"{work}/cycle.sql", "w").write(f"{claim}\n\\gset\n{complete};\n")
# The same, with the ledger's and the counts' writes made by the statements themselves.
i = claim.index(" UPDATE jobs SET owner")
update = claim[i:claim.index("RETURNING")] + "RETURNING jobs.id, jobs.fence, jobs.owner"
claim_cte = (claim[:i] + ", claimed AS (" + update + "), lost AS (UPDATE attempts SET outcome = "
    "'lost', ended_at = extract(epoch FROM clock_timestamp()) WHERE job_id IN (SELECT id FROM "
    "claimed) AND outcome IS NULL), led AS (INSERT INTO attempts (job_id, fence, owner, "
    "claimed_at) SELECT id, fence, owner, extract(epoch FROM clock_timestamp()) FROM claimed) "
    "SELECT substr(id, 5)::int AS n, fence FROM claimed")
c = complete.replace("RETURNING id)", "RETURNING id, queue)", 1)
k = c.index(", refused AS")
complete_cte = (c[:k] + ", ended AS (UPDATE attempts SET ended_at = extract(epoch FROM "
    "clock_timestamp()), outcome = 'completed' WHERE job_id IN (SELECT id FROM stored) AND "
    "fence = :fence AND outcome IS NULL), counted AS (INSERT INTO job_counts AS c (queue, "
    "class, shard, n) SELECT queue, v.class, (txid_current() % 64)::int, v.n FROM stored, "
    "(VALUES ('done', 1), ('unfinished', -1)) AS v (class, n) ORDER BY 1, 2 ON CONFLICT "
    "(queue, class, shard) DO UPDATE SET n = c.n + EXCLUDED.n)" + c[k:])
open(f"{work}/cycle_cte.sql", "w").write(f"{claim_cte}\n\\gset\n{complete_cte};\n")
open(f"{work}/floor.sql", "w").write(
    "UPDATE floor SET owner = 'w', until = 1e12, fence = fence + 1 WHERE id = (SELECT id FROM "
    "floor WHERE done = 0 AND until <= 1000 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) "
    "RETURNING id AS n, fence\n\\gset\nUPDATE floor SET done = 1 WHERE id = :n AND owner = 'w' "
    "AND fence = :fence AND until > 1000;\n")
PY

bench() {
  PGOPTIONS='-c search_path=probe' pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" \
    -f "$work/$1" -t $((3000 / CLIENTS)) 2>&1 | awk '/^tps/ {printf "%.0f\n", $3}'
}
no_triggers="ALTER TABLE jobs DISABLE TRIGGER attempts_ledger; ALTER TABLE jobs DISABLE TRIGGER job_counts_update;"
variants=(
  "as-is||cycle.sql"
  "no-ledger|ALTER TABLE jobs DISABLE TRIGGER attempts_ledger;|cycle.sql"
  "no-counts|ALTER TABLE jobs DISABLE TRIGGER job_counts_update;|cycle.sql"
  "no-triggers|$no_triggers|cycle.sql"
  "no-dash-idx|DROP INDEX jobs_held, jobs_retrying, jobs_delayed, jobs_open, jobs_seq, jobs_id_bytes;|cycle.sql"
  "as-ctes|$no_triggers|cycle_cte.sql"
  "floor||floor.sql"
)
run_variants 20000 cycles/s
for file in cycle.sql floor.sql; do
  setup 20000 ""
  before=$(psql -tA -c "SELECT pg_current_wal_lsn()")
  bench "$file" >/dev/null
  echo "WAL per cycle, ${file%.sql}: $(psql -tA -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$before') / 3000.0)") bytes"
done
