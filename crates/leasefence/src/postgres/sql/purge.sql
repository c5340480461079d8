-- purge: delete finished jobs and keep their fence floors. Runs inside purge's transaction,
-- after purgeable.sql and lock_ids.sql.
-- $1 finished_before, $2 the ids to purge (already locked against a concurrent enqueue). One
-- statement: delete, and raise the fence floor of every purged id to its last fence. A
-- re-enqueued id continues from the floor.
WITH purged AS (
    DELETE FROM jobs WHERE done = 1 AND finished_at < $1 AND id = ANY($2)
       AND (unique_for IS NULL
            OR enqueued_at <= extract(epoch FROM clock_timestamp())::float8 - unique_for)
    RETURNING id, fence
), floor AS (
    INSERT INTO fence_floor (id, fence)
    SELECT id, fence FROM purged
    ON CONFLICT (id) DO UPDATE SET fence = greatest(fence_floor.fence, excluded.fence)
)
SELECT count(*) FROM purged
