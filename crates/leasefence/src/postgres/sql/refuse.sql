-- refuse: count one refused write in the ledger, with the fence that tried, for the fenced
-- writes that are not one statement (enqueue_slots: the scheduler's enqueue of due runs).
-- In the refused write's transaction, after its check found the lease not current.
-- $1 id, $2 fence, $3 the operation. Only for a job that exists: an unknown id has no ledger.
INSERT INTO refusals (job_id, fence, op, count, last_at)
SELECT id, $2, $3, 1, extract(epoch FROM clock_timestamp())
  FROM jobs WHERE id = $1
    ON CONFLICT (job_id, fence, op) DO UPDATE
   SET count = refusals.count + 1, last_at = EXCLUDED.last_at
