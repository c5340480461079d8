-- Attempts are spent by runs, not by interruptions: a counter of their own, apart from the
-- fence. A claim spends one (and raises the fence), a lease given back by `release` refunds it
-- (the fence stays raised: a fence number is never reused). Until now the fence counted the
-- attempts, offset like max_attempts by the fence floor, so both start from it.
ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET attempts = fence;
-- When a job was enqueued, by the system clock of the enqueuing host (informational: leases
-- are judged by the clock the caller passes). Unknown for jobs enqueued before.
ALTER TABLE jobs ADD COLUMN enqueued_at REAL;
-- The jobs on their last attempt, by lease end: claim_next finds the expired ones here and
-- finishes them as dead (bury.sql).
CREATE INDEX IF NOT EXISTS jobs_last_attempt ON jobs (until)
 WHERE done = 0 AND max_attempts > 0 AND attempts >= max_attempts;
