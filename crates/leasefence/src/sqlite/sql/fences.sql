-- fences: the fence gate's resources in order, after ?1 (NULL: from the first), at most ?2,
-- each with the highest fence admitted for it. Autocommit (a read). The primary key's order.
SELECT resource, fence
  FROM fence_gate
 WHERE ?1 IS NULL OR resource > ?1
 ORDER BY resource
 LIMIT ?2
