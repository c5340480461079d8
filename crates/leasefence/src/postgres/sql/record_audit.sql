-- record_audit: appends one operator action to the audit log and returns its position.
-- One statement (its own durable commit). $1 when, $2 actor, $3 action,
-- $4 target, $5 result. An operator record, not a lease write: not fenced.
INSERT INTO audit (at, actor, action, target, result)
VALUES ($1::float8, $2::text, $3::text, $4::text, $5::text)
RETURNING seq
