-- inspect: one job with every field and its status at now. One statement (a read).
-- $1 now, $2 id. The status CASE is the same as in list.sql and stats.sql (a test checks
-- that they agree on every status).
SELECT id, owner, until, fence, result, done, payload, priority, not_before, max_attempts,
       error, finished_at, status, attempts, outcome, enqueued_at, queue, kind, unique_key
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
          FROM jobs
         WHERE id = $2::text) AS j
