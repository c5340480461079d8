-- complete: store the result under the current lease. For complete, inside a group commit's
-- BEGIN IMMEDIATE (sqlite/group.rs: with other stores' single writes, or alone); inside one
-- BEGIN IMMEDIATE for complete_with (with the caller's writes). complete_batch judges its
-- completions the same way in one statement: complete_batch.sql. Followed by refuse.sql when
-- it changed nothing.
-- ?1 id, ?2 owner, ?3 fence, ?4 now, ?5 result.
-- Only the current owner and fence, on an unfinished job, while the lease is live (until > now).
UPDATE jobs
   SET result = ?5, done = 1, outcome = 'completed', finished_at = ?4
 WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0 AND until > ?4
