-- complete_batch: store the results of many leases in one statement, each judged exactly as
-- complete.sql judges one. Inside a group commit's BEGIN IMMEDIATE (sqlite/group.rs: with other
-- stores' writes, or alone), or one of its own when the store does not group its commits; in
-- that same transaction refuse.sql then counts every completion it did not store.
-- ?1 a JSON array of [id, owner, fence, result] (each (id, owner, fence) once), ?2 now.
-- Only the current owner and fence, on an unfinished job, while the lease is live (until > now).
-- One statement rather than complete.sql once per completion: inside a transaction, each
-- statement whose triggers write journals the pages it changes anew (the statement journal)
-- and starts its trigger programs anew, which cost more than the updates themselves.
-- RETURNING names the completions stored: (id, owner, fence) is one completion of the array.
UPDATE jobs
   SET result = c.value ->> 3, done = 1, outcome = 'completed', finished_at = ?2
  FROM json_each(?1) AS c
 WHERE jobs.id = c.value ->> 0 AND jobs.owner = c.value ->> 1 AND jobs.fence = c.value ->> 2
   AND jobs.done = 0 AND jobs.until > ?2
RETURNING id, owner, fence
