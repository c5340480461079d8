-- Named queues, kinds and unique keys. Purely additive: every job so far is in the queue
-- `default`, with no kind and no unique key.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS queue TEXT NOT NULL DEFAULT 'default';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS kind TEXT;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS unique_key TEXT;
-- The uniqueness window in seconds (NULL: unique while unfinished only).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS unique_for DOUBLE PRECISION;
-- At most one unfinished job per (queue, unique key): a constraint the insert itself checks
-- (enqueue.sql's ON CONFLICT DO NOTHING waits for a concurrent insert of the same key to
-- commit or roll back), never a check-then-insert. A job leaves the index when it finishes
-- (done = 1), so its key is free again: retry puts it back only when no other unfinished job
-- holds the key.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique ON jobs (queue, unique_key)
 WHERE unique_key IS NOT NULL AND done = 0;
-- The jobs with a unique key by enqueue time: the window of unique_for is looked up here.
CREATE INDEX IF NOT EXISTS jobs_unique_recent ON jobs (queue, unique_key, enqueued_at)
 WHERE unique_key IS NOT NULL;
-- claim_batch_in walks one queue's ready jobs in claim order here, so that serving one queue
-- of many costs what serving a single queue does.
CREATE INDEX IF NOT EXISTS jobs_queue_ready ON jobs (queue, priority DESC, not_before, seq)
 WHERE done = 0;
-- The queues an operator paused (a queue needs no row to exist: one is made when it is first
-- paused). A paused queue hands out nothing: leases already held stay valid.
CREATE TABLE IF NOT EXISTS queues (
    name   TEXT PRIMARY KEY,
    paused BOOLEAN NOT NULL DEFAULT false
);
