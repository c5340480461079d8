-- audit_log: the operator actions recorded before position ?1 (NULL: from the latest), newest
-- first, at most ?2. Autocommit (a read). The primary key's order.
SELECT seq, at, actor, action, target, result
  FROM audit
 WHERE ?1 IS NULL OR seq < ?1
 ORDER BY seq DESC
 LIMIT ?2
