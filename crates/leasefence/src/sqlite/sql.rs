//! The statements, one file each in `sql/`, named after the operation that runs them; each
//! file is exactly the SQL that runs (nothing is spliced or rewritten), and its header says in
//! which transaction. `refuse.sql` is SQLite's own: PostgreSQL counts a refused write in the
//! fenced statement itself (its `refused` step), SQLite in a statement after it, inside the same
//! `BEGIN IMMEDIATE`.

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
pub(super) const CLAIM_NEXT_IN: &str = include_str!("sql/claim_next_in.sql");
pub(super) const BURY: &str = include_str!("sql/bury.sql");
pub(super) const FAIL: &str = include_str!("sql/fail.sql");
pub(super) const CANCEL: &str = include_str!("sql/cancel.sql");
pub(super) const PURGE: &str = include_str!("sql/purge.sql");
pub(super) const RETRY: &str = include_str!("sql/retry.sql");
pub(super) const RETRY_DEAD: &str = include_str!("sql/retry_dead.sql");
pub(super) const DELETE: &str = include_str!("sql/delete.sql");
pub(super) const FENCE_FLOOR: &str = include_str!("sql/fence_floor.sql");
pub(super) const LIST: &str = include_str!("sql/list.sql");
pub(super) const INSPECT: &str = include_str!("sql/inspect.sql");
pub(super) const ADMIT: &str = include_str!("sql/admit.sql");
pub(super) const ENQUEUE_MATCH: &str = include_str!("sql/enqueue_match.sql");
pub(super) const PAUSE: &str = include_str!("sql/pause.sql");
pub(super) const RESUME: &str = include_str!("sql/resume.sql");
pub(super) const QUEUES: &str = include_str!("sql/queues.sql");
pub(super) const REFUSE: &str = include_str!("sql/refuse.sql");
pub(super) const LOSE: &str = include_str!("sql/lose.sql");
pub(super) const LOSE_EXPIRED: &str = include_str!("sql/lose_expired.sql");
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

#[cfg(test)]
mod tests;
