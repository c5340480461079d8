# Sourced by the pg-*.sh probes (with `here` set to this folder): the server (PGHOST, PGUSER,
# PGDATABASE; default 127.0.0.1, postgres, test), `lib` (the library's PostgreSQL folder), a
# scratch folder `work` removed on exit, and `setup JOBS SQL` drops and recreates the schema `probe` from
# the library's own migrations ($lib), with JOBS jobs `job-1` … and a floor table of as many
# integer-keyed rows, runs SQL (a variant's change), then analyzes and checkpoints; and
# `run_variants JOBS UNIT`, which times each of the caller's `variants` ("name|SQL|script")
# with its `bench SCRIPT` on a fresh `setup JOBS SQL`, ROUNDS times over, a line each.
export PGHOST=${PGHOST:-127.0.0.1} PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-test}
lib=$here/../../leasefence/src/postgres
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
psql_q() { psql -q -v ON_ERROR_STOP=1 "$@"; }
setup() {
  psql_q -c "DROP SCHEMA IF EXISTS probe CASCADE" -c "CREATE SCHEMA probe" 2>/dev/null
  (echo "SET search_path = probe;"; cat "$lib"/migrations/*.sql) | psql_q >/dev/null
  psql_q -c "SET search_path = probe;
    INSERT INTO jobs (id) SELECT 'job-' || g FROM generate_series(1, $1) g;
    CREATE TABLE floor (id INTEGER PRIMARY KEY, owner TEXT, until DOUBLE PRECISION NOT NULL
      DEFAULT 0, fence BIGINT NOT NULL DEFAULT 0, result TEXT, done INTEGER NOT NULL DEFAULT 0);
    CREATE INDEX floor_ready ON floor (id) WHERE done = 0;
    INSERT INTO floor (id) SELECT g FROM generate_series(1, $1) g;
    $2 ANALYZE; CHECKPOINT;"
}
run_variants() {
  local round v name sql file
  for round in $(seq "$ROUNDS"); do
    for v in "${variants[@]}"; do
      IFS='|' read -r name sql file <<<"$v"
      setup "$1" "$sql"
      echo "round $round  $name  $(bench "$file") $2"
    done
  done
}
