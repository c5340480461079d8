-- retry: make a dead or cancelled job ready again with a fresh attempts budget (an operator
-- verb, not fenced). Runs inside retry's BEGIN IMMEDIATE, once per id.
-- ?1 id, ?2 now.
-- Dead: finished as dead, or its budget spent with the last lease expired (not buried yet).
-- A completed job keeps its result (not retried); a job still running is left alone. The
-- fence is kept, so the next claim continues above every fence handed out: a holder of the
-- old lease (a cancelled job's) can store nothing, as owner and until are cleared. The error
-- of the last attempt is cleared with the budget: the job is `ready`, due now at the latest.
-- OR IGNORE: a job whose unique key another unfinished job of its queue holds now would break
-- the jobs_unique index; it is skipped (not retried) instead of failing the call.
UPDATE OR IGNORE jobs
   SET done = 0, outcome = NULL, finished_at = NULL, owner = NULL, until = 0, attempts = 0,
       error = NULL, not_before = min(not_before, ?2)
 WHERE id = ?1
   AND ((done = 1 AND outcome IN ('dead', 'cancelled'))
        OR (done = 0 AND max_attempts > 0 AND attempts >= max_attempts AND until <= ?2))
