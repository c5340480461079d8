-- state: read one row. Autocommit (a read; no transaction of its own).
-- ?1 id.
SELECT id, owner, until, fence, result, done FROM jobs WHERE id = ?1
