-- find_jobs: where find_jobs.sql's window ends — the smallest seq among the $2 jobs
-- enqueued just before $1 (NULL: from the newest) — and how many it holds. Inside find_jobs'
-- read transaction. Reads only the seqs.
SELECT min(seq), count(*)
  FROM (SELECT seq FROM jobs WHERE seq < coalesce($1::bigint, 9223372036854775807) ORDER BY seq DESC LIMIT $2::bigint) AS w
