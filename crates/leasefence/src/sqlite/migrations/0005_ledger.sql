-- The attempt ledger: a row per claim, that is per fence handed out, with who held it, when it
-- was claimed and ended (by the system clock of the writing host, in Unix seconds, like
-- enqueued_at: informational, as leases are judged by the clock the caller passes) and how it
-- ended. The triggers below write it inside the statement that changed the job, so every
-- write path keeps it (claims, complete, fail, release, cancel, the bury of an expired last
-- attempt, complete_with) and none can skip it. outcome is NULL while the attempt is open:
-- completed, failed, timed out (a failure the worker's time limit wrote: its error starts with
-- `timed out after `, case and all), released, lost (its lease expired, found when the job
-- was claimed again, buried or retried) or cancelled. Kept across retry; removed with its job
-- by delete and purge.
CREATE TABLE IF NOT EXISTS attempts (
    job_id     TEXT NOT NULL,
    fence      INTEGER NOT NULL,
    owner      TEXT NOT NULL,
    claimed_at REAL,
    ended_at   REAL,
    outcome    TEXT,
    error      TEXT,
    PRIMARY KEY (job_id, fence)
) WITHOUT ROWID;
-- The refused writes (renew, complete, fail, release) per job and the fence that tried, with
-- how many and when the last one came: written by refuse.sql in the refused write's own
-- transaction. Removed with its job by delete and purge.
CREATE TABLE IF NOT EXISTS refusals (
    job_id  TEXT NOT NULL,
    fence   INTEGER NOT NULL,
    op      TEXT NOT NULL,
    count   INTEGER NOT NULL,
    last_at REAL NOT NULL,
    PRIMARY KEY (job_id, fence, op)
) WITHOUT ROWID;
-- Leases held when the ledger arrives get an open attempt (claimed at an unknown time), so
-- their end is recorded too.
INSERT OR IGNORE INTO attempts (job_id, fence, owner)
SELECT id, fence, owner FROM jobs WHERE done = 0 AND owner IS NOT NULL;
-- A claim (the fence raised, an owner set): the attempt still open (only a job that still
-- names an owner has one), whose lease expired unwritten, is lost, and the new one opens. A
-- plain INSERT: a fence handed out twice for a job would fail it.
CREATE TRIGGER IF NOT EXISTS attempts_claim AFTER UPDATE OF fence ON jobs
 WHEN NEW.fence > OLD.fence AND NEW.owner IS NOT NULL
BEGIN
    UPDATE attempts
       SET outcome = 'lost', ended_at = (julianday('now') - 2440587.5) * 86400.0
     WHERE OLD.owner IS NOT NULL AND job_id = NEW.id AND outcome IS NULL;
    INSERT INTO attempts (job_id, fence, owner, claimed_at)
    VALUES (NEW.id, NEW.fence, NEW.owner, (julianday('now') - 2440587.5) * 86400.0);
END;
-- The end of a held lease under the same fence: the job finished (complete, cancel, a dead
-- fail, bury) or gave its lease up (fail, release). Release is the one that refunds the
-- attempt. A dead job that still names its owner was buried: its last lease expired, lost.
CREATE TRIGGER IF NOT EXISTS attempts_end AFTER UPDATE OF owner, done ON jobs
 WHEN NEW.fence = OLD.fence AND OLD.owner IS NOT NULL AND OLD.done = 0
  AND (NEW.done = 1 OR NEW.owner IS NULL)
BEGIN
    UPDATE attempts
       SET ended_at = (julianday('now') - 2440587.5) * 86400.0,
           outcome = CASE
               WHEN NEW.done = 1 AND NEW.outcome IN ('completed', 'cancelled') THEN NEW.outcome
               WHEN NEW.owner IS NOT NULL THEN 'lost'
               WHEN NEW.attempts < OLD.attempts THEN 'released'
               WHEN substr(NEW.error, 1, 16) = 'timed out after ' THEN 'timed out'
               ELSE 'failed'
           END,
           error = CASE
               WHEN NEW.owner IS NULL AND NEW.attempts >= OLD.attempts THEN NEW.error
           END
     WHERE job_id = NEW.id AND fence = NEW.fence AND outcome IS NULL;
END;
-- A job deleted (delete, purge): its ledger goes with it.
CREATE TRIGGER IF NOT EXISTS attempts_prune AFTER DELETE ON jobs
BEGIN
    DELETE FROM attempts WHERE job_id = OLD.id;
    DELETE FROM refusals WHERE job_id = OLD.id;
END;
