-- $1 now, $2 status name or NULL for all, $3 limit. Oldest first. The status expression (the
-- placeholder below) is status.sql, spliced in when the store is built.
SELECT id, owner, until, fence, result, done, payload, priority, not_before, max_attempts,
       error, finished_at, status
  FROM (SELECT *, {status} AS status FROM jobs) AS j
 WHERE $2::text IS NULL OR status = $2::text
 ORDER BY seq
 LIMIT $3
