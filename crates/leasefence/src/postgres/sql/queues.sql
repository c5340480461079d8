-- queues: every queue — those with jobs and those paused — with whether it is paused and its
-- jobs' counts by status at now. One statement (a read, one snapshot). $1 now.
-- One row per (queue, status) with a count; a queue with no job has one row with a NULL
-- status. Read without walking every job: the finished jobs and the unfinished total come
-- from job_counts (kept by triggers), and the unfinished statuses other than ready each from
-- the partial index that holds only its candidates (the planner picks it: each branch's
-- WHERE carries its predicate); ready is what is left. The statuses are
-- those of the CASE in list.sql and inspect.sql, in its order (leased, then dead, expired,
-- retrying, scheduled, ready; a test checks that they agree): a job is leased while
-- until > now, then dead with its attempts spent, then expired while it names an owner.
-- `counts` and `busy` are each read twice; both are small.
-- (stats is the sum of these rows over the queues, in policy::totals.)
WITH counts AS (
    SELECT queue, class, sum(n)::bigint AS n FROM job_counts GROUP BY queue, class
),
busy AS (
    -- Two ranges of jobs_held, each an index condition: the live leases, then the expired ones.
    SELECT queue, 'leased' AS status, count(*)::bigint AS n
      FROM jobs
     WHERE done = 0 AND (owner IS NOT NULL OR until <> 0) AND until > $1::float8
     GROUP BY 1
    UNION ALL
    SELECT queue, 'expired', count(*)
      FROM jobs
     WHERE done = 0 AND (owner IS NOT NULL OR until <> 0) AND until <= $1::float8
       AND owner IS NOT NULL AND NOT (max_attempts > 0 AND attempts >= max_attempts)
     GROUP BY 1
    UNION ALL
    -- A clock before 0: the jobs that never held a lease (until = 0, no owner) count as
    -- leased too, as in the CASE (until > now). They are the unfinished ones not in jobs_held.
    SELECT c.queue, 'leased',
           c.n - (SELECT count(*) FROM jobs
                   WHERE done = 0 AND (owner IS NOT NULL OR until <> 0) AND queue = c.queue)
      FROM counts AS c
     WHERE c.class = 'unfinished' AND $1::float8 < 0
    UNION ALL
    SELECT queue, 'dead', count(*)
      FROM jobs
     WHERE done = 0 AND max_attempts > 0 AND attempts >= max_attempts AND until <= $1::float8
     GROUP BY 1
    UNION ALL
    SELECT queue, 'retrying', count(*)
      FROM jobs
     WHERE done = 0 AND owner IS NULL AND error IS NOT NULL AND until <= $1::float8
       AND NOT (max_attempts > 0 AND attempts >= max_attempts)
     GROUP BY 1
    UNION ALL
    SELECT queue, 'scheduled', count(*)
      FROM jobs
     WHERE done = 0 AND owner IS NULL AND error IS NULL AND not_before > 0
       AND not_before > $1::float8 AND until <= $1::float8
       AND NOT (max_attempts > 0 AND attempts >= max_attempts)
     GROUP BY 1
),
statuses AS (
    SELECT queue, status, n FROM busy
    UNION ALL
    SELECT queue, class, n FROM counts WHERE class <> 'unfinished'
    UNION ALL
    SELECT c.queue, 'ready',
           c.n - coalesce((SELECT sum(b.n) FROM busy AS b WHERE b.queue = c.queue), 0)::bigint
      FROM counts AS c
     WHERE c.class = 'unfinished'
),
names AS (
    SELECT queue AS name FROM counts WHERE n > 0 UNION SELECT name FROM queues
)
SELECT m.name, coalesce(p.paused, false) AS paused, s.status, coalesce(s.n, 0)::bigint
  FROM names AS m
  LEFT JOIN queues AS p ON p.name = m.name
  LEFT JOIN statuses AS s ON s.queue = m.name AND s.n > 0
 ORDER BY m.name, s.status
