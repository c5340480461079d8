-- schedule_advance: move a schedule's last_slot on to the slot being enqueued, only from the
-- last_slot the scheduler read (a compare-and-set: a schedule removed, re-added or advanced
-- since is left alone, and its slot is not enqueued). In enqueue_slots' transaction,
-- after scheduler_check.sql. $1 name, $2 last_slot read, $3 the slot (> $2).
UPDATE schedules SET last_slot = $3
 WHERE name = $1 AND last_slot = $2 AND $3 > $2
