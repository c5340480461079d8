-- cancel: stop an unfinished job (operator verb, not fenced). Inside one BEGIN IMMEDIATE, after
-- lose_expired.sql (an attempt whose lease had expired unwritten ends as lost, not cancelled).
-- ?1 id, ?2 now. Any unfinished job; a finished one keeps its result. A holder's later renew,
-- complete or fail is refused (done = 1). The fence is kept.
UPDATE jobs
   SET done = 1, outcome = 'cancelled', finished_at = ?2
 WHERE id = ?1 AND done = 0
