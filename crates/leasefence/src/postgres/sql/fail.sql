-- fail: record a failed attempt under the current lease. One statement, its own implicit
-- transaction.
-- $1 id, $2 owner, $3 fence, $4 now, $5 error, $6 retry_at.
-- Fenced like complete: only the current owner and fence, unfinished, lease live. Gives the
-- lease up (fence kept) and schedules the retry, or buries the job after its last attempt.
-- A refusal is counted in the ledger by the same statement (`refused`: one more for this job,
-- fence and operation; nothing for an unknown job). Returns `done` when recorded.
WITH failed AS (
    UPDATE jobs
       SET owner = NULL, until = 0, error = $5,
           not_before = $6,
           done = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN 1 ELSE 0 END,
           outcome = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN 'dead' END,
           finished_at = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN $4 END
     WHERE id = $1 AND owner = $2 AND fence = $3 AND done = 0 AND until > $4
    RETURNING done),
refused AS (
    INSERT INTO refusals (job_id, fence, op, count, last_at)
    SELECT id, $3, 'fail', 1, extract(epoch FROM clock_timestamp())
      FROM jobs
     WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM failed)
        ON CONFLICT (job_id, fence, op) DO UPDATE
       SET count = refusals.count + 1, last_at = EXCLUDED.last_at)
SELECT done FROM failed
