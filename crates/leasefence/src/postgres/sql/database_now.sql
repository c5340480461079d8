-- database_now: the database's clock, seconds since the Unix epoch on the server (what every
-- operation judges by with PgOptions::database_clock). One statement (a read).
SELECT extract(epoch FROM clock_timestamp())::float8
