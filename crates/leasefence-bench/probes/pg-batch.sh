#!/usr/bin/env bash
# What a PostgreSQL batch cycle costs — claim_batch of 64, then complete_batch of those 64 —
# beside the floor's two set-based UPDATEs (issue 18, deliverable 5). pgbench, one connection,
# 300 cycles (19,200 jobs) on 40,000 jobs, in a fresh schema `probe` made from the library's
# own migrations and analyzed while its ledger is empty (as autovacuum's first pass finds a
# fresh store), for each variant:
#   as-is         the library's schema and statements (claim_batch.sql, complete_batch.sql)
#   seqscan-ok    the ledger trigger allowed sequential scans again (before 0008_ledger_plans)
#   no-ledger     the attempts ledger trigger disabled
#   no-counts     the job-counts trigger disabled
#   no-triggers   both disabled
#   floor         64 rows claimed by one UPDATE, completed by another, on an integer-keyed table
# Prints jobs/s per variant and round. Usage: pg-batch.sh [ROUNDS]; PGHOST/PGUSER/PGDATABASE
# (default 127.0.0.1, postgres, test). Drops and recreates the schema `probe`.
set -euo pipefail
ROUNDS=${1:-3}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=schema.sh
. "$here/schema.sh"

python3 -B - "$lib" "$work" "$here" <<'PY'
import sys; sys.path.insert(0, sys.argv[3])
from statements import stmt, work
claim = (stmt("claim_batch").replace("$1", "'w'").replace("$2", "1e12").replace("$3", "1000")
         .replace("$4", "64"))
i, j = claim.index(" UPDATE jobs SET owner"), claim.index("RETURNING")
claim = (claim[:i] + ", claimed AS (" + claim[i:j] + "RETURNING jobs.id, jobs.fence) SELECT "
         "array_agg(id) AS ids, array_agg(fence) AS fences, array_agg('w'::text) AS owners, "
         "array_agg('ok'::text) AS results, array_agg(1) AS times FROM claimed")
complete = (stmt("complete_batch").replace("$1", ":ids").replace("$2", ":owners")
            .replace("$3", ":fences").replace("$4", "1000").replace("$5", ":results")
            .replace("$6", ":times"))
open(f"{work}/batch.sql", "w").write(f"{claim}\n\\gset\n{complete};\n")
open(f"{work}/floor.sql", "w").write(
    "WITH c AS (UPDATE floor SET owner = 'w', until = 1e12, fence = fence + 1 WHERE id IN "
    "(SELECT id FROM floor WHERE done = 0 AND until <= 1000 ORDER BY id LIMIT 64 FOR UPDATE "
    "SKIP LOCKED) RETURNING id, fence) SELECT array_agg(id) AS ids, array_agg(fence) AS fences "
    "FROM c\n\\gset\nUPDATE floor f SET done = 1, result = 'ok' FROM unnest(:ids::int[], "
    ":fences::bigint[]) AS c(id, fence) WHERE f.id = c.id AND f.owner = 'w' AND f.fence = "
    "c.fence AND f.until > 1000;\n")
PY

bench() {
  PGOPTIONS='-c search_path=probe' pgbench -n -M prepared -c 1 -j 1 -f "$work/$1" -t 300 2>&1 |
    awk '/^tps/ {printf "%.0f\n", $3 * 64}'
}
no_triggers="ALTER TABLE jobs DISABLE TRIGGER attempts_ledger; ALTER TABLE jobs DISABLE TRIGGER job_counts_update;"
variants=(
  "as-is||batch.sql"
  "seqscan-ok|ALTER FUNCTION leasefence_ledger() RESET enable_seqscan;|batch.sql"
  "no-ledger|ALTER TABLE jobs DISABLE TRIGGER attempts_ledger;|batch.sql"
  "no-counts|ALTER TABLE jobs DISABLE TRIGGER job_counts_update;|batch.sql"
  "no-triggers|$no_triggers|batch.sql"
  "floor||floor.sql"
)
run_variants 40000 jobs/s
