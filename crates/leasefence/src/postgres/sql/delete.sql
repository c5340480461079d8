-- delete: remove jobs by id, finished or not (an operator verb, not fenced), and keep their
-- fence floors. Runs inside delete's transaction, after lock_ids.sql (the ids' buckets are
-- locked against a concurrent enqueue, as for purge).
-- $1 the ids. One statement: delete, and raise the fence floor of every deleted id to its
-- last fence, so an id enqueued again continues above every fence it had; a holder of a
-- deleted job's lease can store nothing (no row matches). Returns the ids deleted.
WITH deleted AS (
    DELETE FROM jobs WHERE id = ANY($1::text[])
    RETURNING id, fence
), floor AS (
    INSERT INTO fence_floor (id, fence)
    SELECT id, fence FROM deleted
    ON CONFLICT (id) DO UPDATE SET fence = greatest(fence_floor.fence, excluded.fence)
)
SELECT id FROM deleted
