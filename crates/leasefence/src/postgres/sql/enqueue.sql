-- $1 id, $2 payload, $3 priority, $4 not_before, $5 max_attempts.
-- Inserts only an unknown id; a known id keeps its row untouched (never an upsert). A purged
-- id starts from its fence floor, so no fence number is ever handed out twice.
INSERT INTO jobs (id, fence, payload, priority, not_before, max_attempts)
VALUES ($1, coalesce((SELECT fence FROM fence_floor WHERE id = $1), 0), $2, $3, $4, $5)
ON CONFLICT (id) DO NOTHING
