-- retry_dead: retry.sql for every dead job (an operator verb, not fenced). One statement.
-- $1 now. Cancelled jobs are not included: retry them by id.
UPDATE jobs
   SET done = 0, outcome = NULL, finished_at = NULL, owner = NULL, until = 0, attempts = 0,
       error = NULL, not_before = least(not_before, $1::float8)
 WHERE (done = 1 AND outcome = 'dead')
    OR (done = 0 AND max_attempts > 0 AND attempts >= max_attempts AND until <= $1::float8)
