-- analyze_jobs: refresh the planner's statistics of `jobs`, after an enqueue_jobs call that
-- inserted more rows than planner_rows.sql said the table held. On its own, outside any
-- transaction of the store's. Reads a sample; blocks no reader or writer.
ANALYZE jobs
