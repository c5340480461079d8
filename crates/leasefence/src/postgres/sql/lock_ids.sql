-- enqueue_many and purge (first step): serialise them per job id. Runs first inside their
-- transaction; the locks are transaction-scoped (released at commit or rollback).
-- $1 the lock space (one per schema), $2 the ids.
-- Without it, under READ COMMITTED an enqueue whose snapshot predates a concurrent purge's
-- commit would read no fence floor, wait for the purge to delete the old row, and insert the
-- id from an older floor: a fence handed out again. Taking the id's lock first, in its own
-- statement, makes the insert's snapshot see the purge's floor. Keys in a fixed order: no
-- deadlocks between batches.
-- The locks are per bucket of ids (256 of them, by hash: `& 255`), not per id: a transaction
-- can hold only so many locks (PostgreSQL's shared lock table, sized by
-- max_locks_per_transaction), and one lock per id made an enqueue_many of 20,000 jobs fail
-- with "out of shared memory". Ids sharing a bucket only wait for each other.
SELECT pg_advisory_xact_lock(hashtext($1), k)
  FROM (SELECT DISTINCT hashtext(id) & 255 AS k FROM unnest($2::text[]) AS id ORDER BY 1) AS keys
