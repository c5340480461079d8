-- overview: the ready job enqueued first (its id and enqueued_at), or no row. Inside the
-- overview's read transaction. ?1 now.
-- Ready as in list.sql's CASE: not leased (until <= now), attempts left, no owner, no error,
-- due. Walks the unowned, never-failed unfinished jobs by enqueue time (jobs_open; a job
-- enqueued before enqueue times were kept, NULL, comes first) and stops at the first ready
-- one: only the scheduled jobs older than it are passed over.
SELECT id, enqueued_at
  FROM jobs INDEXED BY jobs_open
 WHERE done = 0
   AND until <= ?1
   AND NOT (max_attempts > 0 AND attempts >= max_attempts)
   AND owner IS NULL AND error IS NULL AND not_before <= ?1
 ORDER BY enqueued_at
 LIMIT 1
