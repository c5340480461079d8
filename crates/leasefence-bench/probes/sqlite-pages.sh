#!/usr/bin/env bash
# What a single SQLite claim_next -> complete cycle writes to the WAL, by page size (issue 18;
# docs/benchmarks.md, "Smaller pages"). For each page size: a fresh file made with that
# `page_size` and WAL before `leasefence init` (the size holds from the first write on), 3,000
# jobs, then N cycles of the library's own statements (bury.sql + claim_next.sql, then
# complete.sql, each in its BEGIN IMMEDIATE) through the `sqlite3` shell with autocheckpoint
# off, the WAL's frame count read from `PRAGMA wal_checkpoint`. Prints frames and KB of WAL per
# cycle and the shell's cycles/s (which includes parsing each statement: compare sizes with one
# another, not with the bench).
# Usage: sqlite-pages.sh [N] [SIZES…]; LEASEFENCE=path to the CLI (default: target/release),
# SYNC=NORMAL|FULL (default NORMAL).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../../..
LF=${LEASEFENCE:-$root/target/release/leasefence}
SQL=$root/crates/leasefence/src/sqlite/sql
N=${1:-1000}; shift || true
SIZES=${*:-1024 2048 4096}
SYNC=${SYNC:-NORMAL}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
strip() { grep -v '^--' "$1" | tr '\n' ' '; }
bury=$(strip "$SQL/bury.sql"); claim=$(strip "$SQL/claim_next.sql"); complete=$(strip "$SQL/complete.sql")
seq -f "job-%06g" 1 3000 > "$work/ids.txt"
for ps in $SIZES; do
  db=$work/p$ps.db
  sqlite3 "$db" "PRAGMA page_size=$ps; PRAGMA journal_mode=WAL;" >/dev/null
  "$LF" --db "$db" init >/dev/null
  "$LF" --db "$db" enqueue --ids-from "$work/ids.txt" >/dev/null
  {
    echo "PRAGMA synchronous=$SYNC; PRAGMA wal_autocheckpoint=0; PRAGMA wal_checkpoint(TRUNCATE);"
    echo ".output /dev/null"
    for i in $(seq 1 "$N"); do
      id=$(printf 'job-%06d' "$i")
      echo "BEGIN IMMEDIATE; ${bury//\?1/100}; $(echo "$claim" | sed "s/?1/'w'/g; s/?2/1e12/g; s/?3/100/g"); COMMIT;"
      echo "BEGIN IMMEDIATE; $(echo "$complete" | sed "s/?1/'$id'/g; s/?2/'w'/g; s/?3/1/g; s/?4/100/g; s/?5/'ok'/g"); COMMIT;"
    done
    echo ".output stdout"
    echo "PRAGMA wal_checkpoint;"
  } > "$work/run.sql"
  start=$(date +%s.%N)
  frames=$(sqlite3 "$db" < "$work/run.sql" | tail -n 1 | cut -d'|' -f2)
  end=$(date +%s.%N)
  completed=$(sqlite3 "$db" "SELECT count(*) FROM jobs WHERE outcome = 'completed'")
  [ "$completed" = "$N" ] || { echo "page $ps: $completed of $N cycles completed" >&2; exit 1; }
  awk -v ps="$ps" -v f="$frames" -v n="$N" -v t="$(echo "$end - $start" | bc -l)" 'BEGIN {
    printf "page %5d: %.2f frames/cycle, %.1f KB WAL/cycle, %.0f cycles/s (shell)\n", ps, f / n, f * ps / n / 1024, n / t }'
done
