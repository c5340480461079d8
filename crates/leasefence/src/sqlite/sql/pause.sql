-- pause: stop a queue from handing out jobs (an operator verb, not fenced). Autocommit: one
-- statement. ?1 queue. A queue needs no row until it is paused; pausing an already paused
-- queue changes nothing (0 rows). Leases already held in the queue stay valid: renew,
-- complete, fail and release go on as before.
INSERT INTO queues (name, paused) VALUES (?1, 1)
    ON CONFLICT (name) DO UPDATE SET paused = 1 WHERE paused = 0
