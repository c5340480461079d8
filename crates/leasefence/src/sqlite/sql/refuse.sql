-- refuse: count one refused write (renew, complete, fail, release) in the ledger, with the
-- fence that tried. Inside the refused write's transaction (a group commit's for a single
-- write), after its statement changed nothing, so the count and the refusal are one
-- transaction.
-- ?1 id, ?2 fence, ?3 the operation. Only for a job that exists: an unknown id has no ledger.
INSERT INTO refusals (job_id, fence, op, count, last_at)
SELECT id, ?2, ?3, 1, (julianday('now') - 2440587.5) * 86400.0
  FROM jobs WHERE id = ?1
    ON CONFLICT (job_id, fence, op) DO UPDATE
   SET count = count + 1, last_at = excluded.last_at
