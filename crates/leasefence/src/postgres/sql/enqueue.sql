-- enqueue / enqueue_many: insert one job. Inside enqueue_many's transaction (enqueue is an
-- enqueue_many of one), after lock_ids.sql has locked the ids' buckets; once per job.
-- $1 id, $2 payload, $3 priority, $4 not_before, $5 max_attempts.
-- Inserts only an unknown id; a known id keeps its row untouched (never an upsert). A purged
-- id starts from its fence floor, so no fence number is ever handed out twice, and with no
-- attempts spent: a new life gets its whole budget. enqueued_at: the database server's
-- clock, in Unix seconds (informational).
INSERT INTO jobs (id, fence, payload, priority, not_before, max_attempts, enqueued_at)
SELECT $1, f.floor, $2, $3, $4, $5::bigint, extract(epoch FROM clock_timestamp())::float8
  FROM (SELECT coalesce((SELECT fence FROM fence_floor WHERE id = $1), 0) AS floor) AS f
ON CONFLICT (id) DO NOTHING
