-- renew_batch: many renewals in one statement, its own implicit transaction.
-- $1 ids, $2 owners, $3 fences, $4 now, $5 new until (now + ttl), $6 how many times the caller
-- passed each: one array element per lease, at most one element per (id, owner, fence). Each
-- element is judged exactly as renew.sql judges one renew: only the current owner and fence,
-- on an unfinished job, while the lease is live (until > now). One statement, one round trip,
-- one commit. The refused elements are counted in the ledger by the same statement
-- (`refused`, per job, fence and operation), as many times as the caller passed them.
-- Returns the 1-based positions renewed.
WITH renewed AS (
    UPDATE jobs AS j
       SET until = $5
      FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS r(id, owner, fence, k)
     WHERE j.id = r.id AND j.owner = r.owner AND j.fence = r.fence AND j.done = 0
       AND j.until > $4
    RETURNING r.k),
refused AS (
    INSERT INTO refusals (job_id, fence, op, count, last_at)
    SELECT r.id, r.fence, 'renew', sum(r.times), extract(epoch FROM clock_timestamp())
      FROM unnest($1::text[], $3::bigint[], $6::bigint[]) WITH ORDINALITY AS r(id, fence, times, k)
     WHERE r.k NOT IN (SELECT k FROM renewed)
       AND EXISTS (SELECT 1 FROM jobs WHERE jobs.id = r.id)
     GROUP BY r.id, r.fence
        ON CONFLICT (job_id, fence, op) DO UPDATE
       SET count = refusals.count + EXCLUDED.count, last_at = EXCLUDED.last_at)
SELECT k FROM renewed
