-- schedule_remove: an operator verb (not fenced). Removes a schedule; the runs it enqueued
-- stay. Its own implicit transaction. ?1 name.
DELETE FROM schedules WHERE name = ?1
