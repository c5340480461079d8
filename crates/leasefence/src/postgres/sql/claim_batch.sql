-- claim_batch: take the leases on the best n ready jobs. One statement, its own implicit
-- transaction.
-- $1 owner, $2 new until (now + ttl), $3 now, $4 how many.
-- The best ready jobs — highest priority, then earliest not_before, then oldest — walking the
-- jobs_ready index. Ready: not done, lease expired (until <= now), due (not_before <= now),
-- attempts left. SKIP LOCKED: concurrent workers take different jobs instead of queueing on
-- the same rows; FOR UPDATE re-checks the WHERE on a row changed since the snapshot.
WITH ready AS (
    SELECT id FROM jobs
     WHERE done = 0 AND until <= $3 AND not_before <= $3
       AND (max_attempts = 0 OR fence < max_attempts)
     ORDER BY priority DESC, not_before, seq
     LIMIT $4
       FOR UPDATE SKIP LOCKED)
UPDATE jobs
   SET owner = $1, until = $2, fence = jobs.fence + 1
  FROM ready
 WHERE jobs.id = ready.id
RETURNING jobs.id, jobs.fence, jobs.until, jobs.payload, jobs.priority, jobs.max_attempts,
          jobs.error, jobs.not_before, jobs.seq
-- RETURNING has no order: not_before and seq come back so that the caller hands the leases out
-- best first (policy::best_first).
