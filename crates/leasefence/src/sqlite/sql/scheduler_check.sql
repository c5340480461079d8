-- scheduler_check: the fence check of enqueue_slots. Inside its BEGIN IMMEDIATE, before any
-- slot is written, so the check and the writes are one step.
-- ?1 the scheduler's job id, ?2 owner, ?3 fence, ?4 now.
-- Only the current owner and fence, on an unfinished job, while the lease is live
-- (until > now): the rule of complete.
SELECT 1 FROM jobs
 WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0 AND until > ?4
