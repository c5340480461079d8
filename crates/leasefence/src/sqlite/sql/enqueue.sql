-- ?1 id. Inserts only an unknown id; a known id keeps its row untouched (never REPLACE).
INSERT INTO jobs (id) VALUES (?1) ON CONFLICT (id) DO NOTHING
