-- state: read one row. One statement, its own implicit transaction.
-- $1 id.
SELECT id, owner, until, fence, result, done FROM jobs WHERE id = $1
