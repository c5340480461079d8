-- Attempts are spent by runs, not by interruptions: a counter of their own, apart from the
-- fence. A claim spends one (and raises the fence), a lease given back by `release` refunds it
-- (the fence stays raised: a fence number is never reused). Until now the fence counted the
-- attempts, offset like max_attempts by the fence floor, so both start from it. Filled only
-- when the column is new: a migration run again (its record lost) never resets a counter.
DO $migrate$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                    WHERE table_schema = current_schema() AND table_name = 'jobs'
                      AND column_name = 'attempts') THEN
        ALTER TABLE jobs ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
        UPDATE jobs SET attempts = fence;
    END IF;
END
$migrate$;
-- When a job was enqueued, by the database server's clock (informational). Unknown for jobs
-- enqueued before.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS enqueued_at DOUBLE PRECISION;
-- The jobs on their last attempt, by lease end: the claims find the expired ones here and
-- finish them as dead (the `buried` step of claim_next.sql and claim_batch.sql).
CREATE INDEX IF NOT EXISTS jobs_last_attempt ON jobs (until)
 WHERE done = 0 AND max_attempts > 0 AND attempts >= max_attempts;
