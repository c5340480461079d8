-- claim: take the lease on one job by id. Runs inside a group commit's BEGIN IMMEDIATE
-- (sqlite/group.rs: with other stores' single writes, or alone; the lock is taken before the
-- row is read, so the check and the write are one step).
-- ?1 id, ?2 owner, ?3 new until (now + ttl), ?4 now.
-- Claimable: known, not done, lease expired (until <= now: now == until is expired), and
-- attempts left in its budget (max_attempts 0: no budget) — a spent job is never run again by
-- id either; the next claim_next or claim_batch buries it as dead. Returns
-- the lease: the new fence, the lease end and the job's payload and queue settings. A
-- claim by id ignores whether the job's queue is paused: pausing stops claim_next and
-- claim_batch from handing jobs out, not an explicit claim of one job.
UPDATE jobs
   SET owner = ?2, until = ?3, fence = fence + 1, attempts = attempts + 1
 WHERE id = ?1 AND done = 0 AND until <= ?4 AND (max_attempts = 0 OR attempts < max_attempts)
RETURNING id, fence, until, payload, priority, max_attempts, error, attempts, queue, kind
