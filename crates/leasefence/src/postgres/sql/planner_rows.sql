-- planner_rows: how many rows PostgreSQL's planner believes `jobs` holds (pg_class.reltuples:
-- -1 before the table was first analyzed or vacuumed). On its own, after a large
-- enqueue_jobs has committed (see analyze_jobs.sql).
SELECT reltuples::float8 FROM pg_class WHERE oid = 'jobs'::regclass
