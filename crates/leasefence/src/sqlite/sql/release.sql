-- release: give a lease back early. Autocommit: one statement, one implicit transaction.
-- ?1 id, ?2 owner, ?3 fence. The fence is kept, so token numbers are never reused.
UPDATE jobs
   SET owner = NULL, until = 0, attempts = max(attempts - 1, 0)
 WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0
