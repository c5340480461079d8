-- renew: extend a live lease. Inside a group commit's BEGIN IMMEDIATE (sqlite/group.rs: with
-- other stores' single writes, or alone), followed by refuse.sql when it changed nothing.
-- ?1 id, ?2 owner, ?3 fence, ?4 now, ?5 new until (now + ttl).
-- Only the current owner and fence, on an unfinished job, while the lease is live (until > now).
UPDATE jobs
   SET until = ?5
 WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0 AND until > ?4
