-- Periodic jobs: one row per schedule. Purely additive. The scheduler (whoever holds the lease
-- on the job `leasefence.scheduler`) enqueues each run as the job `NAME@<slot>`, advancing
-- last_slot in the same transaction as its fence check: a slot at or before last_slot is never
-- enqueued again, whoever ticks.
CREATE TABLE IF NOT EXISTS schedules (
    name         TEXT PRIMARY KEY,
    -- The cron expression as given, and the IANA time zone it is read in.
    cron         TEXT NOT NULL,
    tz           TEXT NOT NULL,
    -- The job each run enqueues.
    queue        TEXT NOT NULL,
    kind         TEXT,
    payload      BLOB,
    priority     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL,
    -- Unix seconds of the last slot enqueued (at first: of the creation, so no slot before
    -- it runs).
    last_slot    INTEGER NOT NULL
) WITHOUT ROWID;
