-- watch: subscribe the watch's own connection to the wake-ups of enqueue, retry and resume
-- (notify.sql). Run once when the watch opens; the session keeps listening until it closes.
LISTEN leasefence_jobs
