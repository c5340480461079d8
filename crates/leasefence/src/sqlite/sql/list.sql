-- list: jobs with their status at now, oldest first. Autocommit (a read).
-- ?1 now, ?2 status name or NULL for all, ?3 limit, ?4 the id to page after or NULL: a
-- keyset cursor, the jobs enqueued after it (an unknown id pages from the start: the caller
-- checks that it exists).
-- The status CASE is the same as in stats.sql and inspect.sql (a test checks that they
-- agree on every status); its names are parsed into the Status enum of types/job.rs.
SELECT id, owner, until, fence, result, done, payload, priority, not_before, max_attempts,
       error, finished_at, status, attempts, outcome, enqueued_at, queue, kind, unique_key
  FROM (SELECT rowid AS seq, *,
       CASE
           WHEN done <> 0 AND outcome = 'dead' THEN 'dead'
           WHEN done <> 0 AND outcome = 'cancelled' THEN 'cancelled'
           WHEN done <> 0 THEN 'done'
           WHEN until > ?1 THEN 'leased'
           WHEN max_attempts > 0 AND attempts >= max_attempts THEN 'dead'
           WHEN owner IS NOT NULL THEN 'expired'
           WHEN error IS NOT NULL THEN 'retrying'
           WHEN not_before > ?1 THEN 'scheduled'
           ELSE 'ready'
       END AS status
          FROM jobs)
 WHERE (?2 IS NULL OR status = ?2)
   AND seq > coalesce((SELECT rowid FROM jobs WHERE id = ?4), 0)
 ORDER BY seq
 LIMIT ?3
