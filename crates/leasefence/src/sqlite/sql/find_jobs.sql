-- find_jobs: a page of jobs, newest first, that match every filter given, among the ?8 jobs
-- enqueued just before the cursor. Inside find_jobs' read transaction (one snapshot with
-- find_jobs_window.sql, which says where that window ends).
-- ?1 now, ?2 status name, ?3 queue, ?4 kind, ?5 owner (each NULL for any), ?6 the rowid to
-- page before (NULL: from the newest), ?7 the page's size, ?8 the window's.
-- Walks at most ?8 rows of the rowid (enqueue order): sparse filters give a short page, and
-- the caller goes on from the window's end. The status CASE is list.sql's (a test checks that
-- they agree). Columns as list.sql's, then the rowid.
SELECT id, owner, until, fence, result, done, payload, priority, not_before, max_attempts,
       error, finished_at, status, attempts, outcome, enqueued_at, queue, kind, unique_key, seq
  FROM (SELECT *,
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
          FROM (SELECT rowid AS seq, * FROM jobs
                 WHERE rowid < coalesce(?6, 9223372036854775807)
                 ORDER BY rowid DESC
                 LIMIT ?8))
 WHERE (?2 IS NULL OR status = ?2)
   AND (?3 IS NULL OR queue = ?3)
   AND (?4 IS NULL OR kind = ?4)
   AND (?5 IS NULL OR owner = ?5)
 ORDER BY seq DESC
 LIMIT ?7
