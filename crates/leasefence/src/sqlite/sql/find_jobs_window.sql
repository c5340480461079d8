-- find_jobs: where find_jobs.sql's window ends — the smallest rowid among the ?2 jobs
-- enqueued just before ?1 (NULL: from the newest) — and how many it holds. Inside find_jobs'
-- read transaction. Reads only the rowids.
SELECT min(rowid), count(*)
  FROM (SELECT rowid FROM jobs WHERE rowid < coalesce(?1, 9223372036854775807) ORDER BY rowid DESC LIMIT ?2)
