-- complete_batch: many completions in one statement, its own implicit transaction.
-- $1 ids, $2 owners, $3 fences, $4 now, $5 results: one array element per completion, at most
-- one element per (id, owner, fence). Each element is judged exactly as complete.sql judges one
-- completion; one statement, one round trip, one commit. Returns the 1-based positions stored.
UPDATE jobs AS j
   SET result = c.result, done = 1, outcome = 'completed', finished_at = $4
  FROM unnest($1::text[], $2::text[], $3::bigint[], $5::text[])
       WITH ORDINALITY AS c(id, owner, fence, result, k)
 WHERE j.id = c.id AND j.owner = c.owner AND j.fence = c.fence AND j.done = 0 AND j.until > $4
RETURNING c.k
