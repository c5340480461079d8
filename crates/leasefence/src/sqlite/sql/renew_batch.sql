-- renew_batch: run once per lease, all inside the one BEGIN IMMEDIATE transaction that
-- SqliteStore::renew_batch opens and commits, so an error renews none of them.
-- ?1 id, ?2 owner, ?3 fence, ?4 now, ?5 new until (now + ttl).
-- Judged exactly as renew.sql: only the current owner and fence, on an unfinished job, while
-- the lease is live (until > now).
UPDATE jobs
   SET until = ?5
 WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0 AND until > ?4
