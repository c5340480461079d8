-- migrate (third step): the schema and its record of applied migrations, if absent. Runs
-- inside migrate's transaction, after migrate_lock.sql named the schema (identifiers cannot be
-- bound as parameters, so the name is quoted here by format's %I).
DO $$
BEGIN
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', current_setting('leasefence.schema'));
    EXECUTE format(
        'CREATE TABLE IF NOT EXISTS %I.schema_migrations (
             version    INTEGER PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )',
        current_setting('leasefence.schema'));
END
$$
