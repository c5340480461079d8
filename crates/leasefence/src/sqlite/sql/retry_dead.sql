-- retry_dead: retry.sql for every dead job (an operator verb, not fenced). Autocommit: one
-- statement. ?1 now. Cancelled jobs are not included: retry them by id. OR IGNORE: as in
-- retry.sql, a job whose unique key another unfinished job holds is skipped.
UPDATE OR IGNORE jobs
   SET done = 0, outcome = NULL, finished_at = NULL, owner = NULL, until = 0, attempts = 0,
       error = NULL, not_before = min(not_before, ?1)
 WHERE (done = 1 AND outcome = 'dead')
    OR (done = 0 AND max_attempts > 0 AND attempts >= max_attempts AND until <= ?1)
