-- The queue: payloads, scheduling, priorities, an attempts budget, failures, and the fence
-- floor that keeps purged ids from ever reusing a fence. Purely additive: the six columns keep
-- their meaning. An ADD COLUMN whose column already exists is skipped by the migrator.
ALTER TABLE jobs ADD COLUMN payload BLOB;
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN not_before REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN error TEXT;
ALTER TABLE jobs ADD COLUMN outcome TEXT;
ALTER TABLE jobs ADD COLUMN finished_at REAL;
-- claim_next walks this index in order: best priority, earliest not_before, oldest (rowid).
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (priority DESC, not_before) WHERE done = 0;
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_at) WHERE done = 1;
-- The highest fence ever handed out for a purged id: a re-enqueued id starts from here.
CREATE TABLE IF NOT EXISTS fence_floor (
    id    TEXT PRIMARY KEY,
    fence INTEGER NOT NULL
) WITHOUT ROWID;
-- The highest fence admitted per external resource (`admit`).
CREATE TABLE IF NOT EXISTS fence_gate (
    resource TEXT PRIMARY KEY,
    fence    INTEGER NOT NULL
) WITHOUT ROWID;
-- Jobs finished before this migration have no finish time: use their lease end, an upper
-- bound (a completion is accepted only while until > now), so purge never deletes one early.
UPDATE jobs SET finished_at = until WHERE done <> 0 AND finished_at IS NULL;
