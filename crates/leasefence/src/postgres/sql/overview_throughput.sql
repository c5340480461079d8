-- overview: the attempts that ended at or after $1 (the start of the first minute shown), by
-- minute (its start, in Unix seconds) and outcome. Inside the overview's read transaction.
-- Walks only those attempts (attempts_ended).
SELECT (floor(ended_at / 60) * 60)::bigint AS minute, outcome, count(*)
  FROM attempts
 WHERE ended_at IS NOT NULL AND ended_at >= $1::float8
 GROUP BY 1, 2
