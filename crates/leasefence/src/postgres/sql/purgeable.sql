-- purge (first step): the ids a purge would delete, to lock (lock_ids.sql) before purge.sql
-- deletes them. Runs first inside purge's transaction.
-- $1 finished_before.
SELECT id FROM jobs WHERE done = 1 AND finished_at < $1
