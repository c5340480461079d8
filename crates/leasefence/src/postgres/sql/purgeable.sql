-- purge (first step): the ids a purge would delete, to lock (lock_ids.sql) before purge.sql
-- deletes them. Runs first inside purge's transaction.
-- $1 finished_before.
-- A job enqueued with a unique key and a window (unique_for) is kept until its window has
-- passed (the server's clock, as enqueue.sql judges it): it still holds its key.
SELECT id FROM jobs WHERE done = 1 AND finished_at < $1
   AND (unique_for IS NULL
        OR enqueued_at <= extract(epoch FROM clock_timestamp())::float8 - unique_for)
