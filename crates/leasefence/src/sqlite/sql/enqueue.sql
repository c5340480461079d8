-- enqueue / enqueue_jobs: insert one job. For enqueue, inside a group commit's BEGIN
-- IMMEDIATE (sqlite/group.rs: with other stores' single writes, or alone); inside
-- enqueue_jobs' BEGIN IMMEDIATE, once per job, for a batch (followed by enqueue_match.sql when
-- nothing was inserted).
-- ?1 id, ?2 payload, ?3 priority, ?4 not_before, ?5 max_attempts, ?6 queue, ?7 kind,
-- ?8 unique key, ?9 uniqueness window in seconds (NULL: while unfinished only).
-- Inserts only an unknown id; a known id keeps its row untouched (never REPLACE). A purged id
-- starts from its fence floor, so no fence number is ever handed out twice, and with no
-- attempts spent: a new life gets its whole budget. enqueued_at: the system clock, in Unix
-- seconds. ON CONFLICT DO NOTHING names no column: it also covers the jobs_unique index, so a
-- unique key held by an unfinished job of the queue inserts nothing — the constraint decides,
-- inside the insert. The window of ?9 is checked in the same statement, under the write lock
-- every SQLite writer takes, so no concurrent enqueue can slip between check and insert.
INSERT INTO jobs (id, fence, payload, priority, not_before, max_attempts, enqueued_at, queue,
                  kind, unique_key, unique_for)
SELECT ?1, f.floor, ?2, ?3, ?4, ?5, f.now, ?6, ?7, ?8, ?9
  FROM (SELECT coalesce((SELECT fence FROM fence_floor WHERE id = ?1), 0) AS floor,
               (julianday('now') - 2440587.5) * 86400.0 AS now) AS f
 WHERE ?9 IS NULL
    OR NOT EXISTS (SELECT 1 FROM jobs AS o
                    WHERE o.queue = ?6 AND o.unique_key = ?8 AND o.enqueued_at > f.now - ?9)
ON CONFLICT DO NOTHING
