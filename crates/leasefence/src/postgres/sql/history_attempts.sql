-- history (first step): a job's attempts, oldest first. Inside history's read-only
-- REPEATABLE READ transaction, after state.sql and before history_refusals.sql, so all three
-- see one snapshot.
-- $1 id.
SELECT fence, owner, claimed_at, ended_at, outcome, error
  FROM attempts
 WHERE job_id = $1
 ORDER BY fence
