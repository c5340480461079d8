-- record_audit: appends one operator action to the audit log and returns its position.
-- Autocommit (one statement, its own durable commit). ?1 when, ?2 actor, ?3 action,
-- ?4 target, ?5 result. An operator record, not a lease write: not fenced.
INSERT INTO audit (at, actor, action, target, result)
VALUES (?1, ?2, ?3, ?4, ?5)
RETURNING seq
