-- resume: let a paused queue hand out jobs again (an operator verb, not fenced). One
-- statement. $1 queue. A queue that is not paused changes nothing (0 rows).
UPDATE queues SET paused = false WHERE name = $1 AND paused
