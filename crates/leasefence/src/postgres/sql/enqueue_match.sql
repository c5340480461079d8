-- enqueue_match: why enqueue.sql inserted nothing — the job with the same id, else the job
-- holding the same unique key in the queue (the unfinished one first, else the latest).
-- Inside enqueue_jobs' transaction, right after enqueue.sql; a new snapshot under READ
-- COMMITTED, so it sees the committed row the insert met (if that row was deleted meanwhile,
-- none: the caller inserts again).
-- $1 id, $2 queue, $3 unique key (NULL: none). Returns the id and whether it is the same id.
SELECT id, id = $1 AS known
  FROM jobs
 WHERE id = $1 OR (queue = $2 AND unique_key = $3)
 ORDER BY id = $1 DESC, done, seq DESC
 LIMIT 1
