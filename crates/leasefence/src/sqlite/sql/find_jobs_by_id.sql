-- find_jobs with an id prefix: a page of the jobs whose id starts with the prefix, in id
-- order, after the cursor, among at most ?10 of them, that match every other filter given.
-- Autocommit (a read). ?1 now, ?2 status name, ?3 queue, ?4 kind, ?5 owner (each NULL for
-- any), ?6 the prefix, ?7 the first id past every id that starts with it (NULL: none), ?8 the
-- id to page after (NULL: from the start), ?9 the page's size, ?10 the window's.
-- A range of the primary key (ids compare as bytes). The status CASE is list.sql's. Columns
-- as list.sql's, then the rowid.
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
                 WHERE id >= ?6 AND (?7 IS NULL OR id < ?7) AND (?8 IS NULL OR id > ?8)
                 ORDER BY id
                 LIMIT ?10))
 WHERE (?2 IS NULL OR status = ?2)
   AND (?3 IS NULL OR queue = ?3)
   AND (?4 IS NULL OR kind = ?4)
   AND (?5 IS NULL OR owner = ?5)
 ORDER BY id
 LIMIT ?9
