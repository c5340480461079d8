-- find_jobs, oldest first: find_jobs.sql's page among the $8 jobs enqueued just after the
-- cursor. Inside find_jobs' read transaction (with find_jobs_window_oldest.sql).
-- $1 now, $2 status name, $3 queue, $4 kind, $5 owner (each NULL for any), $6 the seq to
-- page after (NULL: from the oldest), $7 the page's size, $8 the window's. The status CASE
-- is list.sql's. Columns as list.sql's, then the seq.
SELECT id, owner, until, fence, result, done, payload, priority, not_before, max_attempts,
       error, finished_at, status, attempts, outcome, enqueued_at, queue, kind, unique_key, seq
  FROM (SELECT *,
       CASE
           WHEN done <> 0 AND outcome = 'dead' THEN 'dead'
           WHEN done <> 0 AND outcome = 'cancelled' THEN 'cancelled'
           WHEN done <> 0 THEN 'done'
           WHEN until > $1::float8 THEN 'leased'
           WHEN max_attempts > 0 AND attempts >= max_attempts THEN 'dead'
           WHEN owner IS NOT NULL THEN 'expired'
           WHEN error IS NOT NULL THEN 'retrying'
           WHEN not_before > $1::float8 THEN 'scheduled'
           ELSE 'ready'
       END AS status
          FROM (SELECT * FROM jobs
                 WHERE seq > coalesce($6::bigint, -9223372036854775808)
                 ORDER BY seq
                 LIMIT $8::bigint) AS w) AS j
 WHERE ($2::text IS NULL OR status = $2::text)
   AND ($3::text IS NULL OR queue = $3::text)
   AND ($4::text IS NULL OR kind = $4::text)
   AND ($5::text IS NULL OR owner = $5::text)
 ORDER BY seq
 LIMIT $7::bigint
