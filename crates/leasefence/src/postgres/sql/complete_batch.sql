-- complete_batch: many completions in one statement, its own implicit transaction.
-- $1 ids, $2 owners, $3 fences, $4 now, $5 results, $6 how many times the caller passed each:
-- one array element per completion, at most one element per (id, owner, fence). Each element
-- is judged exactly as complete.sql judges one completion; one statement, one round trip, one
-- commit. The refused elements are counted in the ledger by the same statement (`refused`,
-- per job, fence and operation), as many times as the caller passed them, and so are the
-- repeats of a stored one (judged one after another, a repeat finds the job done). Returns
-- the 1-based positions stored. The elements with nothing refused are dropped before the
-- refusals look their jobs up: a batch stored whole looks up none (measured: 5-8 % more jobs
-- a second through claim_batch -> complete_batch, probes/pg-batch.sh).
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
    SELECT c.id, c.fence, 'complete', sum(c.refused), extract(epoch FROM clock_timestamp())
      FROM (SELECT u.id, u.fence,
                   u.times - CASE WHEN u.k IN (SELECT k FROM stored) THEN 1 ELSE 0 END
              FROM unnest($1::text[], $3::bigint[], $6::bigint[])
                   WITH ORDINALITY AS u(id, fence, times, k)) AS c(id, fence, refused)
     WHERE c.refused > 0 AND EXISTS (SELECT 1 FROM jobs WHERE jobs.id = c.id)
     GROUP BY c.id, c.fence
        ON CONFLICT (job_id, fence, op) DO UPDATE
       SET count = refusals.count + EXCLUDED.count, last_at = EXCLUDED.last_at)
SELECT k FROM stored
