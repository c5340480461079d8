-- Every pooled connection, once, when it is opened (its own implicit transaction): the store's
-- schema on the search path, durable commits, and how long a statement waits for a row lock
-- before it fails (Error::Busy).
-- $1 the schema (a validated lower-case identifier), $2 the lock timeout in milliseconds.
SELECT set_config('search_path', $1, false),
       set_config('synchronous_commit', 'on', false),
       set_config('lock_timeout', $2, false)
