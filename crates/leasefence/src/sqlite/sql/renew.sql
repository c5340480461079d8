-- renew: extend a live lease. Autocommit: one statement, one implicit transaction.
-- ?1 id, ?2 owner, ?3 fence, ?4 now, ?5 new until (now + ttl).
-- Only the current owner and fence, on an unfinished job, while the lease is live (until > now).
UPDATE jobs
   SET until = ?5
 WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0 AND until > ?4
