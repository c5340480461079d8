-- claim_batch: take the leases on the best n ready jobs of every queue. Runs inside BEGIN
-- IMMEDIATE, after bury.sql.
-- ?1 owner, ?2 new until (now + ttl), ?3 now, ?4 how many.
-- The best ready jobs — highest priority, then earliest not_before, then oldest — walking the
-- jobs_ready index. Ready: not done, lease expired (until <= now), due (not_before <= now),
-- and its queue not paused (the paused ones are few: read once). A job with no attempts left
-- is never among them: bury.sql, just before in the same transaction, finished every expired
-- one. RETURNING has no order: not_before and rowid come back so that the caller hands the
-- leases out best first (policy::best_first). Named queues: claim_next_in.sql, once per job.
-- LIMIT +?4, not LIMIT ?4: SQLite plans with the value of a bare `LIMIT ?` and re-prepares
-- the statement (parsing it and its triggers anew) each time a different value is bound; the
-- worker's claims change it as its handlers' speed changes. The plan is the same either way
-- (the jobs_ready walk); re-preparing cost a tenth of the worker's time at NORMAL.
UPDATE jobs
   SET owner = ?1, until = ?2, fence = fence + 1, attempts = attempts + 1
 WHERE rowid IN (
        SELECT rowid FROM jobs
         WHERE done = 0 AND until <= ?3 AND not_before <= ?3
           AND queue NOT IN (SELECT name FROM queues WHERE paused <> 0)
         ORDER BY priority DESC, not_before, rowid
         LIMIT +?4)
RETURNING id, fence, until, payload, priority, max_attempts, error, attempts, queue, kind,
          not_before, rowid
