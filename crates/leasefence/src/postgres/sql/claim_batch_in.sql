-- claim_batch_in: take the leases on the best n ready jobs of the named queues (claim_next_in
-- is this with n = 1). One statement, its own implicit transaction.
-- $1 owner, $2 new until (now + ttl), $3 now, $4 how many, $5 the queues.
-- Per queue that is not paused, its best n ready jobs — highest priority, then earliest
-- not_before, then oldest — walking that queue's part of the jobs_queue_ready index (a short
-- walk per queue, however many jobs the other queues hold); then the best n of those. Ready:
-- not done, lease expired (until <= now), due (not_before <= now), attempts left. SKIP LOCKED:
-- concurrent workers take different jobs; the candidates of a queue that are not taken are
-- only locked until this statement ends. `buried` first, as in claim_batch.sql.
WITH buried AS (
    UPDATE jobs
       SET done = 1, outcome = 'dead', finished_at = until,
           error = coalesce(error, 'the lease of the last attempt expired')
     WHERE id IN (SELECT id FROM jobs
                   WHERE done = 0 AND max_attempts > 0 AND attempts >= max_attempts
                     AND until <= $3
                     FOR UPDATE SKIP LOCKED)),
ready AS (
    SELECT c.id
      FROM unnest($5::text[]) AS q(name)
     CROSS JOIN LATERAL (
            SELECT id, priority, not_before, seq FROM jobs
             WHERE queue = q.name AND done = 0 AND until <= $3 AND not_before <= $3
               AND (max_attempts = 0 OR attempts < max_attempts)
             ORDER BY priority DESC, not_before, seq
             LIMIT $4
               FOR UPDATE SKIP LOCKED) AS c
     WHERE q.name NOT IN (SELECT name FROM queues WHERE paused)
     ORDER BY c.priority DESC, c.not_before, c.seq
     LIMIT $4)
UPDATE jobs
   SET owner = $1, until = $2, fence = jobs.fence + 1, attempts = jobs.attempts + 1
  FROM ready
 WHERE jobs.id = ready.id
RETURNING jobs.id, jobs.fence, jobs.until, jobs.payload, jobs.priority, jobs.max_attempts,
          jobs.error, jobs.attempts, jobs.queue, jobs.kind, jobs.not_before, jobs.seq
-- RETURNING has no order: not_before and seq come back so that the caller hands the leases out
-- best first (policy::best_first).
