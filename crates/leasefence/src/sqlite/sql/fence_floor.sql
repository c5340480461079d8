-- purge (second step): keep a purged id's last fence as its floor, so an id enqueued again
-- continues above every fence it ever had. Runs inside purge's BEGIN IMMEDIATE, once per
-- purged row.
-- ?1 id, ?2 its last fence.
INSERT INTO fence_floor (id, fence) VALUES (?1, ?2)
ON CONFLICT (id) DO UPDATE SET fence = max(fence, excluded.fence)
