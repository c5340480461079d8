-- The contract's table. The six columns keep their names and defaults; the types are
-- PostgreSQL's nearest: `until` DOUBLE PRECISION (seconds, the caller's clock), `fence` BIGINT,
-- `done` INTEGER (0/1, as on SQLite). IF NOT EXISTS: running init again (a worker restart)
-- never resets a row, above all never a fence.
CREATE TABLE IF NOT EXISTS jobs (
    id     TEXT PRIMARY KEY,
    owner  TEXT,
    until  DOUBLE PRECISION NOT NULL DEFAULT 0,
    fence  BIGINT NOT NULL DEFAULT 0,
    result TEXT,
    done   INTEGER NOT NULL DEFAULT 0
);
