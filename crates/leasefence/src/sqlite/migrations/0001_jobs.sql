-- The contract's table. The six columns keep these names, types and defaults so that a stock
-- sqlite3 shell can read them. IF NOT EXISTS: running init again (a worker restart) never
-- resets a row, above all never a fence.
CREATE TABLE IF NOT EXISTS jobs (
    id     TEXT PRIMARY KEY,
    owner  TEXT,
    until  REAL NOT NULL DEFAULT 0,
    fence  INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    done   INTEGER NOT NULL DEFAULT 0
);
