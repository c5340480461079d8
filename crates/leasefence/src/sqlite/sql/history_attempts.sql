-- history (first step): a job's attempts, oldest first. Inside history's read transaction
-- (BEGIN, deferred), with history_refusals.sql, so both see one snapshot.
-- ?1 id.
SELECT fence, owner, claimed_at, ended_at, outcome, error
  FROM attempts
 WHERE job_id = ?1
 ORDER BY fence
