-- find_jobs with an id prefix: a page of the jobs whose id starts with the prefix, in id
-- order, after the cursor, among at most $10 of them, that match every other filter given.
-- One statement (a read). $1 now, $2 status name, $3 queue, $4 kind, $5 owner (each NULL for
-- any), $6 the prefix, $7 the first id past every id that starts with it (NULL: none), $8 the
-- id to page after (NULL: from the start), $9 the page's size, $10 the window's.
-- A range of jobs_id_bytes (ids compared as bytes, the "C" collation). The status CASE is list.sql's. Columns
-- as list.sql's, then the seq.
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
                 WHERE id COLLATE "C" >= $6::text AND ($7::text IS NULL OR id COLLATE "C" < $7::text)
                   AND ($8::text IS NULL OR id COLLATE "C" > $8::text)
                 ORDER BY id COLLATE "C"
                 LIMIT $10::bigint) AS w) AS j
 WHERE ($2::text IS NULL OR status = $2::text)
   AND ($3::text IS NULL OR queue = $3::text)
   AND ($4::text IS NULL OR kind = $4::text)
   AND ($5::text IS NULL OR owner = $5::text)
 ORDER BY id COLLATE "C"
 LIMIT $9::bigint
