-- release: give a lease back early. Inside a group commit's BEGIN IMMEDIATE (sqlite/group.rs:
-- with other stores' single writes, or alone), followed by refuse.sql when it changed nothing.
-- ?1 id, ?2 owner, ?3 fence. The fence is kept, so token numbers are never reused.
UPDATE jobs
   SET owner = NULL, until = 0, attempts = max(attempts - 1, 0)
 WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0
