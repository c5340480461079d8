-- find_jobs, oldest first: where find_jobs_oldest.sql's window ends — the largest rowid
-- among the ?2 jobs enqueued just after ?1 (NULL: from the oldest) — and how many it holds.
-- Inside find_jobs' read transaction. Reads only the rowids.
SELECT max(rowid), count(*)
  FROM (SELECT rowid FROM jobs WHERE rowid > coalesce(?1, -9223372036854775808) ORDER BY rowid LIMIT ?2)
