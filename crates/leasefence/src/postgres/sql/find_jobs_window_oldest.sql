-- find_jobs, oldest first: where find_jobs_oldest.sql's window ends — the largest seq
-- among the $2 jobs enqueued just after $1 (NULL: from the oldest) — and how many it holds.
-- Inside find_jobs' read transaction. Reads only the seqs.
SELECT max(seq), count(*)
  FROM (SELECT seq FROM jobs WHERE seq > coalesce($1::bigint, -9223372036854775808) ORDER BY seq LIMIT $2::bigint) AS w
