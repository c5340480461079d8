-- purge and delete (first step): lock the ids' buckets exclusively against enqueues of the
-- same ids (which take them shared, lock_ids_shared.sql). Runs first inside their
-- transaction; the locks are transaction-scoped (released at commit or rollback).
-- Also an enqueue's lock of its unique keys, in a lock space of their own (exclusive: the
-- window of unique_for is checked by a statement that must see every earlier enqueue of the
-- key).
-- $1 the lock space (one per schema, and one for unique keys), $2 the ids (or keys).
-- Without it, under READ COMMITTED an enqueue whose snapshot predates a concurrent purge's
-- commit would read no fence floor, wait for the purge to delete the old row, and insert the
-- id from an older floor: a fence handed out again. The enqueue taking the id's lock first,
-- in its own statement, makes its insert's snapshot see the purge's floor. Keys in a fixed
-- order: no deadlocks between batches.
-- The locks are per bucket of ids (256 of them, by hash: `& 255`), not per id: a transaction
-- can hold only so many locks (PostgreSQL's shared lock table, sized by
-- max_locks_per_transaction), and one lock per id made an enqueue_many of 20,000 jobs fail
-- with "out of shared memory". Ids sharing a bucket only wait for each other.
SELECT pg_advisory_xact_lock(hashtext($1), k)
  FROM (SELECT DISTINCT hashtext(id) & 255 AS k FROM unnest($2::text[]) AS id ORDER BY 1) AS keys
