-- claim_next: take the lease on the best ready job. One statement, its own implicit
-- transaction. claim_batch.sql is the same choice for many jobs.
-- $1 owner, $2 new until (now + ttl), $3 now. Named queues: claim_batch_in.sql.
-- The best ready job — highest priority, then earliest not_before, then oldest — walking the
-- jobs_ready index. Ready: not done, lease expired (until <= now), due (not_before <= now),
-- attempts left, and its queue not paused. SKIP LOCKED: concurrent workers take different
-- jobs instead of queueing on
-- the same row; FOR UPDATE re-checks the WHERE on a row changed since the snapshot.
-- First, `buried` finishes as dead every job whose last attempt's lease has expired (its budget
-- is spent and no claim would take it; SQLite's bury.sql does the same in its own statement):
-- done = 1, outcome 'dead', finished at its lease end, so purge and every count treat it so.
-- Not a fenced write: an expired lease can store nothing. It walks jobs_last_attempt, and its
-- rows never meet the claimed ones (those have attempts left).
WITH buried AS (
    UPDATE jobs
       SET done = 1, outcome = 'dead', finished_at = until,
           error = coalesce(error, 'the lease of the last attempt expired')
     WHERE id IN (SELECT id FROM jobs
                   WHERE done = 0 AND max_attempts > 0 AND attempts >= max_attempts
                     AND until <= $3
                     FOR UPDATE SKIP LOCKED)),
ready AS (
    SELECT id FROM jobs
     WHERE done = 0 AND until <= $3 AND not_before <= $3
       AND (max_attempts = 0 OR attempts < max_attempts)
       AND queue NOT IN (SELECT name FROM queues WHERE paused)
     ORDER BY priority DESC, not_before, seq
     LIMIT 1
       FOR UPDATE SKIP LOCKED)
UPDATE jobs
   SET owner = $1, until = $2, fence = jobs.fence + 1, attempts = jobs.attempts + 1
  FROM ready
 WHERE jobs.id = ready.id
RETURNING jobs.id, jobs.fence, jobs.until, jobs.payload, jobs.priority, jobs.max_attempts,
          jobs.error, jobs.attempts, jobs.queue, jobs.kind
