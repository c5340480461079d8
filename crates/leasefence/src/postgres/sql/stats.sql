-- stats: counts of jobs by status at now. One statement (a read).
-- $1 now. The status CASE is the same as in list.sql and inspect.sql (a test checks that they
-- agree).
SELECT status, count(*)
  FROM (SELECT CASE
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
          FROM jobs) AS j
 GROUP BY status
