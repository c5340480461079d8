-- claim_next: take the lease on the best ready job of every queue. Inside a group commit's
-- BEGIN IMMEDIATE (sqlite/group.rs: with other stores' single writes, or alone), after
-- bury.sql (the lock is taken before anything is read).
-- ?1 owner, ?2 new until (now + ttl), ?3 now.
-- The best ready job — highest priority, then earliest not_before, then oldest — walking the
-- jobs_ready index. Ready: not done, lease expired (until <= now), due (not_before <= now),
-- and its queue not paused (the paused ones are few: read once). A job with no attempts left
-- is never among them: bury.sql, just before in the same transaction, finished every expired
-- one. A scalar subquery (`rowid = (…)`): unlike `rowid IN (…)` it needs no ephemeral table
-- for its one result. claim_batch.sql is the same choice for many jobs; claim_next_in.sql
-- for named queues.
UPDATE jobs
   SET owner = ?1, until = ?2, fence = fence + 1, attempts = attempts + 1
 WHERE rowid = (
        SELECT rowid FROM jobs
         WHERE done = 0 AND until <= ?3 AND not_before <= ?3
           AND queue NOT IN (SELECT name FROM queues WHERE paused <> 0)
         ORDER BY priority DESC, not_before, rowid
         LIMIT 1)
RETURNING id, fence, until, payload, priority, max_attempts, error, attempts, queue, kind
