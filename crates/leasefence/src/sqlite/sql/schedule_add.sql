-- schedule_add: an operator verb (not fenced). Adds a schedule unless one of that name exists;
-- a known name is left exactly as it was. Its own implicit transaction.
-- ?1 name, ?2 cron, ?3 tz, ?4 queue, ?5 kind, ?6 payload, ?7 priority, ?8 max_attempts,
-- ?9 now, ?10 first last_slot (now, in whole seconds: only the slots after it run).
INSERT INTO schedules (name, cron, tz, queue, kind, payload, priority, max_attempts,
                       created_at, last_slot)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
    ON CONFLICT (name) DO NOTHING
