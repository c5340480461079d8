-- $1 now. The status of a row at that clock reading; shared by list.sql and stats.sql, and
-- parsed into the Status enum of types.rs.
CASE
    WHEN done <> 0 AND outcome = 'dead' THEN 'dead'
    WHEN done <> 0 AND outcome = 'cancelled' THEN 'cancelled'
    WHEN done <> 0 THEN 'done'
    WHEN until > $1::float8 THEN 'leased'
    WHEN max_attempts > 0 AND fence >= max_attempts THEN 'dead'
    WHEN owner IS NOT NULL THEN 'expired'
    WHEN error IS NOT NULL THEN 'retrying'
    WHEN not_before > $1::float8 THEN 'scheduled'
    ELSE 'ready'
END
