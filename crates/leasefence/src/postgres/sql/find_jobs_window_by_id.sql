-- find_jobs with an id prefix: how many ids find_jobs_by_id.sql's window holds — the first $4
-- of the prefix's range $1 ..< $2 (NULL: no end) after $3 (NULL: from the start) — and the
-- last of them. Inside find_jobs' read transaction. Reads only jobs_id_bytes.
SELECT count(*), max(id COLLATE "C")
  FROM (SELECT id FROM jobs
         WHERE id COLLATE "C" >= $1::text AND ($2::text IS NULL OR id COLLATE "C" < $2::text)
           AND ($3::text IS NULL OR id COLLATE "C" > $3::text)
         ORDER BY id COLLATE "C"
         LIMIT $4::bigint) AS w
