-- schedules: every schedule, by name. A read. By the name's bytes (COLLATE "C"), as SQLite
-- orders text, whatever the database's collation: the scheduler enqueues a slot's runs in this
-- order, and that order decides which of them is claimed first.
SELECT name, cron, tz, queue, kind, payload, priority, max_attempts, created_at, last_slot
  FROM schedules
 ORDER BY name COLLATE "C"
