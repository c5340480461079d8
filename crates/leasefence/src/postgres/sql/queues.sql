-- queues: every queue — those with jobs and those paused — with whether it is paused and its
-- jobs' counts by status at now. One statement (a read). $1 now.
-- One row per (queue, status) with a count; a queue with no job has one row with a NULL
-- status. The status CASE is the same as in stats.sql, list.sql and inspect.sql (a test
-- checks that they agree).
SELECT n.name, coalesce(p.paused, false) AS paused, c.status, coalesce(c.count, 0)
  FROM (SELECT queue AS name FROM jobs UNION SELECT name FROM queues) AS n
  LEFT JOIN queues AS p ON p.name = n.name
  LEFT JOIN (SELECT queue, status, count(*) AS count
               FROM (SELECT queue, CASE
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
              GROUP BY queue, status) AS c ON c.queue = n.name
 ORDER BY n.name, c.status
