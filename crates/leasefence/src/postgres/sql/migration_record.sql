-- migrate: records one applied migration, in the same transaction as the migration itself.
-- $1 its number.
INSERT INTO schema_migrations (version) VALUES ($1)
