-- delete: remove one job by id, finished or not (an operator verb, not fenced). Runs inside
-- delete's BEGIN IMMEDIATE, once per id, followed in the same transaction by fence_floor.sql
-- for the row it returns, so an id enqueued again continues above every fence it had; a
-- holder of its lease can store nothing (no row matches).
-- ?1 id. Returns the deleted job's last fence.
DELETE FROM jobs WHERE id = ?1
RETURNING fence
