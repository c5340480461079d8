-- notify: wake the watches of this schema (listen.sql) — jobs may be ready. Inside the
-- transaction of enqueue_jobs and retry, after their writes (delivered only if it commits);
-- after retry_dead and resume, on its own. $1 the schema (the payload a watch filters by).
SELECT pg_notify('leasefence_jobs', $1)
