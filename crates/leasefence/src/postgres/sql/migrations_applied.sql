-- migrate (fourth step): the highest migration applied so far (0: none). Inside migrate's
-- transaction.
SELECT coalesce(max(version), 0) FROM schema_migrations
