-- release: give a lease back early. One statement, its own implicit transaction.
-- $1 id, $2 owner, $3 fence. The fence is kept, so token numbers are never reused.
-- A refusal is counted in the ledger by the same statement (`refused`: one more for this job,
-- fence and operation; nothing for an unknown job). Returns a row when released.
WITH released AS (
    UPDATE jobs
       SET owner = NULL, until = 0, attempts = greatest(attempts - 1, 0)
     WHERE id = $1 AND owner = $2 AND fence = $3 AND done = 0
    RETURNING id),
refused AS (
    INSERT INTO refusals (job_id, fence, op, count, last_at)
    SELECT id, $3, 'release', 1, extract(epoch FROM clock_timestamp())
      FROM jobs
     WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM released)
        ON CONFLICT (job_id, fence, op) DO UPDATE
       SET count = refusals.count + 1, last_at = EXCLUDED.last_at)
SELECT 1 FROM released
