-- complete_batch: many completions in one statement, its own implicit transaction.
-- $1 ids, $2 owners, $3 fences, $4 now, $5 results, $6 how many times the caller passed each:
-- one array element per completion, at most one element per (id, owner, fence). Each element
-- is judged exactly as complete.sql judges one completion; one statement, one round trip, one
-- commit. The refused elements are counted in the ledger by the same statement (`refused`,
-- per job, fence and operation), as many times as the caller passed them, and so are the
-- repeats of a stored one (judged one after another, a repeat finds the job done). Returns
-- the 1-based positions stored.
WITH stored AS (
    UPDATE jobs AS j
       SET result = c.result, done = 1, outcome = 'completed', finished_at = $4
      FROM unnest($1::text[], $2::text[], $3::bigint[], $5::text[])
           WITH ORDINALITY AS c(id, owner, fence, result, k)
     WHERE j.id = c.id AND j.owner = c.owner AND j.fence = c.fence AND j.done = 0
       AND j.until > $4
    RETURNING c.k),
refused AS (
    INSERT INTO refusals (job_id, fence, op, count, last_at)
    SELECT c.id, c.fence, 'complete',
           sum(c.times - CASE WHEN c.k IN (SELECT k FROM stored) THEN 1 ELSE 0 END),
           extract(epoch FROM clock_timestamp())
      FROM unnest($1::text[], $3::bigint[], $6::bigint[]) WITH ORDINALITY AS c(id, fence, times, k)
     WHERE EXISTS (SELECT 1 FROM jobs WHERE jobs.id = c.id)
     GROUP BY c.id, c.fence
    HAVING sum(c.times - CASE WHEN c.k IN (SELECT k FROM stored) THEN 1 ELSE 0 END) > 0
        ON CONFLICT (job_id, fence, op) DO UPDATE
       SET count = refusals.count + EXCLUDED.count, last_at = EXCLUDED.last_at)
SELECT k FROM stored
