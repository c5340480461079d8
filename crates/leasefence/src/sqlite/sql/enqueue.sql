-- enqueue / enqueue_many: insert one job. Autocommit for enqueue; inside enqueue_many's
-- BEGIN IMMEDIATE, once per job, for a batch.
-- ?1 id, ?2 payload, ?3 priority, ?4 not_before, ?5 max_attempts.
-- Inserts only an unknown id; a known id keeps its row untouched (never REPLACE). A purged id
-- starts from its fence floor, so no fence number is ever handed out twice, and with no
-- attempts spent: a new life gets its whole budget. enqueued_at: the system clock, in Unix
-- seconds (informational).
INSERT INTO jobs (id, fence, payload, priority, not_before, max_attempts, enqueued_at)
SELECT ?1, f.floor, ?2, ?3, ?4, ?5, (julianday('now') - 2440587.5) * 86400.0
  FROM (SELECT coalesce((SELECT fence FROM fence_floor WHERE id = ?1), 0) AS floor) AS f
 WHERE true
ON CONFLICT (id) DO NOTHING
