-- admit: the fence gate of an outside resource. One statement, its own implicit transaction.
-- $1 resource, $2 fence. One statement: admitted only if the fence is at least the highest one
-- already admitted for the resource; the first fence for a resource is always admitted.
INSERT INTO fence_gate (resource, fence) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence
 WHERE excluded.fence >= fence_gate.fence
