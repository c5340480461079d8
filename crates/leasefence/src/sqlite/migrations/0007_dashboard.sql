-- What the operator's views read without walking every job: counts kept by triggers, indexes
-- that hold only the jobs of one changing status, and the audit log of operator actions.
--
-- job_counts: the jobs of each queue by class, kept by the triggers below inside the
-- statement that inserts, finishes, revives or deletes a job, so no write path can miss one.
-- The class is the status a job keeps whatever the clock says: 'done', 'dead' or 'cancelled'
-- for a finished job, 'unfinished' for the rest, whose status at a given now (ready,
-- scheduled, leased, expired, retrying, dead) queues.sql works out from the indexes below.
-- Filled from the jobs once, when it is empty.
CREATE TABLE IF NOT EXISTS job_counts (
    queue TEXT NOT NULL,
    class TEXT NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, class)
) WITHOUT ROWID;
INSERT INTO job_counts (queue, class, n)
SELECT queue,
       CASE WHEN done = 0 THEN 'unfinished' WHEN outcome = 'dead' THEN 'dead'
            WHEN outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END,
       count(*)
  FROM jobs
 WHERE NOT EXISTS (SELECT 1 FROM job_counts)
 GROUP BY 1, 2;
CREATE TRIGGER IF NOT EXISTS job_counts_insert AFTER INSERT ON jobs
BEGIN
    INSERT INTO job_counts (queue, class, n)
    VALUES (NEW.queue,
            CASE WHEN NEW.done = 0 THEN 'unfinished' WHEN NEW.outcome = 'dead' THEN 'dead'
                 WHEN NEW.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END,
            1)
    ON CONFLICT (queue, class) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS job_counts_delete AFTER DELETE ON jobs
BEGIN
    UPDATE job_counts SET n = n - 1
     WHERE queue = OLD.queue
       AND class = (CASE WHEN OLD.done = 0 THEN 'unfinished' WHEN OLD.outcome = 'dead' THEN 'dead'
                         WHEN OLD.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END);
END;
-- A job that changed class (finished, or revived by retry) or queue: out of the old one, into
-- the new.
CREATE TRIGGER IF NOT EXISTS job_counts_update AFTER UPDATE OF done, outcome, queue ON jobs
 WHEN OLD.queue IS NOT NEW.queue
   OR (CASE WHEN OLD.done = 0 THEN 'unfinished' WHEN OLD.outcome = 'dead' THEN 'dead'
            WHEN OLD.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END)
   <> (CASE WHEN NEW.done = 0 THEN 'unfinished' WHEN NEW.outcome = 'dead' THEN 'dead'
            WHEN NEW.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END)
BEGIN
    UPDATE job_counts SET n = n - 1
     WHERE queue = OLD.queue
       AND class = (CASE WHEN OLD.done = 0 THEN 'unfinished' WHEN OLD.outcome = 'dead' THEN 'dead'
                         WHEN OLD.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END);
    INSERT INTO job_counts (queue, class, n)
    VALUES (NEW.queue,
            CASE WHEN NEW.done = 0 THEN 'unfinished' WHEN NEW.outcome = 'dead' THEN 'dead'
                 WHEN NEW.outcome = 'cancelled' THEN 'cancelled' ELSE 'done' END,
            1)
    ON CONFLICT (queue, class) DO UPDATE SET n = n + 1;
END;
-- jobs_held and jobs_delayed carry every column queues.sql tests (those of their WHERE too:
-- SQLite reads a partial index alone only when it holds every column the query names), so the
-- counts read no row; jobs_retrying, whose rows hold errors, carries the small ones.
--
-- (A statement inside a trigger never ends in `END;`: the migration runner takes that for the
-- trigger's own end. Hence the parentheses around the CASEs above.)
--
-- Unfinished jobs that hold or held a lease (an owner, or a lease end other than the 0 of a
-- job never claimed or given back since): the leased ones (until > now), the expired ones,
-- and the leases that end soon.
CREATE INDEX IF NOT EXISTS jobs_held ON jobs (until, queue, owner, max_attempts, attempts, done)
 WHERE done = 0 AND (owner IS NOT NULL OR until <> 0);
-- Unfinished jobs waiting for a retry after a failure.
CREATE INDEX IF NOT EXISTS jobs_retrying ON jobs (queue, until, max_attempts, attempts)
 WHERE done = 0 AND owner IS NULL AND error IS NOT NULL;
-- Unfinished, never-failed jobs enqueued with a not-before time: the scheduled ones are those
-- whose time is still to come.
CREATE INDEX IF NOT EXISTS jobs_delayed ON jobs
 (not_before, queue, until, max_attempts, attempts, done, owner, error)
 WHERE done = 0 AND owner IS NULL AND error IS NULL AND not_before > 0;
-- Unfinished jobs without an owner or an error (ready, or scheduled) by enqueue time: the
-- oldest ready one is near the front. (Not on all unfinished jobs: the planners took such an
-- index for the claims, instead of jobs_ready and its order, and for the leases, instead of
-- jobs_held.)
CREATE INDEX IF NOT EXISTS jobs_open ON jobs (enqueued_at)
 WHERE done = 0 AND owner IS NULL AND error IS NULL;
-- The attempts that ended, by when: the throughput of the last minutes.
CREATE INDEX IF NOT EXISTS attempts_ended ON attempts (ended_at) WHERE ended_at IS NOT NULL;
-- Operator actions (the dashboard's cancel, retry, delete, release, pause, resume, …): who
-- did what to which job or queue, when (Unix seconds), and what came of it. Only added to.
CREATE TABLE IF NOT EXISTS audit (
    seq    INTEGER PRIMARY KEY,
    at     REAL NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    result TEXT NOT NULL
);
