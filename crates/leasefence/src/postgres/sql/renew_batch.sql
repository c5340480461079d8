-- $1 ids, $2 owners, $3 fences, $4 now, $5 new until (now + ttl): one array element per lease,
-- at most one element per (id, owner, fence). Each element is judged exactly as renew.sql
-- judges one renew: only the current owner and fence, on an unfinished job, while the lease is
-- live (until > now). One statement, one round trip, one commit. Returns the 1-based positions
-- renewed.
UPDATE jobs AS j
   SET until = $5
  FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS r(id, owner, fence, k)
 WHERE j.id = r.id AND j.owner = r.owner AND j.fence = r.fence AND j.done = 0 AND j.until > $4
RETURNING r.k
