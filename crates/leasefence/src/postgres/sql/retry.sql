-- retry: make a dead or cancelled job ready again with a fresh attempts budget (an operator
-- verb, not fenced). Runs inside retry's transaction, once per id, in the order given.
-- $1 id, $2 now. Returns the id when it was retried.
-- Dead: finished as dead, or its budget spent with the last lease expired (not buried yet).
-- A completed job keeps its result (not retried); a job still running is left alone. The
-- fence is kept, so the next claim continues above every fence handed out: a holder of the
-- old lease (a cancelled job's) can store nothing, as owner and until are cleared. The error
-- of the last attempt is cleared with the budget: the job is `ready`, due now at the latest.
-- A finished job whose unique key another unfinished job of its queue holds — one retried
-- just before in the same call included — is not retried: it would break the jobs_unique
-- index.
UPDATE jobs
   SET done = 0, outcome = NULL, finished_at = NULL, owner = NULL, until = 0, attempts = 0,
       error = NULL, not_before = least(not_before, $2::float8)
 WHERE id = $1::text
   AND ((done = 1 AND outcome IN ('dead', 'cancelled'))
        OR (done = 0 AND max_attempts > 0 AND attempts >= max_attempts
            AND until <= $2::float8))
   AND (unique_key IS NULL OR done = 0
        OR NOT EXISTS (SELECT 1 FROM jobs AS o
                        WHERE o.queue = jobs.queue AND o.unique_key = jobs.unique_key
                          AND o.done = 0))
RETURNING id
