-- overview: the attempts that ended at or after ?1 (the start of the first minute shown), by
-- minute (its start, in Unix seconds) and outcome. Inside the overview's read transaction.
-- Walks only those attempts (attempts_ended).
SELECT CAST(ended_at / 60 AS INTEGER) * 60 AS minute, outcome, count(*)
  FROM attempts INDEXED BY attempts_ended
 WHERE ended_at IS NOT NULL AND ended_at >= ?1
 GROUP BY 1, 2
