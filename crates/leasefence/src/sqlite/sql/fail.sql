-- fail: record a failed attempt under the current lease. Inside a group commit's BEGIN
-- IMMEDIATE (sqlite/group.rs: with other stores' single writes, or alone), followed by
-- refuse.sql when it changed nothing.
-- ?1 id, ?2 owner, ?3 fence, ?4 now, ?5 error, ?6 retry_at.
-- Fenced like complete: only the current owner and fence, unfinished, lease live. Gives the
-- lease up (fence kept) and schedules the retry, or buries the job after its last attempt.
UPDATE jobs
   SET owner = NULL, until = 0, error = ?5,
       not_before = ?6,
       done = (max_attempts > 0 AND attempts >= max_attempts),
       outcome = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN 'dead' END,
       finished_at = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN ?4 END
 WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0 AND until > ?4
RETURNING done
