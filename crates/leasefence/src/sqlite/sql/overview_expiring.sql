-- overview: how many live leases held by a worker end within ?2 seconds of now. Inside the overview's read
-- transaction (one snapshot with queues.sql). ?1 now, ?2 how far ahead.
-- Walks only the held leases (jobs_held): never every job.
SELECT count(*)
  FROM jobs INDEXED BY jobs_held
 WHERE done = 0 AND (owner IS NOT NULL OR until <> 0)
   AND owner IS NOT NULL AND until > ?1 AND until <= ?1 + ?2
