-- bury: finish as dead every job whose last attempt's lease has expired: its budget is spent
-- and no claim will take it, so it is finished (done = 1, outcome 'dead', finished at its lease
-- end) and purge and every count treat it so. Inside the transaction of claim_next (a group
-- commit's) and of claim_batch, before the claim. Not a fenced write: an expired lease can store nothing.
-- ?1 now. Walks the jobs_last_attempt index.
UPDATE jobs
   SET done = 1, outcome = 'dead', finished_at = until,
       error = coalesce(error, 'the lease of the last attempt expired')
 WHERE done = 0 AND max_attempts > 0 AND attempts >= max_attempts AND until <= ?1
