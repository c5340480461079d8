-- find_jobs with an id prefix: how many ids find_jobs_by_id.sql's window holds — the first ?4
-- of the prefix's range ?1 ..< ?2 (NULL: no end) after ?3 (NULL: from the start) — and the
-- last of them. Inside find_jobs' read transaction. Reads only the primary key.
SELECT count(*), max(id)
  FROM (SELECT id FROM jobs
         WHERE id >= ?1 AND (?2 IS NULL OR id < ?2) AND (?3 IS NULL OR id > ?3)
         ORDER BY id
         LIMIT ?4)
