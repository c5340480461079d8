-- overview: the ready job enqueued first (its id and enqueued_at), or no row. Inside the
-- overview's read transaction. $1 now.
-- Ready as in list.sql's CASE: not leased (until <= now), attempts left, no owner, no error,
-- due. Walks the unowned, never-failed unfinished jobs by enqueue time (jobs_open) and stops
-- at the first ready one: only the scheduled jobs older than it are passed over. A job
-- enqueued before enqueue times were kept (NULL) comes first, as on SQLite; PostgreSQL sorts
-- NULL last, so it is looked up on its own (`IS NULL`, a range of jobs_open too) and put
-- ahead. NOT MATERIALIZED: each branch reads the index with the conditions, never all of
-- the ready jobs.
WITH ready AS NOT MATERIALIZED (
    SELECT id, enqueued_at
      FROM jobs
     WHERE done = 0
       AND until <= $1::float8
       AND NOT (max_attempts > 0 AND attempts >= max_attempts)
       AND owner IS NULL AND error IS NULL AND not_before <= $1::float8
)
SELECT id, enqueued_at
  FROM ((SELECT 0 AS k, id, enqueued_at FROM ready WHERE enqueued_at IS NULL LIMIT 1)
        UNION ALL
        (SELECT 1, id, enqueued_at FROM ready ORDER BY enqueued_at LIMIT 1)) AS first
 ORDER BY k
 LIMIT 1
