-- purge: delete finished jobs that finished before a time. Runs inside BEGIN IMMEDIATE,
-- followed in the same transaction by fence_floor.sql for every row it returns.
-- ?1 finished_before. Returns each purged id with its last fence.
-- A job enqueued with a unique key and a window (unique_for) is kept until its window has
-- passed (by the enqueue's clock, as enqueue.sql judges it): it still holds its key, finished
-- or not, and purging it would free the key early.
DELETE FROM jobs WHERE done = 1 AND finished_at < ?1
   AND (unique_for IS NULL
        OR enqueued_at <= (julianday('now') - 2440587.5) * 86400.0 - unique_for)
RETURNING id, fence
