//! The statements, one file each in `sql/`, with the same names as the SQLite backend's for
//! the same operation; each file is exactly the SQL that runs (nothing is spliced or
//! rewritten), and its header says in which transaction. `database_now.sql`, `lock_ids.sql`,
//! `purgeable.sql`, `session.sql`, `listen.sql`, `notify.sql`, `search_path_*.sql`,
//! `planner_rows.sql`, `analyze_jobs.sql` and `migrate*.sql` are PostgreSQL's own (its clock;
//! the per-id locks of enqueue, purge and delete; the session settings; the wake-up of idle
//! workers; `enqueue_in` on the caller's connection; the planner's statistics after a large
//! enqueue; the migration bookkeeping).

pub(super) const ENQUEUE: &str = include_str!("sql/enqueue.sql");
pub(super) const STATE: &str = include_str!("sql/state.sql");
pub(super) const CLAIM: &str = include_str!("sql/claim.sql");
pub(super) const RENEW: &str = include_str!("sql/renew.sql");
pub(super) const RENEW_BATCH: &str = include_str!("sql/renew_batch.sql");
pub(super) const COMPLETE: &str = include_str!("sql/complete.sql");
pub(super) const COMPLETE_BATCH: &str = include_str!("sql/complete_batch.sql");
pub(super) const RELEASE: &str = include_str!("sql/release.sql");
pub(super) const CLAIM_NEXT: &str = include_str!("sql/claim_next.sql");
pub(super) const CLAIM_BATCH: &str = include_str!("sql/claim_batch.sql");
pub(super) const CLAIM_BATCH_IN: &str = include_str!("sql/claim_batch_in.sql");
pub(super) const FAIL: &str = include_str!("sql/fail.sql");
pub(super) const CANCEL: &str = include_str!("sql/cancel.sql");
pub(super) const PURGEABLE: &str = include_str!("sql/purgeable.sql");
pub(super) const PURGE: &str = include_str!("sql/purge.sql");
pub(super) const RETRY: &str = include_str!("sql/retry.sql");
pub(super) const RETRY_DEAD: &str = include_str!("sql/retry_dead.sql");
pub(super) const DELETE: &str = include_str!("sql/delete.sql");
pub(super) const LIST: &str = include_str!("sql/list.sql");
pub(super) const INSPECT: &str = include_str!("sql/inspect.sql");
pub(super) const ADMIT: &str = include_str!("sql/admit.sql");
pub(super) const ENQUEUE_MATCH: &str = include_str!("sql/enqueue_match.sql");
pub(super) const PAUSE: &str = include_str!("sql/pause.sql");
pub(super) const RESUME: &str = include_str!("sql/resume.sql");
pub(super) const QUEUES: &str = include_str!("sql/queues.sql");
pub(super) const LISTEN: &str = include_str!("sql/listen.sql");
pub(super) const NOTIFY: &str = include_str!("sql/notify.sql");
pub(super) const PLANNER_ROWS: &str = include_str!("sql/planner_rows.sql");
pub(super) const ANALYZE_JOBS: &str = include_str!("sql/analyze_jobs.sql");
pub(super) const SEARCH_PATH_PUSH: &str = include_str!("sql/search_path_push.sql");
pub(super) const SEARCH_PATH_POP: &str = include_str!("sql/search_path_pop.sql");
pub(super) const DATABASE_NOW: &str = include_str!("sql/database_now.sql");
pub(super) const LOCK_IDS: &str = include_str!("sql/lock_ids.sql");
pub(super) const SESSION: &str = include_str!("sql/session.sql");
pub(super) const MIGRATE_LOCK: &str = include_str!("sql/migrate_lock.sql");
pub(super) const JOB_COLUMNS: &str = include_str!("sql/job_columns.sql");
pub(super) const MIGRATE_SCHEMA: &str = include_str!("sql/migrate_schema.sql");
pub(super) const MIGRATIONS_APPLIED: &str = include_str!("sql/migrations_applied.sql");
pub(super) const MIGRATION_RECORD: &str = include_str!("sql/migration_record.sql");
pub(super) const LOSE: &str = include_str!("sql/lose.sql");
pub(super) const HISTORY_ATTEMPTS: &str = include_str!("sql/history_attempts.sql");
pub(super) const HISTORY_REFUSALS: &str = include_str!("sql/history_refusals.sql");
#[cfg(feature = "cron")]
pub(super) const SCHEDULE_ADD: &str = include_str!("sql/schedule_add.sql");
#[cfg(feature = "cron")]
pub(super) const SCHEDULE_REMOVE: &str = include_str!("sql/schedule_remove.sql");
#[cfg(feature = "cron")]
pub(super) const SCHEDULES: &str = include_str!("sql/schedules.sql");
#[cfg(feature = "cron")]
pub(super) const SCHEDULER_CHECK: &str = include_str!("sql/scheduler_check.sql");
#[cfg(feature = "cron")]
pub(super) const SCHEDULE_ADVANCE: &str = include_str!("sql/schedule_advance.sql");
#[cfg(feature = "cron")]
pub(super) const REFUSE: &str = include_str!("sql/refuse.sql");
pub(super) const OVERVIEW_EXPIRING: &str = include_str!("sql/overview_expiring.sql");
pub(super) const OVERVIEW_OLDEST_READY: &str = include_str!("sql/overview_oldest_ready.sql");
pub(super) const OVERVIEW_REFUSED: &str = include_str!("sql/overview_refused.sql");
pub(super) const OVERVIEW_THROUGHPUT: &str = include_str!("sql/overview_throughput.sql");
pub(super) const FIND_JOBS: &str = include_str!("sql/find_jobs.sql");
pub(super) const FIND_JOBS_OLDEST: &str = include_str!("sql/find_jobs_oldest.sql");
pub(super) const FIND_JOBS_WINDOW: &str = include_str!("sql/find_jobs_window.sql");
pub(super) const FIND_JOBS_WINDOW_OLDEST: &str = include_str!("sql/find_jobs_window_oldest.sql");
pub(super) const FIND_JOBS_BY_ID: &str = include_str!("sql/find_jobs_by_id.sql");
pub(super) const FIND_JOBS_WINDOW_BY_ID: &str = include_str!("sql/find_jobs_window_by_id.sql");
pub(super) const FENCES: &str = include_str!("sql/fences.sql");
pub(super) const RECORD_AUDIT: &str = include_str!("sql/record_audit.sql");
pub(super) const AUDIT_LOG: &str = include_str!("sql/audit_log.sql");
pub(super) const SERIAL: &str = include_str!("sql/serial.sql");
