-- The attempt ledger: a row per claim, that is per fence handed out, with who held it, when it
-- was claimed and ended (by the database server's clock, in Unix seconds, like enqueued_at:
-- informational, as leases are judged by the clock the caller passes) and how it ended. The
-- trigger below writes it inside the statement that changed the job, so every write path
-- keeps it (claims, complete, fail, release, cancel, the bury of an expired last attempt,
-- complete_with) and none can skip it. outcome is NULL while the attempt is open: completed,
-- failed, timed out (a failure the worker's time limit wrote: its error starts with
-- `timed out after `, case and all), released, lost (its lease expired, found when the job
-- was claimed again, buried or retried) or cancelled. Kept across retry; removed with its job
-- by delete and purge.
CREATE TABLE IF NOT EXISTS attempts (
    job_id     TEXT NOT NULL,
    fence      BIGINT NOT NULL,
    owner      TEXT NOT NULL,
    claimed_at DOUBLE PRECISION,
    ended_at   DOUBLE PRECISION,
    outcome    TEXT,
    error      TEXT,
    PRIMARY KEY (job_id, fence)
);
-- The refused writes (renew, complete, fail, release) per job and the fence that tried, with
-- how many and when the last one came: written by the refused write's own statement (the
-- `refused` step of renew.sql, complete.sql, fail.sql, release.sql and their batches).
-- Removed with its job by delete and purge.
CREATE TABLE IF NOT EXISTS refusals (
    job_id  TEXT NOT NULL,
    fence   BIGINT NOT NULL,
    op      TEXT NOT NULL,
    count   BIGINT NOT NULL,
    last_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (job_id, fence, op)
);
-- Leases held when the ledger arrives get an open attempt (claimed at an unknown time), so
-- their end is recorded too.
INSERT INTO attempts (job_id, fence, owner)
SELECT id, fence, owner FROM jobs WHERE done = 0 AND owner IS NOT NULL
ON CONFLICT DO NOTHING;
-- One function for the three events. A claim (the fence raised, an owner set): the attempt
-- still open (only a job that still names an owner has one), whose lease expired unwritten,
-- is lost, and the new one opens (a plain INSERT: a fence handed out twice for a job would
-- fail it). The end of a held lease under the same fence: the job finished (complete, cancel,
-- a dead fail, bury) or gave its lease up (fail, release), release being the one that refunds
-- the attempt. A dead job that still names its owner was buried: its last lease expired,
-- lost. A deleted job takes its ledger along.
-- SET search_path FROM CURRENT: the store's schema, whoever's session fires it.
CREATE OR REPLACE FUNCTION leasefence_ledger() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $ledger$
DECLARE
    clock DOUBLE PRECISION := extract(epoch FROM clock_timestamp());
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM attempts WHERE job_id = OLD.id;
        DELETE FROM refusals WHERE job_id = OLD.id;
    ELSIF NEW.fence > OLD.fence AND NEW.owner IS NOT NULL THEN
        IF OLD.owner IS NOT NULL THEN
            UPDATE attempts SET outcome = 'lost', ended_at = clock
             WHERE job_id = NEW.id AND outcome IS NULL;
        END IF;
        INSERT INTO attempts (job_id, fence, owner, claimed_at)
        VALUES (NEW.id, NEW.fence, NEW.owner, clock);
    ELSIF NEW.fence = OLD.fence AND OLD.owner IS NOT NULL AND OLD.done = 0
          AND (NEW.done = 1 OR NEW.owner IS NULL) THEN
        UPDATE attempts
           SET ended_at = clock,
               outcome = CASE
                   WHEN NEW.done = 1 AND NEW.outcome IN ('completed', 'cancelled')
                       THEN NEW.outcome
                   WHEN NEW.owner IS NOT NULL THEN 'lost'
                   WHEN NEW.attempts < OLD.attempts THEN 'released'
                   WHEN substr(NEW.error, 1, 16) = 'timed out after ' THEN 'timed out'
                   ELSE 'failed'
               END,
               error = CASE
                   WHEN NEW.owner IS NULL AND NEW.attempts >= OLD.attempts THEN NEW.error
               END
         WHERE job_id = NEW.id AND fence = NEW.fence AND outcome IS NULL;
    END IF;
    RETURN NULL;
END
$ledger$;
CREATE OR REPLACE TRIGGER attempts_ledger AFTER UPDATE OF fence, owner, done OR DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION leasefence_ledger();
