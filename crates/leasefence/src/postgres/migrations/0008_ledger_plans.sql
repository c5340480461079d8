-- The attempt ledger's trigger (0005_ledger.sql) reads and writes one job's attempts at a
-- time, by the primary key. PL/pgSQL keeps each statement's plan for the session, and after
-- five calls may settle on a generic plan costed against the statistics of the moment: if
-- `attempts` was analyzed while it held a handful of rows (a fresh schema, autovacuum's
-- first pass), that plan is a sequential scan, and every claim and completion then walks
-- the whole ledger until the table is analyzed again. Measured on a fresh schema: a batch of
-- 64 completions went from 2 ms to 36 ms within 300 batches, 1,800 jobs/s against 10,500
-- without sequential scans. Each of the trigger's statements reads one job's rows, so an
-- index is right at every size: the function plans without sequential scans.
ALTER FUNCTION leasefence_ledger() SET enable_seqscan = off;
