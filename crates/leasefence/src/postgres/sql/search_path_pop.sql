-- search_path_pop: give the caller's transaction its search_path back after enqueue_in.
-- Inside the caller's transaction. $1 the search_path search_path_push.sql returned.
SELECT set_config('search_path', $1, true)
