-- Every pooled connection, once, when it is opened (its own implicit transaction): the store's
-- schema on the search path, durable commits, how long a statement waits for a row lock
-- before it fails (Error::Busy), and READ COMMITTED for every transaction the store begins,
-- whatever the database's or role's default: the per-id locks of lock_ids.sql make an enqueue
-- see a concurrent purge's fence floor only if its insert takes a fresh snapshot after the
-- lock (under REPEATABLE READ it kept the older one, and a purged id came back at fence 0).
-- $1 the schema (a validated lower-case identifier), $2 the lock timeout in milliseconds.
SELECT set_config('search_path', $1, false),
       set_config('synchronous_commit', 'on', false),
       set_config('lock_timeout', $2, false),
       set_config('default_transaction_isolation', 'read committed', false)
