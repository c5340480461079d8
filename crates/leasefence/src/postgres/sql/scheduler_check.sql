-- scheduler_check: the fence check of enqueue_slots. In its transaction, before any
-- slot is written, locking the row (FOR UPDATE) until the commit,
-- so no claim or renew of the role can come between the check and the writes.
-- $1 the scheduler's job id, $2 owner, $3 fence, $4 now.
-- Only the current owner and fence, on an unfinished job, while the lease is live
-- (until > now): the rule of complete.
SELECT 1 FROM jobs
 WHERE id = $1 AND owner = $2 AND fence = $3 AND done = 0 AND until > $4
   FOR UPDATE
