-- lose: end as lost the open attempt of every job whose last attempt's lease has expired
-- (its budget spent), before retry or retry_dead makes the job ready again: its holder never
-- wrote, so the ledger must not read the retry as a release. Inside retry's BEGIN IMMEDIATE
-- (before retry.sql) and retry_dead's (before retry_dead.sql).
-- ?1 now, ?2 the one job's id, or NULL for every job; ?3 the one queue retry_dead_in retries,
-- or NULL for every queue (another queue's job is not retried: its holder may still release).
UPDATE attempts
   SET outcome = 'lost', ended_at = (julianday('now') - 2440587.5) * 86400.0
 WHERE outcome IS NULL
   AND job_id IN (SELECT id FROM jobs
                   WHERE (?2 IS NULL OR id = ?2)
                     AND (?3 IS NULL OR queue = ?3)
                     AND done = 0 AND max_attempts > 0 AND attempts >= max_attempts
                     AND until <= ?1)
