-- $1 now. Counts by status. The status expression (the placeholder below) is status.sql,
-- spliced in when the store is built.
SELECT status, count(*) FROM (SELECT {status} AS status FROM jobs) AS j GROUP BY status
