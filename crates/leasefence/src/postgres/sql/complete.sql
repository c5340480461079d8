-- complete: store the result under the current lease. One statement, its own implicit
-- transaction; inside complete_with's transaction, before the caller's writes.
-- $1 id, $2 owner, $3 fence, $4 now, $5 result.
-- Only the current owner and fence, on an unfinished job, while the lease is live (until > now).
UPDATE jobs
   SET result = $5, done = 1, outcome = 'completed', finished_at = $4
 WHERE id = $1 AND owner = $2 AND fence = $3 AND done = 0 AND until > $4
