-- queues: every queue — those with jobs and those paused — with whether it is paused and its
-- jobs' counts at now. One statement (a read, one snapshot), after serial.sql in a read-only
-- transaction. $1 now.
-- Read without walking every job: the finished jobs and the unfinished total come from
-- job_counts (kept by triggers); each unfinished status other than ready comes from the
-- partial index that holds only its candidates, read once (the planner picks it: each branch
-- carries its predicate). Rows: (queue, paused, status, count, unfinished), where a status is a Status name, or `unfinished` for the queue's
-- unfinished total; `unfinished` is true for that total and for the statuses it includes.
-- policy::queue_infos folds them, ready being the total less the unfinished statuses (a
-- decision above the seam); a queue with no job has one row with a NULL status.
-- The statuses are those of the CASE in list.sql and inspect.sql, in its order (leased, then
-- dead, expired, retrying, scheduled, ready; a test checks that they agree): a job is leased
-- while until > now, then dead with its attempts spent, then expired while it names an owner.
-- (stats is the sum of the queues' counts, in policy::totals.)
WITH counts AS (
    SELECT queue, class, sum(n)::bigint AS n FROM job_counts GROUP BY queue, class
),
found AS (
    -- Two ranges of jobs_held, each an index condition: the live leases, then the expired ones.
    SELECT queue, 'leased' AS status, count(*)::bigint AS n, true AS unfinished
      FROM jobs
     WHERE done = 0 AND (owner IS NOT NULL OR until <> 0) AND until > $1::float8
     GROUP BY 1
    UNION ALL
    SELECT queue, 'expired', count(*)::bigint, true
      FROM jobs
     WHERE done = 0 AND (owner IS NOT NULL OR until <> 0) AND until <= $1::float8
       AND owner IS NOT NULL AND NOT (max_attempts > 0 AND attempts >= max_attempts)
     GROUP BY 1
    UNION ALL
    -- A clock before 0: the jobs that never held a lease (until = 0, no owner) count as
    -- leased too, as in the CASE (until > now). They are the unfinished ones not in jobs_held.
    SELECT c.queue, 'leased',
           c.n - (SELECT count(*)::bigint FROM jobs
                   WHERE done = 0 AND (owner IS NOT NULL OR until <> 0) AND queue = c.queue),
           true
      FROM counts AS c
     WHERE c.class = 'unfinished' AND $1::float8 < 0
    UNION ALL
    SELECT queue, 'dead', count(*)::bigint, true
      FROM jobs
     WHERE done = 0 AND max_attempts > 0 AND attempts >= max_attempts AND until <= $1::float8
     GROUP BY 1
    UNION ALL
    SELECT queue, 'retrying', count(*)::bigint, true
      FROM jobs
     WHERE done = 0 AND owner IS NULL AND error IS NOT NULL AND until <= $1::float8
       AND NOT (max_attempts > 0 AND attempts >= max_attempts)
     GROUP BY 1
    UNION ALL
    SELECT queue, 'scheduled', count(*)::bigint, true
      FROM jobs
     WHERE done = 0 AND owner IS NULL AND error IS NULL AND not_before > 0
       AND not_before > $1::float8 AND until <= $1::float8
       AND NOT (max_attempts > 0 AND attempts >= max_attempts)
     GROUP BY 1
    UNION ALL
    -- The finished jobs by class (done, dead, cancelled), and the unfinished total.
    SELECT queue, class, n, class = 'unfinished' FROM counts
),
names AS (
    SELECT queue AS name FROM counts WHERE n > 0 UNION SELECT name FROM queues
)
SELECT m.name, coalesce(p.paused, false) AS paused, f.status, coalesce(f.n, 0)::bigint,
       coalesce(f.unfinished, false)
  FROM names AS m
  LEFT JOIN queues AS p ON p.name = m.name
  LEFT JOIN found AS f ON f.queue = m.name AND f.n <> 0
 ORDER BY m.name, f.status
