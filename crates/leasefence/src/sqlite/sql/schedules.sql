-- schedules: every schedule, by name. A read.
SELECT name, cron, tz, queue, kind, payload, priority, max_attempts, created_at, last_slot
  FROM schedules
 ORDER BY name
