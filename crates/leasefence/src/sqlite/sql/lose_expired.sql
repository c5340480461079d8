-- lose_expired: end as lost the open attempt of job ?1 whose lease expired by ?2 (now) with
-- nothing written, before an operator's cancel finishes the job: that attempt no longer held
-- the job, so the ledger must not read the cancel as its end (the cancel ends an attempt only
-- while its lease is live). Inside cancel's BEGIN IMMEDIATE, before cancel.sql.
UPDATE attempts
   SET outcome = 'lost', ended_at = (julianday('now') - 2440587.5) * 86400.0
 WHERE outcome IS NULL
   AND job_id IN (SELECT id FROM jobs
                   WHERE id = ?1 AND done = 0 AND owner IS NOT NULL AND until <= ?2)
