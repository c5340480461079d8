-- ?1 finished_before. Two statements in one transaction: first raise the fence floor of every
-- purged id to its last fence, then delete. A re-enqueued id continues from the floor.
INSERT INTO fence_floor (id, fence)
SELECT id, fence FROM jobs WHERE done = 1 AND finished_at < ?1
ON CONFLICT (id) DO UPDATE SET fence = max(fence, excluded.fence);
DELETE FROM jobs WHERE done = 1 AND finished_at < ?1
