-- enqueue_match: why enqueue.sql inserted nothing — the job with the same id, else the job
-- holding the same unique key in the queue (the unfinished one first, else the latest).
-- Inside enqueue_jobs' BEGIN IMMEDIATE, right after enqueue.sql: the row it met is there.
-- ?1 id, ?2 queue, ?3 unique key (NULL: none). Returns the id and whether it is the same id.
SELECT id, id = ?1 AS known
  FROM jobs
 WHERE id = ?1 OR (queue = ?2 AND unique_key = ?3)
 ORDER BY id = ?1 DESC, done, rowid DESC
 LIMIT 1
