-- renew: extend a live lease. One statement, its own implicit transaction: a concurrent
-- writer waits for the row lock and then re-checks this WHERE on the row as it was left.
-- $1 id, $2 owner, $3 fence, $4 now, $5 new until (now + ttl).
-- Only the current owner and fence, on an unfinished job, while the lease is live (until > now).
-- A refusal is counted in the ledger by the same statement (`refused`: one more for this job,
-- fence and operation; nothing for an unknown job). Returns a row when renewed.
WITH renewed AS (
    UPDATE jobs
       SET until = $5
     WHERE id = $1 AND owner = $2 AND fence = $3 AND done = 0 AND until > $4
    RETURNING id),
refused AS (
    INSERT INTO refusals (job_id, fence, op, count, last_at)
    SELECT id, $3, 'renew', 1, extract(epoch FROM clock_timestamp())
      FROM jobs
     WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM renewed)
        ON CONFLICT (job_id, fence, op) DO UPDATE
       SET count = refusals.count + 1, last_at = EXCLUDED.last_at)
SELECT 1 FROM renewed
