-- purge: delete finished jobs that finished before a time. Runs inside BEGIN IMMEDIATE,
-- followed in the same transaction by fence_floor.sql for every row it returns.
-- ?1 finished_before. Returns each purged id with its last fence.
DELETE FROM jobs WHERE done = 1 AND finished_at < ?1
RETURNING id, fence
