-- migrate (first step): serialise concurrent first starts on one schema, and name the schema
-- for migrate_schema.sql. Runs first inside migrate's transaction; both settings end with it.
-- $1 the lock key (one per schema), $2 the schema.
SELECT pg_advisory_xact_lock(hashtext($1)::bigint), set_config('leasefence.schema', $2, true)
