-- What the operator's views read without walking every job: counts kept by triggers, indexes
-- that hold only the jobs of one changing status, and the audit log of operator actions.
--
-- job_counts: the jobs of each queue by class, kept by the triggers below inside the
-- statement that inserts, finishes, revives or deletes a job, so no write path can miss one.
-- The class is the status a job keeps whatever the clock says: 'done', 'dead' or 'cancelled'
-- for a finished job, 'unfinished' for the rest, whose status at a given now (ready,
-- scheduled, leased, expired, retrying, dead) queues.sql works out from the indexes below.
-- A queue's count is the sum of its 64 shards: each transaction adds to the shard of its
-- transaction id, so concurrent writers of one queue seldom wait on the same row (and a
-- deadlock between two that do is an ordinary retryable error, nothing changed). Filled from
-- the jobs once, when it is empty: a migration run again (its record lost) counts nothing
-- twice.
CREATE TABLE IF NOT EXISTS job_counts (
    queue TEXT NOT NULL,
    class TEXT NOT NULL,
    shard INTEGER NOT NULL,
    n     BIGINT NOT NULL,
    PRIMARY KEY (queue, class, shard)
);
INSERT INTO job_counts (queue, class, shard, n)
SELECT queue,
       CASE WHEN done = 0 THEN 'unfinished' WHEN outcome = 'dead' THEN 'dead'
            WHEN outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END,
       0, count(*)
  FROM jobs
 WHERE NOT EXISTS (SELECT 1 FROM job_counts)
 GROUP BY 1, 2;
-- One function for the four events: rows inserted or deleted (a statement's transition
-- table, counted in one upsert per queue and class, in key order), a row that changed class
-- or queue (out of the old, into the new), a table emptied.
-- SET search_path FROM CURRENT: the store's schema, whoever's session fires it.
CREATE OR REPLACE FUNCTION leasefence_count_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $counts$
DECLARE
    lf_shard INTEGER := (txid_current() % 64)::INTEGER;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM job_counts;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO job_counts AS c (queue, class, shard, n)
        SELECT j.queue,
               CASE WHEN j.done = 0 THEN 'unfinished' WHEN j.outcome = 'dead' THEN 'dead'
                    WHEN j.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END,
               lf_shard, count(*)
          FROM new_jobs AS j
         GROUP BY 1, 2
         ORDER BY 1, 2
        ON CONFLICT (queue, class, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO job_counts AS c (queue, class, shard, n)
        SELECT j.queue,
               CASE WHEN j.done = 0 THEN 'unfinished' WHEN j.outcome = 'dead' THEN 'dead'
                    WHEN j.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END,
               lf_shard, -count(*)
          FROM old_jobs AS j
         GROUP BY 1, 2
         ORDER BY 1, 2
        ON CONFLICT (queue, class, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSE
        INSERT INTO job_counts AS c (queue, class, shard, n)
        SELECT v.queue, v.class, lf_shard, v.n
          FROM (VALUES
                (OLD.queue,
                 CASE WHEN OLD.done = 0 THEN 'unfinished' WHEN OLD.outcome = 'dead' THEN 'dead'
                      WHEN OLD.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END,
                 -1),
                (NEW.queue,
                 CASE WHEN NEW.done = 0 THEN 'unfinished' WHEN NEW.outcome = 'dead' THEN 'dead'
                      WHEN NEW.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END,
                 1)) AS v (queue, class, n)
         ORDER BY 1, 2
        ON CONFLICT (queue, class, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$counts$;
CREATE OR REPLACE TRIGGER job_counts_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION leasefence_count_jobs();
CREATE OR REPLACE TRIGGER job_counts_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION leasefence_count_jobs();
CREATE OR REPLACE TRIGGER job_counts_truncate AFTER TRUNCATE ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION leasefence_count_jobs();
CREATE OR REPLACE TRIGGER job_counts_update AFTER UPDATE OF done, outcome, queue ON jobs
    FOR EACH ROW
    WHEN (OLD.queue IS DISTINCT FROM NEW.queue
          OR (CASE WHEN OLD.done = 0 THEN 'unfinished' WHEN OLD.outcome = 'dead' THEN 'dead'
                   WHEN OLD.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END)
             IS DISTINCT FROM
             (CASE WHEN NEW.done = 0 THEN 'unfinished' WHEN NEW.outcome = 'dead' THEN 'dead'
                   WHEN NEW.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END))
    EXECUTE FUNCTION leasefence_count_jobs();
-- The three indexes of changing statuses carry the columns queues.sql tests, so it can read
-- the index alone — all but jobs_held's owner: an owner may be long (a 1 MiB one is valid) and
-- an index row holds at most a few kilobytes, so the expired range reads it from the row.
--
-- Unfinished jobs that hold or held a lease (an owner, or a lease end other than the 0 of a
-- job never claimed or given back since): the leased ones (until > now), the expired ones,
-- and the leases that end soon.
CREATE INDEX IF NOT EXISTS jobs_held ON jobs (until) INCLUDE (queue, max_attempts, attempts)
 WHERE done = 0 AND (owner IS NOT NULL OR until <> 0);
-- Unfinished jobs waiting for a retry after a failure.
CREATE INDEX IF NOT EXISTS jobs_retrying ON jobs (queue) INCLUDE (until, max_attempts, attempts)
 WHERE done = 0 AND owner IS NULL AND error IS NOT NULL;
-- Unfinished, never-failed jobs enqueued with a not-before time: the scheduled ones are those
-- whose time is still to come.
CREATE INDEX IF NOT EXISTS jobs_delayed ON jobs (not_before) INCLUDE (queue, until, max_attempts, attempts)
 WHERE done = 0 AND owner IS NULL AND error IS NULL AND not_before > 0;
-- Unfinished jobs without an owner or an error (ready, or scheduled) by enqueue time: the
-- oldest ready one is near the front. (Not on all unfinished jobs: the planners took such an
-- index for the claims, instead of jobs_ready and its order, and for the leases, instead of
-- jobs_held.)
CREATE INDEX IF NOT EXISTS jobs_open ON jobs (enqueued_at)
 WHERE done = 0 AND owner IS NULL AND error IS NULL;
-- Every job in enqueue order: the job search's window (the table has no other index on seq).
CREATE INDEX IF NOT EXISTS jobs_seq ON jobs (seq);
-- Ids compared as bytes (the "C" collation), whatever the database's collation: the job
-- search's id-prefix ranges.
CREATE INDEX IF NOT EXISTS jobs_id_bytes ON jobs (id COLLATE "C");
-- The attempts that ended, by when: the throughput of the last minutes.
CREATE INDEX IF NOT EXISTS attempts_ended ON attempts (ended_at) WHERE ended_at IS NOT NULL;
-- Operator actions (the dashboard's cancel, retry, delete, release, pause, resume, …): who
-- did what to which job or queue, when (Unix seconds), and what came of it. Only added to.
CREATE TABLE IF NOT EXISTS audit (
    seq    BIGSERIAL PRIMARY KEY,
    at     DOUBLE PRECISION NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    result TEXT NOT NULL
);
