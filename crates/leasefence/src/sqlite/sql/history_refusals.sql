-- history (second step): a job's refused writes per fence and operation, oldest fence first.
-- Inside history's read transaction, after history_attempts.sql.
-- ?1 id.
SELECT fence, op, count, last_at
  FROM refusals
 WHERE job_id = ?1
 ORDER BY fence, op
