-- complete: store the result under the current lease. One statement, its own implicit
-- transaction; inside complete_with's transaction, before the caller's writes.
-- $1 id, $2 owner, $3 fence, $4 now, $5 result.
-- Only the current owner and fence, on an unfinished job, while the lease is live (until > now).
-- A refusal is counted in the ledger by the same statement (`refused`: one more for this job,
-- fence and operation; nothing for an unknown job). Returns a row when stored.
WITH stored AS (
    UPDATE jobs
       SET result = $5, done = 1, outcome = 'completed', finished_at = $4
     WHERE id = $1 AND owner = $2 AND fence = $3 AND done = 0 AND until > $4
    RETURNING id),
refused AS (
    INSERT INTO refusals (job_id, fence, op, count, last_at)
    SELECT id, $3, 'complete', 1, extract(epoch FROM clock_timestamp())
      FROM jobs
     WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM stored)
        ON CONFLICT (job_id, fence, op) DO UPDATE
       SET count = refusals.count + 1, last_at = EXCLUDED.last_at)
SELECT 1 FROM stored
