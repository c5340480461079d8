-- enqueue (first step): the ids' bucket locks of lock_ids.sql, taken shared. Enqueues do not
-- need to exclude one another by id — the insert's ON CONFLICT (id) settles two of the same
-- id — only a purge or delete of the id, which takes the same buckets exclusively
-- (lock_ids.sql): an enqueue waits for such a purge to commit, so that its insert, a statement
-- of its own after this one, sees the purge's fence floor, and a purge waits for the enqueues
-- under way. Shared, a batch of thousands of ids (which takes nearly every bucket) or a
-- producer stalled inside its transaction holds up no other enqueue, only purges and deletes.
-- $1 the lock space of the ids (one per schema), $2 the ids. Keys in a fixed order.
SELECT pg_advisory_xact_lock_shared(hashtext($1), k)
  FROM (SELECT DISTINCT hashtext(id) & 255 AS k FROM unnest($2::text[]) AS id ORDER BY 1) AS keys
