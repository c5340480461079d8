-- cancel: stop an unfinished job (operator verb, not fenced). One statement, its own
-- implicit transaction.
-- $1 id, $2 now. Any unfinished job; a finished one keeps its result. A holder's later renew,
-- complete or fail is refused (done = 1). The fence is kept.
-- `lost` first: an open attempt whose lease had expired by now with nothing written no longer
-- held the job, so it ends as lost, not cancelled (the ledger's trigger, fired by the UPDATE of
-- jobs after this one, then finds it ended). A claim racing the cancel: its new attempt is not
-- in this statement's snapshot, and the UPDATE of jobs waits for its row and cancels that holder.
WITH lost AS (
    UPDATE attempts
       SET outcome = 'lost', ended_at = extract(epoch FROM clock_timestamp())
     WHERE outcome IS NULL
       AND job_id IN (SELECT id FROM jobs
                       WHERE id = $1 AND done = 0 AND owner IS NOT NULL AND until <= $2::float8)
)
UPDATE jobs
   SET done = 1, outcome = 'cancelled', finished_at = $2
 WHERE id = $1 AND done = 0
