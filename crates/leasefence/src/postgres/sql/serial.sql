-- serial: no parallel workers for the rest of this transaction. First in the read transaction
-- of queues (and so stats) and of the overview. Their branches each read a partial index of a
-- few hundred entries, but the planner, which keeps no statistics of the partial indexes'
-- rows (done, owner and until are correlated), expects tens of thousands and would start
-- workers that cost more than the reads.
SET LOCAL max_parallel_workers_per_gather = 0
