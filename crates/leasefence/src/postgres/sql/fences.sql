-- fences: the fence gate's resources in the byte order of their names (as SQLite's), after $1
-- (NULL: from the first), at most $2, each with the highest fence admitted for it. One
-- statement (a read). Byte order whatever the database's collation (en_US or an ICU locale put
-- `a` before `B` and may ignore `-`), so that the keyset and the order agree on every backend;
-- the primary key's index is in the database's collation, so a page reads every resource (a
-- top-N sort: milliseconds for thousands of resources, an operator's view).
SELECT resource, fence
  FROM fence_gate
 WHERE $1::text IS NULL OR resource COLLATE "C" > $1::text COLLATE "C"
 ORDER BY resource COLLATE "C"
 LIMIT $2::bigint
