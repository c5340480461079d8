-- search_path_push: put the store's schema first on the caller's transaction's search_path,
-- for enqueue_in's statements. Inside the caller's transaction (set_config's `true`: local
-- to it). $1 the store's schema. Returns the search_path it replaced, for
-- search_path_pop.sql, and the transaction's isolation level (enqueue_in refuses any but
-- READ COMMITTED: see session.sql).
SELECT current_setting('search_path'),
       set_config('search_path', quote_ident($1) || ', ' || current_setting('search_path'), true),
       current_setting('transaction_isolation')
