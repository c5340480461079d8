-- claim_next_in: take the lease on the best ready job of the named queues. Inside a group
-- commit's BEGIN IMMEDIATE for claim_next_in (sqlite/group.rs), after bury.sql; claim_batch_in
-- runs it once per job in its own BEGIN IMMEDIATE (each run takes the next best, so the leases
-- come out best first).
-- ?1 owner, ?2 new until (now + ttl), ?3 now, ?4 the queues as a JSON array of names.
-- Per queue that is not paused, its best ready job — highest priority, then earliest
-- not_before, then oldest — walking that queue's part of the jobs_queue_ready index (one
-- short walk per queue, however many jobs the other queues hold: INDEXED BY, as the planner
-- cannot tell that jobs_ready would scan them all); then the best of those few.
-- Ready: not done, lease expired (until <= now), due (not_before <= now); bury.sql has
-- finished every job with no attempts left.
UPDATE jobs
   SET owner = ?1, until = ?2, fence = fence + 1, attempts = attempts + 1
 WHERE rowid = (
        SELECT rowid FROM jobs
         WHERE rowid IN (
                SELECT (SELECT c.rowid FROM jobs AS c INDEXED BY jobs_queue_ready
                         WHERE c.queue = q.value AND c.done = 0
                           AND c.until <= ?3 AND c.not_before <= ?3
                         ORDER BY c.priority DESC, c.not_before, c.rowid
                         LIMIT 1)
                  FROM json_each(?4) AS q
                 WHERE q.value NOT IN (SELECT name FROM queues WHERE paused <> 0))
         ORDER BY priority DESC, not_before, rowid
         LIMIT 1)
RETURNING id, fence, until, payload, priority, max_attempts, error, attempts, queue, kind
