-- pause: stop a queue from handing out jobs (an operator verb, not fenced). One statement.
-- $1 queue. A queue needs no row until it is paused; pausing an already paused queue changes
-- nothing (0 rows). Leases already held in the queue stay valid: renew, complete, fail and
-- release go on as before.
INSERT INTO queues (name, paused) VALUES ($1, true)
    ON CONFLICT (name) DO UPDATE SET paused = true WHERE NOT queues.paused
