-- migrate (second step): the columns of an existing `jobs` table in the store's schema (none
-- when there is no such table), checked against the contract's six before anything is
-- created or altered. Inside migrate's transaction, after migrate_lock.sql.
-- $1 the schema.
SELECT column_name::text FROM information_schema.columns
 WHERE table_schema = $1 AND table_name = 'jobs'
