-- overview: the stale writes refused over the ledger's life, and those under a fence whose
-- latest refusal came at or after $1 (an hour before now). Inside the overview's read
-- transaction. The refusals table holds one row per (job, fence, operation), written only
-- when a write is refused: it stays small.
SELECT coalesce(sum(count), 0)::bigint,
       coalesce(sum(CASE WHEN last_at >= $1::float8 THEN count END), 0)::bigint
  FROM refusals
