-- lose: end as lost the open attempt of every job whose last attempt's lease has expired
-- (its budget spent), before retry or retry_dead makes the job ready again: its holder never
-- wrote, so the ledger must not read the retry as a release. Inside retry's transaction
-- (before retry.sql, per id) and retry_dead's (before retry_dead.sql).
-- $1 now, $2 the one job's id, or NULL for every job; $3 the queues retry_dead_in retries, or
-- NULL for every queue (another queue's job is not retried: its holder may still release).
UPDATE attempts
   SET outcome = 'lost', ended_at = extract(epoch FROM clock_timestamp())
 WHERE outcome IS NULL
   AND job_id IN (SELECT id FROM jobs
                   WHERE ($2::text IS NULL OR id = $2::text)
                     AND ($3::text[] IS NULL OR queue = ANY ($3::text[]))
                     AND done = 0 AND max_attempts > 0 AND attempts >= max_attempts
                     AND until <= $1::float8)
