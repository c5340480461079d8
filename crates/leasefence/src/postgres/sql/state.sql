-- $1 id.
SELECT id, owner, until, fence, result, done FROM jobs WHERE id = $1
