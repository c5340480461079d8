-- The queue: payloads, scheduling, priorities, an attempts budget, failures, and the fence
-- floor that keeps purged ids from ever reusing a fence. Purely additive: the six columns keep
-- their meaning. `seq` stands in for SQLite's rowid: the enqueue order.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS seq BIGSERIAL;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS payload BYTEA;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS priority BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS not_before DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS max_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS error TEXT;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS outcome TEXT;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS finished_at DOUBLE PRECISION;
-- claim_next walks this index in the order of its ORDER BY: best priority, earliest
-- not_before, oldest (seq). Partial: only unfinished jobs are ever handed out.
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (priority DESC, not_before, seq) WHERE done = 0;
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_at) WHERE done = 1;
-- The highest fence ever handed out for a purged id: a re-enqueued id starts from here.
CREATE TABLE IF NOT EXISTS fence_floor (
    id    TEXT PRIMARY KEY,
    fence BIGINT NOT NULL
);
-- The highest fence admitted per external resource (`admit`).
CREATE TABLE IF NOT EXISTS fence_gate (
    resource TEXT PRIMARY KEY,
    fence    BIGINT NOT NULL
);
-- Jobs finished before this migration have no finish time: use their lease end, an upper
-- bound (a completion is accepted only while until > now), so purge never deletes one early.
UPDATE jobs SET finished_at = until WHERE done <> 0 AND finished_at IS NULL;
