-- retry_dead: retry.sql for every dead job of queue ?2 (NULL: of every queue); an operator
-- verb, not fenced. Inside retry_dead_in's BEGIN IMMEDIATE, after lose.sql: once, or once
-- per queue of a list. ?1 now. Cancelled jobs are not included: retry them by id. A finished
-- job whose unique key another unfinished job of its queue holds is not retried, and of
-- several dead ones with one key only the oldest is (as on PostgreSQL); OR IGNORE as in
-- retry.sql.
UPDATE OR IGNORE jobs
   SET done = 0, outcome = NULL, finished_at = NULL, owner = NULL, until = 0, attempts = 0,
       error = NULL, not_before = min(not_before, ?1)
 WHERE ((done = 1 AND outcome = 'dead')
    OR (done = 0 AND max_attempts > 0 AND attempts >= max_attempts AND until <= ?1))
   AND (?2 IS NULL OR queue = ?2)
   AND (unique_key IS NULL OR done = 0
        OR NOT EXISTS (SELECT 1 FROM jobs AS o
                        WHERE o.queue = jobs.queue AND o.unique_key = jobs.unique_key
                          AND (o.done = 0
                               OR (o.rowid < jobs.rowid AND o.outcome = 'dead'))))
