-- retry_dead: retry.sql for every dead job of the queues $2 (NULL: of every queue); an
-- operator verb, not fenced. One statement, after lose.sql in retry_dead_in's transaction.
-- $1 now. Cancelled jobs are not included: retry them by id. As in retry.sql, a job whose
-- unique key another unfinished job holds is not retried, and of several with one key only
-- the oldest is.
UPDATE jobs
   SET done = 0, outcome = NULL, finished_at = NULL, owner = NULL, until = 0, attempts = 0,
       error = NULL, not_before = least(not_before, $1::float8)
 WHERE ((done = 1 AND outcome = 'dead')
    OR (done = 0 AND max_attempts > 0 AND attempts >= max_attempts AND until <= $1::float8))
   AND ($2::text[] IS NULL OR queue = ANY ($2::text[]))
   AND (unique_key IS NULL OR done = 0
        OR NOT EXISTS (SELECT 1 FROM jobs AS o
                        WHERE o.queue = jobs.queue AND o.unique_key = jobs.unique_key
                          AND (o.done = 0
                               OR (o.seq < jobs.seq AND o.outcome = 'dead'))))
